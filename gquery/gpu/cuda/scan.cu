// The engine's scan: decode inside the scan, predicate, exact sum, in one pass.
//   SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < z
// Each column's load is a compile-time primitive chosen by the plan (gquery/plan.py), so the kernel
// body reads like the plan: decide the key of 4 rows, load factors only where a row passed, sum.
// Pointers may be device memory (resident, or a streamed chunk) or mapped host memory (zero-copy):
// the kernel cannot tell and need not.
// Injected by gquery.gpu.kernels: BLOCK_THREADS, VECTORS_PER_THREAD, MIN_BLOCKS_PER_SM,
// KEY_ENCODING, FACTOR_ENCODING, LOW_BYTES, WIDE_PRODUCT, FRAME_ROWS.
#include "tile.cuh"

#define PLAIN 0
#define PACKED 1
#define SLICED 2

#if !defined(BLOCK_THREADS) || !defined(VECTORS_PER_THREAD) || !defined(MIN_BLOCKS_PER_SM) || \
    !defined(KEY_ENCODING) || !defined(FACTOR_ENCODING) || !defined(LOW_BYTES) ||             \
    !defined(WIDE_PRODUCT) || !defined(FRAME_ROWS)
#error "the scan's geometry and encodings are injected by gquery.gpu.kernels"
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
    const void* data;  // plain: int32 keys · packed: words · sliced: top bytes
    const void* aux;  // packed: frame metadata · sliced: low bits
    long long base;  // packed: the word offset `data` starts at
};

struct Factor {
    const void* data;  // plain: int64 values · packed: words
    const long long* meta;  // packed: frame metadata
    long long base;
    long long factor;  // packed: the common factor
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
    for (int j = 0; j < 4; ++j) m |= (unsigned)(decode_slot(f, slot + j, 1) < z) << j;
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
        if (mask >> j & 1) add_product(sum, decode_slot(fq, slot + j, q.factor), decode_slot(fp, slot + j, p.factor));
#endif
}

// acc: SUMS 128-bit sums (2 words each) at acc[0..3], then the COUNTERS at acc[4..]; zeroed by
// the caller. Rows are 64-bit; a launch covers one chunk of `rows` rows.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, MIN_BLOCKS_PER_SM)
scan(const void* key_data, const void* key_aux, long long key_base,
     const void* q_data, const long long* q_meta, long long q_base, long long q_factor,
     const void* p_data, const long long* p_meta, long long p_base, long long p_factor,
     long long rows, long long z, long long z_top, long long z_low, u64* __restrict__ acc) {
    const Key key{key_data, key_aux, key_base};
    const Factor q{q_data, q_meta, q_base, q_factor}, p{p_data, p_meta, p_base, p_factor};
    const long long vectors = (rows + 3) >> 2;
    i128 sum[SUMS] = {};
    u64 count[COUNTERS] = {};
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
    block_reduce<BLOCK_THREADS, SUMS, COUNTERS>(sum, count);
    if (threadIdx.x == 0 && (count[SELECTED] | count[LOW_READS]) != 0) {
#pragma unroll
        for (int s = 0; s < SUMS; ++s) atomic_add_128(acc + 2 * s, sum[s]);
#pragma unroll
        for (int c = 0; c < COUNTERS; ++c) atomicAdd(acc + 4 + c, count[c]);
    }
}
