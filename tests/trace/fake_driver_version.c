/* A driver that only says which CUDA version it supports, as libcuda.so.1 does before cuInit:
 * built with -DCUDA_VERSION=12080 for a driver of CUDA 12.8. */
int cuDriverGetVersion(int *version) {
    *version = CUDA_VERSION;
    return 0;
}
