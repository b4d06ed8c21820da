// Thread block cluster probes of bisect_smem (sm_90+; empty bodies below that, never launched there).
// smem_cluster_dsm: every block of one cluster writes a pattern over its whole dynamic shared memory,
//   then reads its neighbour's (rank + 1) through distributed shared memory (mapa + ld.shared::cluster)
//   and counts what read back wrong.   out[0] wrong bytes   out[1] bytes compared   out[2] blocks that ran
//   out[3] the cluster size the blocks saw (%cluster_nctarank)
// smem_cluster_residency: rank 0 of each cluster counts its cluster in, records the peak over the GPU,
//   and the whole cluster holds for a bounded time on %globaltimer.   counters[0] now   counters[1] peak
// VARIANT 1 is the function that is allowed non-portable cluster sizes (an attribute of the function).

__device__ __forceinline__ void cluster_sync_all() {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r = 0;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
    return r;
}

__device__ __forceinline__ unsigned cluster_size() {
    unsigned n = 1;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
#endif
    return n;
}

__device__ __forceinline__ unsigned char cluster_pattern(unsigned i, unsigned seed) {
    return (unsigned char)((i ^ (i >> 8) ^ (i >> 16)) * 157u + seed);
}

template <int VARIANT>
__global__ void smem_cluster_dsm(unsigned dynamic_bytes, unsigned seed, unsigned* out) {
#if __CUDA_ARCH__ >= 900
    extern __shared__ unsigned char cluster_smem[];
    const unsigned rank = cluster_rank(), n = cluster_size();
    for (unsigned i = threadIdx.x; i < dynamic_bytes; i += blockDim.x) cluster_smem[i] = cluster_pattern(i, seed + rank);
    __syncthreads();
    cluster_sync_all();  // every block has written before any block reads
    const unsigned neighbour = (rank + 1) % n;
    unsigned local = (unsigned)__cvta_generic_to_shared(cluster_smem), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(neighbour));
    unsigned bad = 0, checked = 0;
    for (unsigned i = threadIdx.x; i < dynamic_bytes; i += blockDim.x) {
        unsigned short v;
        asm volatile("ld.shared::cluster.u8 %0, [%1];" : "=h"(v) : "r"(remote + i));
        bad += (unsigned char)v != cluster_pattern(i, seed + neighbour);
        ++checked;
    }
    atomicAdd(out + 0, bad);
    atomicAdd(out + 1, checked);
    if (threadIdx.x == 0) {
        atomicAdd(out + 2, 1u);
        out[3] = n;
    }
    __syncthreads();
    cluster_sync_all();  // no block leaves while a neighbour may still read its memory
#endif
}

template <int VARIANT>
__global__ void smem_cluster_residency(unsigned* counters, unsigned long long hold_ns) {
#if __CUDA_ARCH__ >= 900
    const bool leader = cluster_rank() == 0 && threadIdx.x == 0;
    if (leader) {
        unsigned now = atomicAdd(&counters[0], 1u) + 1u;
        atomicMax(&counters[1], now);
        unsigned long long start, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do {
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        } while (t - start < hold_ns);
    }
    __syncthreads();
    cluster_sync_all();  // the whole cluster stays resident while it is counted
    if (leader) atomicSub(&counters[0], 1u);
#endif
}
