// Block-wide building blocks shared by the engine's kernel and the ladder's variants.
// Exact integer arithmetic: products are int64 (|factor| < 2^31), sums are 128-bit.
#pragma once

typedef __int128 i128;
typedef unsigned long long u64;

__device__ __forceinline__ u64 low_word(i128 v) { return (u64)v; }
__device__ __forceinline__ u64 high_word(i128 v) { return (u64)((unsigned __int128)v >> 64); }
__device__ __forceinline__ i128 from_words(u64 lo, u64 hi) {
    return (i128)(((unsigned __int128)hi << 64) | lo);
}

// Shuffles move 64 bits at most, so a 128-bit value travels as two words.
__device__ __forceinline__ i128 shfl_down(i128 v, int offset) {
    return from_words(__shfl_down_sync(0xffffffffu, low_word(v), offset),
                      __shfl_down_sync(0xffffffffu, high_word(v), offset));
}

__device__ __forceinline__ long long shfl_down(long long v, int offset) {
    return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ __forceinline__ u64 shfl_down(u64 v, int offset) {
    return __shfl_down_sync(0xffffffffu, v, offset);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += shfl_down(v, offset);
    return v;
}

// Four predicate bits from one vector of keys.
__device__ __forceinline__ unsigned select_mask(int4 k, long long z) {
    return (unsigned)(k.x < z) | (unsigned)(k.y < z) << 1 | (unsigned)(k.z < z) << 2 |
           (unsigned)(k.w < z) << 3;
}

// ---- Decoding inside the scan (layouts: gquery/encodings.py) --------------------------------

// `width` bits at bit offset `bit` of a little-endian uint32 stream; the stream is padded so the
// third word is always readable. Offsets are taken from a reference in uint64, so they wrap.
__device__ __forceinline__ u64 extract_bits(const unsigned* __restrict__ words, unsigned bit, unsigned width) {
    const unsigned i = bit >> 5, shift = bit & 31;
    u64 v = ((u64)__ldg(words + i) | ((u64)__ldg(words + i + 1) << 32)) >> shift;
    if (shift + width > 64) v |= (u64)__ldg(words + i + 2) << (64 - shift);
    return width >= 64 ? v : v & ((1ull << width) - 1);
}

// One frame's metadata: its reference and (word offset << 8) | width.
struct Frame {
    long long reference;
    const unsigned* words;  // the frame's first word
    unsigned width;
};

// A frame from its two metadata words. `base`: the word offset the `words` pointer starts at (a
// streamed chunk holds a slice of words).
__device__ __forceinline__ Frame frame_from(longlong2 m, const unsigned* words, long long base) {
    return Frame{m.x, words + ((m.y >> 8) - base), (unsigned)(m.y & 0xFF)};
}

__device__ __forceinline__ Frame load_frame(const long long* __restrict__ meta, const unsigned* words,
                                            long long base, long long frame) {
    return frame_from(__ldg(reinterpret_cast<const longlong2*>(meta) + frame), words, base);
}

// Value of slot `slot` of a frame (the column's common factor left out: the host multiplies the sum).
__device__ __forceinline__ long long decode_slot(const Frame& f, unsigned slot) {
    return (long long)((u64)f.reference + extract_bits(f.words, slot * f.width, f.width));
}

// ---- Frame tiles: a warp stages one frame's words in shared memory, then decodes it there ------
// Async copies (cp.async) put every 16-byte piece of a frame in flight at once, without registers:
// one round trip to memory a frame, then shared-memory reads only. Frames start 16-byte aligned.
// Written in PTX as cuda_pipeline.h writes them, so a kernel needs no header of the toolkit (NVRTC).
__device__ __forceinline__ void copy_16_async(unsigned* shared_to, const unsigned* from) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                 :: "r"((unsigned)__cvta_generic_to_shared(shared_to)), "l"(from) : "memory");
}

__device__ __forceinline__ void stage_async(unsigned* tile, const unsigned* words, unsigned n, unsigned lane) {
    for (unsigned i = 4 * lane; i < n; i += 128) copy_16_async(tile + i, words + i);
}

__device__ __forceinline__ void staged_wait() {
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncwarp();
}

// Slot `slot` of a staged frame of `width` bits a slot. With lane l reading slot 32 j + l, a warp's
// 32 reads fall on `width` consecutive words: no bank conflicts up to 32 bits. The tile is padded
// by 2 words, so the words after the last slot's first are readable.
__device__ __forceinline__ u64 staged_bits(const unsigned* tile, unsigned slot, unsigned width) {
    const unsigned bit = slot * width, i = bit >> 5, shift = bit & 31;
    if (width <= 32) {
        const unsigned v = __funnelshift_r(tile[i], tile[i + 1], shift);
        return width == 32 ? v : v & ((1u << width) - 1u);
    }
    u64 v = ((u64)tile[i] | ((u64)tile[i + 1] << 32)) >> shift;
    if (shift + width > 64) v |= (u64)tile[i + 2] << (64 - shift);
    return width >= 64 ? v : v & ((1ull << width) - 1);
}

// A lane's walk through a staged frame of width <= 32 bits a slot: slot 32 j + lane starts at word
// j x width + (lane x width) / 32, at the same bit for every j, so a value is two shared reads, a
// funnel shift and a mask, with the shift and mask fixed for the frame, and a step of `width` words.
struct Cursor {
    const unsigned* word;  // the lane's next slot's first word
    unsigned width, shift, mask;
};

__device__ __forceinline__ Cursor cursor(const unsigned* tile, unsigned width, unsigned lane) {
    const unsigned bit = lane * width;
    return Cursor{tile + (bit >> 5), width, bit & 31, width >= 32 ? 0xFFFFFFFFu : (1u << width) - 1u};
}

__device__ __forceinline__ unsigned next_value(Cursor& c) {
    const unsigned v = __funnelshift_r(c.word[0], c.word[1], c.shift) & c.mask;
    c.word += c.width;
    return v;
}

// Words a column's region of a tile takes: the frame's 32 x width, 2 spare, rounded to 16 bytes.
__device__ __forceinline__ unsigned region_words(unsigned width) { return 32 * width + 4; }

// Rows a vector of 4 holds when the launch ends inside it.
__device__ __forceinline__ unsigned valid_rows(long long first_row, long long rows) {
    const long long left = rows - first_row;
    return left >= 4 ? 0xFu : (1u << left) - 1u;
}

// ---- Exact sums of several 128-bit values and counters over a block --------------------------
// `warps`: the block's warps when it is launched narrower than THREADS (frame tiles).
template <int THREADS, int SUMS, int COUNTS>
__device__ __forceinline__ void block_reduce(i128 (&sum)[SUMS], u64 (&count)[COUNTS], int warps = THREADS / 32) {
    constexpr int WARPS = THREADS / 32;
    __shared__ u64 lanes[2 * SUMS + COUNTS][WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int s = 0; s < SUMS; ++s) sum[s] = warp_sum(sum[s]);
#pragma unroll
    for (int c = 0; c < COUNTS; ++c) count[c] = warp_sum(count[c]);
    if (lane == 0) {
#pragma unroll
        for (int s = 0; s < SUMS; ++s) lanes[2 * s][warp] = low_word(sum[s]), lanes[2 * s + 1][warp] = high_word(sum[s]);
#pragma unroll
        for (int c = 0; c < COUNTS; ++c) lanes[2 * SUMS + c][warp] = count[c];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int s = 0; s < SUMS; ++s)
            sum[s] = warp_sum(lane < warps ? from_words(lanes[2 * s][lane], lanes[2 * s + 1][lane]) : (i128)0);
#pragma unroll
        for (int c = 0; c < COUNTS; ++c) count[c] = warp_sum(lane < warps ? lanes[2 * SUMS + c][lane] : 0ull);
    }
}

// A 128-bit atomic add from two 64-bit ones: the low word's wrap-around carries into the high word.
__device__ __forceinline__ void atomic_add_128(u64* acc, i128 v) {
    const u64 lo = low_word(v);
    const u64 old = atomicAdd(acc, lo);
    atomicAdd(acc + 1, high_word(v) + (old + lo < old ? 1ull : 0ull));
}
