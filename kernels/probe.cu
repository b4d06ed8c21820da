// Probe kernels of bisect_smem, compiled by NVRTC in one call with name_expressions.
// One block writes a pattern over every byte of its dynamic and static shared memory, reads all of
// it back (each thread reads what a neighbour wrote), and reports what it saw in `out`:
//   out[0] bytes that read back wrong     out[1] bytes read back and compared
//   out[2] %dynamic_smem_size             out[3] %total_smem_size
//   out[4..6] %reserved_smem_offset_begin/_end/_cap    out[7] %aggr_smem_size
//   out[8] the last dynamic byte as read  out[9] flags: 1 = sm_80 registers, 2 = %aggr_smem_size
//   out[10] the shared-window offset where the dynamic array starts (after reserved and static data)
// OPT_IN only makes the default and opt-in kernels distinct functions: the attribute belongs to the
// function, so the default kernel must never share one with a kernel whose limit was raised.
// smem_probe_hole (test only) is the 0-byte static opt-in probe with a planted fault at one size.

__device__ __forceinline__ unsigned char smem_pattern(unsigned i, unsigned seed) {
    return (unsigned char)((i ^ (i >> 8) ^ (i >> 16)) * 151u + seed);
}

template <unsigned BYTES> struct StaticSmem {
    __device__ static unsigned char* get() { __shared__ unsigned char s[BYTES]; return s; }
};
template <> struct StaticSmem<0u> {
    __device__ static unsigned char* get() { return nullptr; }
};

__device__ __forceinline__ void fill(unsigned char* p, unsigned n, unsigned seed) {
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) p[i] = smem_pattern(i, seed);
}

__device__ __forceinline__ void check(const unsigned char* p, unsigned n, unsigned seed,
                                      unsigned& bad, unsigned& checked) {
    // Start one thread over, so that no thread reads back only what it wrote itself.
    for (unsigned i = (threadIdx.x + 1) % blockDim.x; i < n; i += blockDim.x) {
        bad += p[i] != smem_pattern(i, seed);
        ++checked;
    }
}

__device__ __forceinline__ void read_smem_registers(unsigned* out) {
#if __CUDA_ARCH__ >= 800
    unsigned v;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(v)); out[2] = v;
    asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(v)); out[3] = v;
    asm volatile("mov.u32 %0, %%reserved_smem_offset_begin;" : "=r"(v)); out[4] = v;
    asm volatile("mov.u32 %0, %%reserved_smem_offset_end;" : "=r"(v)); out[5] = v;
    asm volatile("mov.u32 %0, %%reserved_smem_offset_cap;" : "=r"(v)); out[6] = v;
    unsigned flags = 1u;
#if __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(v)); out[7] = v;
    flags |= 2u;
#endif
    out[9] = flags;
#endif
}

#define PROBE_NO_HOLE 0xFFFFFFFFu

template <unsigned STATIC_BYTES>
__device__ __forceinline__ void probe_body(unsigned dynamic_bytes, unsigned seed, unsigned* out, unsigned hole_bytes) {
    extern __shared__ unsigned char dynamic_smem[];
    unsigned char* static_smem = StaticSmem<STATIC_BYTES>::get();
    fill(dynamic_smem, dynamic_bytes, seed);
    fill(static_smem, STATIC_BYTES, seed ^ 0x5au);
    __syncthreads();
    if (hole_bytes != PROBE_NO_HOLE) {  // test only (smem_probe_hole): one size reads one byte wrong
        if (dynamic_bytes == hole_bytes && dynamic_bytes > 0u && threadIdx.x == 0) dynamic_smem[0] ^= 1u;
        __syncthreads();
    }
    unsigned bad = 0, checked = 0;
    check(dynamic_smem, dynamic_bytes, seed, bad, checked);
    check(static_smem, STATIC_BYTES, seed ^ 0x5au, bad, checked);
    atomicAdd(out + 0, bad);
    atomicAdd(out + 1, checked);
    if (threadIdx.x == 0) {
        read_smem_registers(out);
        if (dynamic_bytes > 0) out[8] = dynamic_smem[dynamic_bytes - 1];
        out[10] = (unsigned)__cvta_generic_to_shared(dynamic_smem);
    }
}

template <unsigned STATIC_BYTES, int OPT_IN>
__global__ void smem_probe(unsigned dynamic_bytes, unsigned seed, unsigned* out) {
    probe_body<STATIC_BYTES>(dynamic_bytes, seed, out, PROBE_NO_HOLE);
}

// Test only: the 0-byte static opt-in probe, except that a launch of exactly hole_bytes dynamic bytes
// changes its first byte between writing the pattern and reading it back, as a faulty size would. The
// granule sweep launched with it must report that size as not monotone.
template <int UNUSED>  // a template, so that it is compiled only where asked for
__global__ void smem_probe_hole(unsigned dynamic_bytes, unsigned seed, unsigned* out, unsigned hole_bytes) {
    probe_body<0u>(dynamic_bytes, seed, out, hole_bytes);
}
