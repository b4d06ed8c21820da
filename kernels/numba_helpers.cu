// PTX special registers for the numba-cuda backend, which has no inline assembly. Linked into numba
// kernels through cuda.declare_device (numba's ABI: the result through the first pointer, status 0).

extern "C" __device__ int bisect_smem_smid(unsigned* result) {
    asm volatile("mov.u32 %0, %%smid;" : "=r"(*result));
    return 0;
}

extern "C" __device__ int bisect_smem_globaltimer(unsigned long long* result) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(*result));
    return 0;
}

// which: 0 %dynamic_smem_size, 1 %total_smem_size, 2..4 %reserved_smem_offset_begin/_end/_cap,
// 5 %aggr_smem_size (sm_90+). Returns 0xFFFFFFFF where this architecture lacks the register.
extern "C" __device__ int bisect_smem_sreg(unsigned* result, int which) {
    unsigned v = 0xFFFFFFFFu;
#if __CUDA_ARCH__ >= 800
    switch (which) {
        case 0: asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(v)); break;
        case 1: asm volatile("mov.u32 %0, %%total_smem_size;" : "=r"(v)); break;
        case 2: asm volatile("mov.u32 %0, %%reserved_smem_offset_begin;" : "=r"(v)); break;
        case 3: asm volatile("mov.u32 %0, %%reserved_smem_offset_end;" : "=r"(v)); break;
        case 4: asm volatile("mov.u32 %0, %%reserved_smem_offset_cap;" : "=r"(v)); break;
#if __CUDA_ARCH__ >= 900
        case 5: asm volatile("mov.u32 %0, %%aggr_smem_size;" : "=r"(v)); break;
#endif
        default: break;
    }
#endif
    *result = v;
    return 0;
}
