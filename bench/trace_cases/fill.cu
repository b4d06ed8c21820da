// The kernel cuda12_driver.py loads as a cubin: nvcc -cubin -arch=sm_90 -o fill.cubin fill.cu
extern "C" __global__ void fill(int n) {
  extern __shared__ int smem[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) smem[i] = i;
}
