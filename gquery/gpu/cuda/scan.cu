// The engine's scan: decode inside the scan, predicate, exact sum, in one pass.
//   SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < z
// Each column's load is a compile-time primitive chosen by the plan (gquery/plan.py), so the kernel
// body reads like the plan: decide the key of 4 rows, load factors only where a row passed, sum.
// Pointers may be device memory (resident, or a streamed chunk) or mapped host memory (zero-copy):
// the kernel cannot tell and need not.
// Two loops over the rows, chosen by the plan: vectors (a thread takes 4 rows at a time, loading
// each value where it lies: plain columns, and factors read sparsely from mapped host memory) and
// frame tiles (TILES: a warp takes a frame of FRAME_ROWS rows, stages its packed words in shared
// memory in one round trip, and decodes them there: packed factors in device memory). An indexed key
// has a loop of its own, over its bucket lists rather than the rows (scan_lists).
// Injected by gquery.gpu.kernels: BLOCK_THREADS, VECTORS_PER_THREAD, MIN_BLOCKS_PER_SM,
// KEY_ENCODING, FACTOR_ENCODING, LOW_BYTES, WIDE_PRODUCT, FRAME_ROWS, TILES, ID_BYTES.
#include "tile.cuh"

#define PLAIN 0
#define PACKED 1
#define SLICED 2
#define INDEXED 3

#if !defined(BLOCK_THREADS) || !defined(VECTORS_PER_THREAD) || !defined(MIN_BLOCKS_PER_SM) || \
    !defined(KEY_ENCODING) || !defined(FACTOR_ENCODING) || !defined(LOW_BYTES) ||             \
    !defined(WIDE_PRODUCT) || !defined(FRAME_ROWS) || !defined(TILES) || !defined(ID_BYTES)
#error "the scan's geometry and encodings are injected by gquery.gpu.kernels"
#endif
#if TILES && (FACTOR_ENCODING != PACKED || KEY_ENCODING == PLAIN || KEY_ENCODING == INDEXED)
#error "frame tiles decode packed factors and a packed or sliced key"
#endif
#if KEY_ENCODING == INDEXED && (FACTOR_ENCODING != PACKED || (ID_BYTES != 4 && ID_BYTES != 8))
#error "the list loop gathers packed factors by 4- or 8-byte row ids"
#endif

#if LOW_BYTES == 1
typedef unsigned char low_t;
#elif LOW_BYTES == 2
typedef unsigned short low_t;
#elif LOW_BYTES == 4
typedef unsigned int low_t;
#else
typedef unsigned long long low_t;
#endif

// Counters the profile reads back: rows selected, vectors whose factors were read, low-key reads.
enum { SELECTED, FACTOR_VECTORS, LOW_READS, COUNTERS };
constexpr int SUMS = WIDE_PRODUCT ? 2 : 1;  // wide: low and high words of the products, apart

struct Key {
    const void* data;  // plain: int32 keys · packed: words · sliced: top bytes · indexed: row ids
    const void* aux;  // packed: frame metadata · sliced, indexed: low bits
    long long base;  // packed: the word offset `data` starts at · indexed: entries that pass outright
};

// A packed factor's common factor is not applied here: the sum of the products of the values
// without it, times both factors, is the answer (the host multiplies once).
struct Factor {
    const void* data;  // plain: int64 values · packed: words
    const long long* meta;  // packed: frame metadata
    long long base;
};

// Predicate bits of the 4 rows of vector v (row 4v on); low-key reads are counted.
__device__ __forceinline__ unsigned key_mask(const Key& k, long long v, long long rows, long long z,
                                             long long z_top, long long z_low, u64& low_reads) {
    const long long row = v << 2;
    const unsigned valid = valid_rows(row, rows);
#if KEY_ENCODING == PLAIN
    if (valid == 0xFu) return select_mask(__ldcs(reinterpret_cast<const int4*>(k.data) + v), z);
    unsigned m = 0;
    for (int j = 0; j < 4; ++j)
        if (valid >> j & 1) m |= (unsigned)(reinterpret_cast<const int*>(k.data)[row + j] < z) << j;
    return m;
#elif KEY_ENCODING == PACKED
    const Frame f = load_frame(reinterpret_cast<const long long*>(k.aux), reinterpret_cast<const unsigned*>(k.data),
                               k.base, row / FRAME_ROWS);
    const unsigned slot = (unsigned)(row % FRAME_ROWS);
    unsigned m = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) m |= (unsigned)(decode_slot(f, slot + j) < z) << j;
    return m & valid;
#else  // SLICED: the top byte decides unless it ties z's; then the low bits are read
    const unsigned tops = __ldcs(reinterpret_cast<const unsigned*>(k.data) + v);  // 4 top bytes
    unsigned m = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const long long top = (tops >> (8 * j)) & 0xFF;
        bool pass = top < z_top;
#if LOW_BYTES > 0
        if (top == z_top && (valid >> j & 1)) {
            pass = (long long)reinterpret_cast<const low_t*>(k.aux)[row + j] < z_low;
            low_reads += 1;
        }
#endif
        m |= (unsigned)pass << j;
    }
    return m & valid;
#endif
}

__device__ __forceinline__ void add_product(i128 (&sum)[SUMS], long long q, long long p) {
#if WIDE_PRODUCT
    const i128 product = (i128)q * (i128)p;  // |q|, |p| < 2^63: exact in 128 bits
    sum[0] += (i128)(u64)product;  // each sum stays far inside 128 bits for < 2^63 rows
    sum[1] += (i128)(long long)(product >> 64);
#else
    sum[0] += (i128)(q * p);  // the plan proved |q x p| < 2^63 for every row
#endif
}

// The factors of the selected rows of vector v, multiplied and summed.
__device__ __forceinline__ void sum_selected(const Factor& q, const Factor& p, long long v, unsigned mask,
                                             i128 (&sum)[SUMS]) {
#if FACTOR_ENCODING == PLAIN
    const longlong2* q2 = reinterpret_cast<const longlong2*>(q.data) + 2 * v;
    const longlong2* p2 = reinterpret_cast<const longlong2*>(p.data) + 2 * v;
    if (mask == 0xFu || (mask & 0x3u && mask & 0xCu)) {  // both halves needed: 16-byte loads
        const longlong2 qa = __ldcs(q2), qb = __ldcs(q2 + 1), pa = __ldcs(p2), pb = __ldcs(p2 + 1);
        if (mask & 1) add_product(sum, qa.x, pa.x);
        if (mask & 2) add_product(sum, qa.y, pa.y);
        if (mask & 4) add_product(sum, qb.x, pb.x);
        if (mask & 8) add_product(sum, qb.y, pb.y);
    } else {  // one half only (this also keeps the last vector's loads inside the rows)
        const int h = (mask & 0x3u) ? 0 : 1;
        const longlong2 qh = __ldcs(q2 + h), ph = __ldcs(p2 + h);
        if (mask >> (2 * h) & 1) add_product(sum, qh.x, ph.x);
        if (mask >> (2 * h + 1) & 1) add_product(sum, qh.y, ph.y);
    }
#else
    const long long row = v << 2, frame = row / FRAME_ROWS;
    const unsigned slot = (unsigned)(row % FRAME_ROWS);
    const Frame fq = load_frame(q.meta, reinterpret_cast<const unsigned*>(q.data), q.base, frame);
    const Frame fp = load_frame(p.meta, reinterpret_cast<const unsigned*>(p.data), p.base, frame);
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (mask >> j & 1) add_product(sum, decode_slot(fq, slot + j), decode_slot(fp, slot + j));
#endif
}

// ---- The vector loop: a thread takes vectors of 4 rows, a block VECTORS_PER_THREAD x its threads
__device__ __forceinline__ void scan_vectors(const Key& key, const Factor& q, const Factor& p, long long rows,
                                             long long z, long long z_top, long long z_low, i128 (&sum)[SUMS],
                                             u64 (&count)[COUNTERS]) {
    const long long vectors = (rows + 3) >> 2;
    const long long tile = (long long)BLOCK_THREADS * VECTORS_PER_THREAD;
    for (long long first = blockIdx.x * tile + threadIdx.x; first < vectors; first += gridDim.x * tile) {
        unsigned mask[VECTORS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) {  // every key load in flight before any use
            const long long v = first + i * BLOCK_THREADS;
            mask[i] = v < vectors ? key_mask(key, v, rows, z, z_top, z_low, count[LOW_READS]) : 0u;
        }
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) {
            if (mask[i] == 0) continue;  // late materialization: no factor byte for a failing vector
            sum_selected(q, p, first + i * BLOCK_THREADS, mask[i], sum);
            count[SELECTED] += __popc(mask[i]);
            count[FACTOR_VECTORS] += 1;
        }
    }
}

#if KEY_ENCODING == INDEXED
#if ID_BYTES == 8
typedef u64 row_id_t;
#else
typedef unsigned row_id_t;
#endif

// q x p of one row, wherever it lies: its frames' metadata, then its bits (a gather: 4 reads).
__device__ __forceinline__ void add_row(const Factor& q, const Factor& p, long long row, i128 (&sum)[SUMS]) {
    const long long frame = row / FRAME_ROWS;
    const unsigned slot = (unsigned)(row % FRAME_ROWS);
    const Frame fq = load_frame(q.meta, reinterpret_cast<const unsigned*>(q.data), q.base, frame);
    const Frame fp = load_frame(p.meta, reinterpret_cast<const unsigned*>(p.data), p.base, frame);
    add_product(sum, decode_slot(fq, slot), decode_slot(fp, slot));
}

// ---- The list loop (indexed key): entries 0 .. key.base - 1 of the lists are the rows of the
// buckets below Z's, and pass; entries key.base .. entries - 1 are Z's own bucket, where the low
// bits decide. A thread takes VECTORS_PER_THREAD entries a step, a warp's reads of neighbouring
// entries coalesced, every read in flight before a passing row's factors are gathered.
__device__ __forceinline__ void scan_lists(const Key& key, const Factor& q, const Factor& p, long long entries,
                                           long long z_low, i128 (&sum)[SUMS], u64 (&count)[COUNTERS]) {
    const row_id_t* ids = reinterpret_cast<const row_id_t*>(key.data);
    const long long passed = key.base, tile = (long long)BLOCK_THREADS * VECTORS_PER_THREAD;
    for (long long first = blockIdx.x * tile + threadIdx.x; first < entries; first += gridDim.x * tile) {
        bool pass[VECTORS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) {
            const long long e = first + i * BLOCK_THREADS;
            pass[i] = e < passed && e < entries;
#if LOW_BYTES > 0
            if (e >= passed && e < entries) {
                pass[i] = (long long)reinterpret_cast<const low_t*>(key.aux)[e] < z_low;
                count[LOW_READS] += 1;
            }
#endif  // no low bits: a bucket is one key, and Z's own fails key < Z
        }
        long long row[VECTORS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) row[i] = pass[i] ? (long long)ids[first + i * BLOCK_THREADS] : -1;
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) {
            if (row[i] < 0) continue;
            add_row(q, p, row[i], sum);
            count[SELECTED] += 1;
        }
    }
}
#endif

#if TILES
// ---- The frame loop: warp w of the grid takes frames w, w + warps, ... Lane l handles slots
// l, 32 + l, ..., 992 + l of a frame (bit j of its masks: slot 32 j + l). A warp's tile (the host
// sizes dynamic shared memory: a tile a warp) holds a key region, then the frame's two factors;
// once a frame's key is decided, the next frame's key is copied into the region under its factors.
extern __shared__ __align__(16) unsigned tiles[];

__device__ __forceinline__ unsigned dynamic_shared_bytes() {
    unsigned n;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

// Words a key region takes: a packed frame's at the column's widest (`key_width`), or 1024 top bytes.
__device__ __forceinline__ unsigned key_region_words(unsigned key_width) {
    return KEY_ENCODING == PACKED ? region_words(key_width) : FRAME_ROWS / 4;
}

// The metadata of 32 of a warp's frames, one a lane (the key's when packed, both factors'): loaded
// in one instruction a column, handed to the whole warp by shuffles when used.
struct MetaBatch {
    longlong2 key, q, p;
};

__device__ __forceinline__ MetaBatch load_batch(const Key& k, const Factor& q, const Factor& p, long long f,
                                                long long frames) {
    MetaBatch m{};
    if (f < frames) {
#if KEY_ENCODING == PACKED
        m.key = __ldg(reinterpret_cast<const longlong2*>(k.aux) + f);
#endif
        m.q = __ldg(reinterpret_cast<const longlong2*>(q.meta) + f);
        m.p = __ldg(reinterpret_cast<const longlong2*>(p.meta) + f);
    }
    return m;
}

__device__ __forceinline__ longlong2 from_lane(longlong2 v, unsigned lane) {
    return make_longlong2(__shfl_sync(0xFFFFFFFFu, v.x, lane), __shfl_sync(0xFFFFFFFFu, v.y, lane));
}

__device__ __forceinline__ Frame key_frame(const Key& k, longlong2 m) {
    return frame_from(m, reinterpret_cast<const unsigned*>(k.data), k.base);
}

// Put frame f's key in flight into `region`.
__device__ __forceinline__ void stage_key(const Key& k, long long f, const Frame& fk, unsigned* region, unsigned lane) {
#if KEY_ENCODING == PACKED
    stage_async(region, fk.words, 32 * fk.width, lane);
#else  // SLICED: the frame's top bytes (whole frames: the column is padded)
    stage_async(region, reinterpret_cast<const unsigned*>(k.data) + f * (FRAME_ROWS / 4), FRAME_ROWS / 4, lane);
#endif
}

// Bit j: slot 32 j + lane passes. Packed: offset < z - reference. Sliced: the top byte decides, or
// (ties) the low bits, read where they lie, 4 at a time so that they wait one round trip, not one each.
__device__ __forceinline__ unsigned frame_key_mask(const Key& k, const unsigned* region, const Frame& fk,
                                                   long long first_row, unsigned valid, unsigned lane, long long z,
                                                   long long z_top, long long z_low, u64& low_reads) {
    unsigned pass = 0, live = 0;
#if KEY_ENCODING == PACKED
    const u64 below = z > fk.reference ? (u64)z - (u64)fk.reference : 0;  // offsets below this pass
    if (below != 0 && fk.width <= 32) {
        const unsigned last = below > 0xFFFFFFFFull ? 0xFFFFFFFFu : (unsigned)(below - 1);  // offsets <= last pass
        Cursor c = cursor(region, fk.width, lane);
#pragma unroll
        for (int j = 0; j < 32; ++j) pass |= (unsigned)(next_value(c) <= last) << j;
    } else if (below != 0) {
#pragma unroll 4
        for (int j = 0; j < 32; ++j) pass |= (unsigned)(staged_bits(region, 32 * j + lane, fk.width) < below) << j;
    }
#else
    unsigned tie = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const long long top = reinterpret_cast<const unsigned char*>(region)[32 * j + lane];
        pass |= (unsigned)(top < z_top) << j;
        tie |= (unsigned)(top == z_top) << j;
    }
#endif
    if (valid >= FRAME_ROWS) {
        live = 0xFFFFFFFFu;
    } else {
        for (int j = 0; j < 32; ++j) live |= (unsigned)(32u * j + lane < valid) << j;
    }
#if KEY_ENCODING == SLICED && LOW_BYTES > 0
    tie &= live;
    low_reads += __popc(tie);
    const low_t* low = reinterpret_cast<const low_t*>(k.aux) + first_row + lane;
    while (tie) {
        unsigned js[4];
        low_t lows[4];
#pragma unroll
        for (int n = 0; n < 4; ++n) {
            js[n] = tie ? __ffs(tie) - 1 : 32;
            tie &= tie - 1;
            if (js[n] < 32) lows[n] = low[32 * js[n]];
        }
#pragma unroll
        for (int n = 0; n < 4; ++n)
            if (js[n] < 32) pass |= (unsigned)((long long)lows[n] < z_low) << js[n];
    }
#endif
    return pass & live;
}

// Sum of q x p over the selected slots of a staged frame. Each value is reference + offset, so
//   sum (rq + oq)(rp + op) = n rq rp + rq sum(op) + rp sum(oq) + sum(oq op)
// and when both widths are <= 32 and add up to <= 58, the three sums fit 64 bits for 32 slots:
// a 32 x 32-bit multiply and three adds a row, the 128-bit terms once a frame. Exact modulo
// 2^128, which holds the total for 64-bit products (the plan's guarantee); 128-bit products and
// wider frames go value by value.
__device__ __forceinline__ void sum_frame(const unsigned* tq, const Frame& fq, const unsigned* tp, const Frame& fp,
                                          unsigned mask, unsigned lane, i128 (&sum)[SUMS]) {
    if (!WIDE_PRODUCT && fq.width <= 32 && fp.width <= 32 && fq.width + fp.width <= 58) {
        u64 sq = 0, sp = 0, sqp = 0;
        Cursor cq = cursor(tq, fq.width, lane), cp = cursor(tp, fp.width, lane);
#pragma unroll 8
        for (int j = 0; j < 32; ++j) {  // no branch: a row that failed adds zeros
            const unsigned take = 0u - (mask >> j & 1u);
            const unsigned oq = next_value(cq) & take, op = next_value(cp) & take;
            sq += oq, sp += op, sqp += (u64)oq * op;
        }
        const long long n = __popc(mask);
        sum[0] += (i128)fq.reference * ((i128)fp.reference * n) + (i128)fq.reference * (i128)sp +
                  (i128)fp.reference * (i128)sq + (i128)sqp;
        return;
    }
#pragma unroll 4
    for (int j = 0; j < 32; ++j) {
        const unsigned slot = 32 * j + lane;
        if (mask >> j & 1)
            add_product(sum, (long long)((u64)fq.reference + staged_bits(tq, slot, fq.width)),
                        (long long)((u64)fp.reference + staged_bits(tp, slot, fp.width)));
    }
}

// `key_width`: the key's widest frame (packed), which sizes the key region. The warp's t-th frame:
// its key landed (staged a frame earlier); decide it; put its factors and the next frame's key in
// flight; wait for the factors only; sum. Metadata comes in batches of 32 frames: one wait in 32.
__device__ __forceinline__ void scan_frames(const Key& key, const Factor& q, const Factor& p, long long rows,
                                            unsigned key_width, long long z, long long z_top, long long z_low,
                                            i128 (&sum)[SUMS], u64 (&count)[COUNTERS]) {
    const unsigned lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    unsigned* const tile = tiles + (threadIdx.x >> 5) * (dynamic_shared_bytes() / 4 / warps);
    unsigned* const tq = tile + key_region_words(key_width);
    const long long frames = (rows + FRAME_ROWS - 1) / FRAME_ROWS, stride = (long long)gridDim.x * warps;
    long long f = (long long)blockIdx.x * warps + (threadIdx.x >> 5);
    MetaBatch batch = load_batch(key, q, p, f + lane * stride, frames);
    if (f < frames) stage_key(key, f, key_frame(key, from_lane(batch.key, 0)), tile, lane);
    __pipeline_commit();
    for (unsigned t = 0; f < frames; f += stride, ++t) {
        const unsigned at = t & 31;  // this frame's lane in the batch
        const Frame fk = key_frame(key, from_lane(batch.key, at));
        const Frame fq = frame_from(from_lane(batch.q, at), reinterpret_cast<const unsigned*>(q.data), q.base);
        const Frame fp = frame_from(from_lane(batch.p, at), reinterpret_cast<const unsigned*>(p.data), p.base);
        const long long first_row = f * FRAME_ROWS;
        const unsigned valid = (unsigned)min(rows - first_row, (long long)FRAME_ROWS);
        __pipeline_wait_prior(0);
        __syncwarp();
        const unsigned mask = frame_key_mask(key, tile, fk, first_row, valid, lane, z, z_top, z_low, count[LOW_READS]);
        const bool any = __any_sync(0xFFFFFFFFu, mask);  // late materialization: factors only where a row passed
        __syncwarp();  // every lane is done with the key region before the next key lands in it
        unsigned* const tp = tq + region_words(fq.width);
        if (any) {
            stage_async(tq, fq.words, 32 * fq.width, lane);
            stage_async(tp, fp.words, 32 * fp.width, lane);
        }
        __pipeline_commit();
        if (at == 31) batch = load_batch(key, q, p, f + (1 + lane) * stride, frames);  // the next 32 frames'
        if (f + stride < frames) stage_key(key, f + stride, key_frame(key, from_lane(batch.key, (at + 1) & 31)), tile, lane);
        __pipeline_commit();  // the next key's copy runs under this frame's factors
        if (any) {
            __pipeline_wait_prior(1);
            __syncwarp();
            sum_frame(tq, fq, tp, fp, mask, lane, sum);
            count[SELECTED] += __popc(mask);
            if (lane == 0) count[FACTOR_VECTORS] += FRAME_ROWS / 4;
        }
        __syncwarp();  // every lane is done with the factors before the next frame's land there
    }
    __pipeline_wait_prior(0);
}
#endif

// acc: SUMS 128-bit sums (2 words each) at acc[0..3], then the COUNTERS at acc[4..]; zeroed by
// the caller. Rows are 64-bit; a launch covers one chunk of `rows` rows (indexed: `rows` entries of
// the key's lists, the whole table's).
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, MIN_BLOCKS_PER_SM)
scan(const void* key_data, const void* key_aux, long long key_base,
     const void* q_data, const long long* q_meta, long long q_base,
     const void* p_data, const long long* p_meta, long long p_base,
     long long rows, long long key_width, long long z, long long z_top, long long z_low, u64* __restrict__ acc) {
    const Key key{key_data, key_aux, key_base};
    const Factor q{q_data, q_meta, q_base}, p{p_data, p_meta, p_base};
    i128 sum[SUMS] = {};
    u64 count[COUNTERS] = {};
#if KEY_ENCODING == INDEXED
    (void)key_width, (void)z, (void)z_top;
    scan_lists(key, q, p, rows, z_low, sum, count);
#elif TILES
    scan_frames(key, q, p, rows, (unsigned)key_width, z, z_top, z_low, sum, count);
#else
    (void)key_width;
    scan_vectors(key, q, p, rows, z, z_top, z_low, sum, count);
#endif
    block_reduce<BLOCK_THREADS, SUMS, COUNTERS>(sum, count, blockDim.x >> 5);
    if (threadIdx.x == 0 && (count[SELECTED] | count[LOW_READS]) != 0) {
#pragma unroll
        for (int s = 0; s < SUMS; ++s) atomic_add_128(acc + 2 * s, sum[s]);
#pragma unroll
        for (int c = 0; c < COUNTERS; ++c) atomicAdd(acc + 4 + c, count[c]);
    }
}
