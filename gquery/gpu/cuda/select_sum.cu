// The engine's fused select-and-reduce: one pass over the three columns, exact 128-bit result.
//   SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < z
// Injected by gquery/gpu/executor.py through kernels.build: BLOCK_THREADS, VECTORS_PER_THREAD, MIN_BLOCKS_PER_SM.
#include "tile.cuh"

#if !defined(BLOCK_THREADS) || !defined(VECTORS_PER_THREAD) || !defined(MIN_BLOCKS_PER_SM)
#error "BLOCK_THREADS, VECTORS_PER_THREAD and MIN_BLOCKS_PER_SM are injected by gquery.gpu.kernels"
#endif

// A vector is 4 rows: one 16-byte load of keys, two of each factor. Factors are read only where a
// key in the vector passes, so a selective predicate moves little more than the key column.
// Pointers are 16-byte aligned and hold `rows` rows; acc is zeroed by the caller.
// MIN_BLOCKS_PER_SM blocks resident per SM (full occupancy) caps the registers at 32.
extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, MIN_BLOCKS_PER_SM)
select_sum(const int* __restrict__ suppkey, const long long* __restrict__ quantity,
           const long long* __restrict__ price, long long rows, long long z, u64* __restrict__ acc) {
    const long long vectors = rows >> 2;
    const int4* keys = reinterpret_cast<const int4*>(suppkey);
    const longlong2* q2 = reinterpret_cast<const longlong2*>(quantity);
    const longlong2* p2 = reinterpret_cast<const longlong2*>(price);
    i128 sum = 0;
    // Per-thread counts fit 32 bits (a thread sees at most rows / (grid x block) rows); 32-bit
    // counters keep the kernel at 32 registers, full occupancy.
    unsigned count = 0, vectors_read = 0;  // the second tells the profile how many bytes were read

    const long long tile = (long long)BLOCK_THREADS * VECTORS_PER_THREAD;
    for (long long base = blockIdx.x * tile + threadIdx.x; base < vectors; base += gridDim.x * tile) {
        unsigned mask[VECTORS_PER_THREAD];
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) {  // all key loads in flight before any use
            const long long v = base + i * BLOCK_THREADS;
            mask[i] = v < vectors ? select_mask(__ldcs(keys + v), z) : 0u;
        }
#pragma unroll
        for (int i = 0; i < VECTORS_PER_THREAD; ++i) {
            if (mask[i] == 0) continue;
            const long long v = base + i * BLOCK_THREADS;
            const longlong2 qa = __ldcs(q2 + 2 * v), qb = __ldcs(q2 + 2 * v + 1);
            const longlong2 pa = __ldcs(p2 + 2 * v), pb = __ldcs(p2 + 2 * v + 1);
            if (mask[i] & 1) sum += (i128)(qa.x * pa.x);
            if (mask[i] & 2) sum += (i128)(qa.y * pa.y);
            if (mask[i] & 4) sum += (i128)(qb.x * pb.x);
            if (mask[i] & 8) sum += (i128)(qb.y * pb.y);
            count += __popc(mask[i]);
            vectors_read += 1;
        }
    }
    // The last rows % 4 rows, one thread each.
    const long long tail = rows - (vectors << 2);
    if (blockIdx.x == 0 && threadIdx.x < tail) {
        const long long r = (vectors << 2) + threadIdx.x;
        if (suppkey[r] < z) {
            sum += (i128)(quantity[r] * price[r]);
            count += 1;
        }
    }
    i128 sums[1] = {sum};
    u64 counts[2] = {count, vectors_read};  // acc = {sum low, sum high, selected rows, vectors read}
    block_reduce<BLOCK_THREADS, 1, 2>(sums, counts);
    if (threadIdx.x == 0 && counts[0] != 0) {
        atomic_add_128(acc, sums[0]);
        atomicAdd(acc + 2, counts[0]);
        atomicAdd(acc + 3, counts[1]);
    }
}
