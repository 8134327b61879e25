// Tile primitives of the fused kernels that gquery/gpu/codegen.py writes, one a query shape.
// A warp takes a frame of FRAME_ROWS = 1024 rows at a time (lane l: slots l, 32 + l, ..., 992 + l), so
// a warp's 32 reads of one column fall on `width` consecutive words: every load coalesced, decoded
// where it lies (device memory, a streamed chunk, or mapped host memory read in place).
//   frame_of   a column's frame: its reference, its first word, its width (one broadcast load)
//   value_at   slot s of a frame: reference + its bits, times the column's common factor
//   frame_rows the rows of a frame (the table's last frame may be short)
//   sliced_value a predicate column read by its top byte a row (the sliced encoding), its low bits only
//              where the byte's bucket leaves the predicate undecided
// Accumulators: a block keeps WORDS words a group in shared memory (a row count, 128-bit sums as two
// words, min and max as one); FUSED_BEGIN sets them to INITIAL, the generated epilogue adds them to
// the table's words in global memory with 128-bit atomic adds (carries kept) and 64-bit atomic min/max.
// More groups than shared memory holds go straight to the table's words (FUSED_BEGIN_IN_DEVICE_MEMORY).
#pragma once
#include "tile.cuh"

#define FRAME_ROWS 1024
#define FULL_MASK 0xFFFFFFFFu
#define I64_MAX 9223372036854775807LL  // a MIN's identity (no <climits>: NVRTC has no C library)
#define I64_MIN (-I64_MAX - 1LL)         // a MAX's

enum { NEVER = 0, CHECK = 1, ALWAYS = 2 };  // a frame's class (gquery/prune.py)

__device__ __forceinline__ unsigned lane_id() { return threadIdx.x & 31; }

// Warp w of the grid takes frames w, w + warps, ...
__device__ __forceinline__ long long first_frame() { return (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); }
__device__ __forceinline__ long long frame_stride() { return (long long)gridDim.x * (blockDim.x >> 5); }

__device__ __forceinline__ unsigned frame_rows(long long f, long long rows) {
    const long long left = rows - f * FRAME_ROWS;
    return left >= FRAME_ROWS ? FRAME_ROWS : (unsigned)left;
}

// Bit j: slot 32 j + lane is a row of the frame.
__device__ __forceinline__ unsigned lanes_below(unsigned valid) {
    if (valid >= FRAME_ROWS) return FULL_MASK;
    unsigned m = 0;
    for (int j = 0; j < 32; ++j) m |= (unsigned)(32u * j + lane_id() < valid) << j;
    return m;
}

// Frame f of a column whose metadata starts at this chunk's first frame; `base`: the word offset its
// `words` pointer starts at (a streamed chunk holds a slice of the words; 0 where they lie whole).
__device__ __forceinline__ Frame frame_of(const unsigned* words, const longlong2* meta, long long base, long long f) {
    return frame_from(__ldg(meta + f), words, base);
}

__device__ __forceinline__ long long value_at(const Frame& fr, unsigned slot, long long factor) {
    return (long long)((u64)fr.reference + extract_bits(fr.words, slot * fr.width, fr.width)) * factor;
}

// A predicate column sliced (encodings.Sliced): value = reference + bucket x top byte + low bits. Where the
// plan proved every atom on the column constant over a whole bucket (bit t of `undecided` clear), the
// bucket's first value stands for the row's own, so only rows of undecided buckets read their low bits
// (in place, a sector each): the column crosses the link at a byte a row. `row`: from the chunk's first row.
template <typename Low>
__device__ __forceinline__ long long sliced_value(const unsigned char* top, const Low* low, long long reference,
                                                  long long bucket, u64 u0, u64 u1, u64 u2, u64 u3, long long row,
                                                  bool valid) {
    const unsigned t = __ldg(top + row);
    const u64 word = t < 128 ? (t < 64 ? u0 : u1) : (t < 192 ? u2 : u3);
    long long v = reference + bucket * (long long)t;
    if (valid && (word >> (t & 63) & 1)) v += (long long)__ldg(low + row);
    return v;
}

// The index scan (codegen.list_source): a column's rows listed bucket after bucket, buckets of equal ranges of
// its values; `start[b]`: bucket b's first entry, from the first bucket the plan reads; start[buckets]: the end.
#define MAX_BUCKETS 256

// The bucket of entry e: the last b with start[b] <= e (a binary search of the block's shared copy).
__device__ __forceinline__ long long bucket_of(const long long* start, int buckets, long long e) {
    int lo = 0, hi = buckets;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (start[mid] <= e) lo = mid; else hi = mid;
    }
    return lo;
}

// x among a long IN list's constants: a binary search of the sorted set (in device or mapped host memory).
template <typename T>
__device__ __forceinline__ bool in_set(T x, const long long* set, long long n) {
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if ((T)__ldg(set + mid) < x) lo = mid + 1; else hi = mid;
    }
    return lo < n && (T)__ldg(set + lo) == x;
}

// A group's slot in a hash table of mask + 1 slots (each key EMPTY_KEY before the run): linear probing from the
// index's hash, a slot claimed by compare-and-swap. The table has twice the slots of the groups a run can
// select where memory allows (codegen.hash_slots); -1 after `probes` slots (the run is then refused).
#define EMPTY_KEY (-1LL)
__device__ __forceinline__ long long hash_slot(long long* keys, long long mask, long long key, long long probes) {
    u64 h = (u64)key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    long long at = (long long)(h & (u64)mask);
    for (long long probe = 0; probe <= mask && probe < probes; ++probe, at = (at + 1) & mask) {
        const long long seen = *(volatile long long*)(keys + at);
        if (seen == key) return at;
        if (seen == EMPTY_KEY) {
            const long long was = (long long)atomicCAS((unsigned long long*)(keys + at), (unsigned long long)EMPTY_KEY,
                                                       (unsigned long long)key);
            if (was == EMPTY_KEY || was == key) return at;
        }
    }
    return -1;
}

// A group's slot where its key passes 62 bits (codegen.KernelSpec.wide_keys): three words a slot, its state and
// its two columns' digits (each up to 64 bits: no digit value is free to mark an empty slot). The state is
// EMPTY_KEY, BUSY_KEY while the claiming thread writes the digits, else the key's NULL flags (a bit a column
// whose value is NULL, its digit 0). A probe that finds a slot BUSY waits for its digits: the claimer, in another
// warp (one lane of a warp probes), writes them, fences, and sets the state.
#define BUSY_KEY (-2LL)
__device__ __forceinline__ u64 wide_key_hash(long long flags, u64 d0, u64 d1) {
    u64 h = (d0 * 0x9E3779B97F4A7C15ull) ^ ((d1 + (u64)flags) * 0xC2B2AE3D27D4EB4Full);
    return h ^ (h >> 29);
}

__device__ __forceinline__ long long hash_slot_wide(long long* keys, long long mask, long long flags, u64 d0, u64 d1,
                                                    long long probes) {
    long long at = (long long)(wide_key_hash(flags, d0, d1) & (u64)mask);
    for (long long probe = 0; probe <= mask && probe < probes; ++probe, at = (at + 1) & mask) {
        long long* const slot = keys + 3 * at;
        long long state = *(volatile long long*)slot;
        if (state == EMPTY_KEY) {
            state = (long long)atomicCAS((unsigned long long*)slot, (unsigned long long)EMPTY_KEY, (unsigned long long)BUSY_KEY);
            if (state == EMPTY_KEY) {  // claimed: the digits, then the state that says they are there
                ((volatile u64*)slot)[1] = d0;
                ((volatile u64*)slot)[2] = d1;
                __threadfence();
                atomicExch((unsigned long long*)slot, (unsigned long long)flags);
                return at;
            }
        }
        while (state == BUSY_KEY) state = *(volatile long long*)slot;
        __threadfence();  // the digits written before the state was set are seen after it
        if (state == flags && ((volatile u64*)slot)[1] == d0 && ((volatile u64*)slot)[2] == d1) return at;
    }
    return -1;
}

// ORDER BY's first key of a filled slot (codegen.TopCut) as an unsigned word that orders as the key: the slot's
// index's digit of a group column (word < 0), its word, or a signed 128-bit sum saturated to 64 bits (it orders
// alike, or ties); flipped for ASC, so the greatest is always first; then offset by 2^63.
__device__ __forceinline__ u64 order_key(long long key, const u64* words, int word, int wide, int shift, long long mask,
                                         int ascending) {
    long long v;
    if (word < 0) {
        v = (key >> shift) & mask;
    } else if (wide) {
        const u64 lo = words[word];
        const long long hi = (long long)words[word + 1];
        v = hi == ((long long)lo >> 63) ? (long long)lo : hi < 0 ? I64_MIN : I64_MAX;
    } else {
        v = (long long)words[word];
    }
    return (u64)(ascending ? ~v : v) ^ 0x8000000000000000ull;
}

// A group's partition of 2^bits, from its index (a multiplicative hash's top bits): the same in every run.
__device__ __forceinline__ long long top_partition(long long key, int bits) {
    return (long long)(((u64)key * 0xD6E8FEB86659FD93ull) >> (64 - bits));
}

// A wide key's partition (hash_slot_wide's slot of three words): from its words' hash alike.
__device__ __forceinline__ long long top_partition_wide(const long long* slot, int bits) {
    return top_partition((long long)wide_key_hash(slot[0], (u64)slot[1], (u64)slot[2]), bits);
}

__device__ __forceinline__ long long warp_min(long long v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = min(v, __shfl_down_sync(FULL_MASK, v, offset));
    return v;
}

__device__ __forceinline__ long long warp_max(long long v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_down_sync(FULL_MASK, v, offset));
    return v;
}

// The block's accumulators, set to a group's initial words; and a thread's count of selected rows
// (a query without GROUP BY keeps its sums in registers and adds them to the block's words once).
#define FUSED_BEGIN(GROUPS_, WORDS_, INITIAL_)                                          \
    __shared__ u64 group_acc[(GROUPS_) * (WORDS_)];                                     \
    __shared__ u64 in_place_reads[2];                                                   \
    for (int i = threadIdx.x; i < (GROUPS_) * (WORDS_); i += blockDim.x)                \
        group_acc[i] = INITIAL_[i % (WORDS_)];                                          \
    if (threadIdx.x < 2) in_place_reads[threadIdx.x] = 0;                               \
    __syncthreads();                                                                    \
    u64 rows_selected = 0, frames_read = 0

// Groups past a block's shared memory: the warps add to the table's words in device memory (set to each
// group's INITIAL words before the launch) with the same warp-aggregated atomics, and no block merges.
#define FUSED_BEGIN_IN_DEVICE_MEMORY(ACC)                                               \
    u64* const group_acc = (ACC);                                                       \
    __shared__ u64 in_place_reads[2];                                                   \
    if (threadIdx.x < 2) in_place_reads[threadIdx.x] = 0;                               \
    __syncthreads();                                                                    \
    u64 rows_selected = 0, frames_read = 0

// What the kernel read of mapped host memory, for the profile: `in_place` columns of each selected
// row (a value each), and of each frame with a selected row (its metadata).
#define count_in_place(IN_PLACE, ROWS, FRAMES)                                                   \
    if (IN_PLACE) {                                                                              \
        atomicAdd(&in_place_reads[0], (u64)(IN_PLACE) * (ROWS));                                 \
        if (lane_id() == 0) atomicAdd(&in_place_reads[1], (u64)(IN_PLACE) * (FRAMES));           \
    }

#define flush_in_place(COUNTERS)                                                                 \
    if (threadIdx.x == 0 && (in_place_reads[0] | in_place_reads[1])) {                           \
        atomicAdd((COUNTERS), in_place_reads[0]);                                                \
        atomicAdd((COUNTERS) + 1, in_place_reads[1]);                                            \
    }
