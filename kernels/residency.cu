// Residency probe of bisect_smem: how many blocks really sit on one SM at once.
// Thread 0 of each block counts the block into its SM's counter (read from %smid), records the peak,
// and holds for a bounded time on %globaltimer; the whole block waits for it, so all of the block's
// resources stay taken while it is counted. No block ever waits for another: a wrong prediction
// can make the launch slower, never hang the GPU.
//   counters[2 * sm] blocks on the SM now      counters[2 * sm + 1] the most seen at once
// VARIANT only makes distinct functions: the carveout preference belongs to the function, so the
// carveout sweep must not share one with the staircase.

__device__ __forceinline__ unsigned long long global_timer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <int VARIANT>
__global__ void smem_residency(unsigned* counters, unsigned long long hold_ns) {
    // The dynamic shared memory is allocated at launch and occupies the SM whether or not it is used;
    // it is never touched here, since a 0-byte request has no byte to touch.
    unsigned sm = 0;
    if (threadIdx.x == 0) {
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        unsigned now = atomicAdd(&counters[2 * sm], 1u) + 1u;
        atomicMax(&counters[2 * sm + 1], now);
        const unsigned long long start = global_timer_ns();
        while (global_timer_ns() - start < hold_ns) {
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicSub(&counters[2 * sm], 1u);
}
