// The course's optimization ladder (ETH Zurich, Data Processing on Modern Hardware, 2012) and its
// modern continuation, one kernel per step; gquery/ladder.py names them, launches them and sums what
// they return. Each kernel's comment names the one inefficiency it removes.
// Partial sums are int64 as in the course: the host checks before a run that no partial can
// overflow (rows per partial x largest product < 2^63) and adds the partials exactly.
// Injected by gquery/gpu/kernels.py: BLOCK_THREADS (the compile-time block size of later steps).
#include "tile.cuh"

typedef long long i64;

#ifndef BLOCK_THREADS
#error "BLOCK_THREADS is injected by gquery.gpu.kernels"
#endif

__device__ __forceinline__ i64 row_value(const int* k, const i64* q, const i64* p, i64 r, i64 z) {
    return k[r] < z ? q[r] * p[r] : 0;
}

// The samples' last-warp reduction, made safe for independent thread scheduling (Volta and later):
// each step reads, syncs the warp, then writes.
__device__ __forceinline__ void last_warp_shared(i64* s, unsigned t) {
    i64 v = s[t];
#pragma unroll
    for (int offset = 32; offset > 0; offset >>= 1) {
        v += s[t + offset];
        __syncwarp();
        s[t] = v;
        __syncwarp();
    }
}

// Sequential-addressing tree down to one warp, then the warp without barriers; total in s[0].
__device__ __forceinline__ void tree_then_last_warp(i64* s, unsigned t) {
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 32; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t < 32) last_warp_shared(s, t);
}

// simpleselect: the GPU selects and multiplies; every row's product crosses PCIe and the CPU sums.
extern "C" __global__ void select_multiply(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* out) {
    const i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n) out[r] = row_value(k, q, p, r, z);
}

// interleaved_tree: one partial per block instead of a product per row (less D2H, less CPU sum);
// its tree uses modulo and interleaved addressing: divergent warps and shared-memory bank conflicts.
extern "C" __global__ void reduce_interleaved(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    extern __shared__ i64 sdata[];
    const unsigned t = threadIdx.x;
    const i64 r = (i64)blockIdx.x * blockDim.x + t;
    sdata[t] = r < n ? row_value(k, q, p, r, z) : 0;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        if (t % (2 * s) == 0) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = sdata[0];
}

// sequential_addressing: active threads are contiguous and strides halve: no modulo, no divergence
// inside a warp, no bank conflicts.
extern "C" __global__ void reduce_sequential(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    extern __shared__ i64 sdata[];
    const unsigned t = threadIdx.x;
    const i64 r = (i64)blockIdx.x * blockDim.x + t;
    sdata[t] = r < n ? row_value(k, q, p, r, z) : 0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = sdata[0];
}

// unrolled_last_warp: the last six steps run in one warp without __syncthreads or a bounds test.
extern "C" __global__ void reduce_unrolled_warp(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    extern __shared__ i64 sdata[];
    const unsigned t = threadIdx.x;
    const i64 r = (i64)blockIdx.x * blockDim.x + t;
    sdata[t] = r < n ? row_value(k, q, p, r, z) : 0;
    tree_then_last_warp(sdata, t);
    if (t == 0) partials[blockIdx.x] = sdata[0];
}

// two_loads_per_thread: each thread adds two rows while loading: half the blocks, and no thread
// idles in the first step. (Also the kernel of the second_reduce, capped_registers, pinned and
// streams steps, which change what happens around it.)
extern "C" __global__ void reduce_two_loads(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    extern __shared__ i64 sdata[];
    const unsigned t = threadIdx.x;
    const i64 r = (i64)blockIdx.x * blockDim.x * 2 + t;
    i64 v = r < n ? row_value(k, q, p, r, z) : 0;
    if (r + blockDim.x < n) v += row_value(k, q, p, r + blockDim.x, z);
    sdata[t] = v;
    tree_then_last_warp(sdata, t);
    if (t == 0) partials[blockIdx.x] = sdata[0];
}

// second_reduce (its second kernel): one block sums the first kernel's partials on the GPU, so
// only one value crosses PCIe and the CPU adds nothing.
extern "C" __global__ void sum_partials(const i64* partials, i64 n, i64* out) {
    extern __shared__ i64 sdata[];
    const unsigned t = threadIdx.x;
    i64 v = 0;
    for (i64 i = t; i < n; i += blockDim.x) v += partials[i];
    sdata[t] = v;
    tree_then_last_warp(sdata, t);
    if (t == 0) out[0] = sdata[0];
}

// Sum over the block with shuffles: warps reduce in registers, shared memory holds one value a warp.
template <int THREADS>
__device__ __forceinline__ i64 block_sum_shuffle(i64 v) {
    __shared__ i64 warp_sums[THREADS / 32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = (warp == 0 && lane < THREADS / 32) ? warp_sums[lane] : 0;
    return warp == 0 ? warp_sum(v) : 0;
}

// warp_shuffle: warps reduce through register shuffles instead of shared-memory steps and barriers
// (block size still a run-time value: the loop bound is read from blockDim).
extern "C" __global__ void reduce_warp_shuffle(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    extern __shared__ i64 warp_sums[];
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5, warps = blockDim.x >> 5;
    const i64 r = (i64)blockIdx.x * blockDim.x * 2 + t;
    i64 v = r < n ? row_value(k, q, p, r, z) : 0;
    if (r + blockDim.x < n) v += row_value(k, q, p, r + blockDim.x, z);
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? warp_sums[lane] : 0;
        v = warp_sum(v);
        if (lane == 0) partials[blockIdx.x] = v;
    }
}

// templated_block: the block size is a compile-time constant: the block reduction is fully
// unrolled, shared memory is static, and __launch_bounds__ tells the register allocator the size.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS)
reduce_templated(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    const i64 r = (i64)blockIdx.x * BLOCK_THREADS * 2 + threadIdx.x;
    i64 v = r < n ? row_value(k, q, p, r, z) : 0;
    if (r + BLOCK_THREADS < n) v += row_value(k, q, p, r + BLOCK_THREADS, z);
    v = block_sum_shuffle<BLOCK_THREADS>(v);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

// grid_stride: a grid sized to fill the GPU once; each thread sums many rows in a register before
// any reduction: thousands of partials become a few per SM, and the tree runs once per block.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS)
reduce_grid_stride(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    i64 v = 0;
    for (i64 r = (i64)blockIdx.x * BLOCK_THREADS + threadIdx.x; r < n; r += (i64)gridDim.x * BLOCK_THREADS)
        v += row_value(k, q, p, r, z);
    v = block_sum_shuffle<BLOCK_THREADS>(v);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

// vector_loads: 16-byte loads (4 keys, 2 factors each) instead of 4- and 8-byte ones: a quarter
// of the load instructions for the keys, half for the factors, more bytes in flight per thread.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS)
reduce_vector_loads(const int* k, const i64* q, const i64* p, i64 n, i64 z, i64* partials) {
    const i64 vectors = n >> 2;
    const int4* k4 = reinterpret_cast<const int4*>(k);
    const longlong2* q2 = reinterpret_cast<const longlong2*>(q);
    const longlong2* p2 = reinterpret_cast<const longlong2*>(p);
    i64 v = 0;
    for (i64 i = (i64)blockIdx.x * BLOCK_THREADS + threadIdx.x; i < vectors; i += (i64)gridDim.x * BLOCK_THREADS) {
        const int4 kk = k4[i];
        const longlong2 qa = q2[2 * i], qb = q2[2 * i + 1], pa = p2[2 * i], pb = p2[2 * i + 1];
        v += (kk.x < z ? qa.x * pa.x : 0) + (kk.y < z ? qa.y * pa.y : 0);
        v += (kk.z < z ? qb.x * pb.x : 0) + (kk.w < z ? qb.y * pb.y : 0);
    }
    const i64 tail = n - (vectors << 2);
    if (blockIdx.x == 0 && threadIdx.x < tail) v += row_value(k, q, p, (vectors << 2) + threadIdx.x, z);
    v = block_sum_shuffle<BLOCK_THREADS>(v);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}
