// A program that is not Python: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) 1 KiB over the device's
// opt-in limit (refused), then at the limit (accepted) and a launch with it.
#include <cstdio>

__global__ void fill(int n) {
  extern __shared__ int smem[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) smem[i] = i;
}

int main() {
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  cudaError_t over = cudaFuncSetAttribute(fill, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1024);
  std::printf("cudaFuncSetAttribute(%d B): %s\n", optin + 1024, cudaGetErrorString(over));
  cudaError_t at = cudaFuncSetAttribute(fill, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
  std::printf("cudaFuncSetAttribute(%d B): %s\n", optin, cudaGetErrorString(at));
  fill<<<1, 128, optin>>>(optin / 4);
  std::printf("launch: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return over == cudaSuccess ? 1 : 0;
}
