// A test-only fault of bisect_smem: a store far outside the block's shared window, which the GPU answers
// with an illegal-address error that poisons the CUDA context. It shows that a real fault ends only a
// worker, and that the measurement resumes in a new one with exact results.
template <int UNUSED>
__global__ void smem_illegal_access(unsigned offset) {
    if (threadIdx.x == 0) {
        unsigned short v = 1;
        asm volatile("st.shared.u8 [%0], %1;" :: "r"(offset), "h"(v) : "memory");
    }
}
