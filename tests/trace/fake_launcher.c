/* A program that is not Python, as a C++ server or a launcher is: `fake_launcher FAKE_DIR`. It loads the fake
 * driver (tests/trace/fake_cuda.c), then does what the driver does at cuInit: loads the library named by
 * CUDA_INJECTION64_PATH and calls its InitializeInjection (the collector then finds the fake libcupti through
 * BISECT_SMEM_CUPTI_LIBRARY). Then it plays one refused cuFuncSetAttribute of MaxDynamicSharedMemorySize
 * 232449 B through the fake libcupti. Exit 0 when every step worked, else the step's number. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { const char *name; int static_bytes; int is_kernel; } fake_kernel;     /* fake_cuda.c */
typedef struct { void *hfunc; int attrib; int value; } func_set_attribute_params;       /* cuda 13.0 meta */
typedef int (*fake_call_fn)(int, uint32_t, const char *, const void *, int, const char *, uint32_t);

enum { DRIVER_DOMAIN = 1, CU_FUNC_SET_ATTRIBUTE = 481, MAX_DYNAMIC_SHARED_SIZE_BYTES = 8, INVALID_VALUE = 1 };

int main(int argc, char **argv) {
    char path[4096];
    if (argc != 2) return 1;
    snprintf(path, sizeof path, "%s/libfakecuda.so", argv[1]);
    if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL)) return fprintf(stderr, "%s\n", dlerror()), 2;
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    void *collector = injection ? dlopen(injection, RTLD_NOW) : NULL;
    if (!collector) return fprintf(stderr, "no injection: %s\n", injection ? dlerror() : "unset"), 3;
    int (*initialize)(void) = (int (*)(void))dlsym(collector, "InitializeInjection");
    if (!initialize || initialize() != 1) return 4;
    snprintf(path, sizeof path, "%s/libcupti.so.13", argv[1]);
    void *cupti = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* the collector loaded it */
    fake_call_fn fake_call = cupti ? (fake_call_fn)dlsym(cupti, "fake_call") : NULL;
    if (!fake_call) return 5;
    fake_kernel kernel = {"_Z6kernelPf", 0, 0};
    func_set_attribute_params params = {&kernel, MAX_DYNAMIC_SHARED_SIZE_BYTES, 232449};
    if (!fake_call(DRIVER_DOMAIN, CU_FUNC_SET_ATTRIBUTE, "cuFuncSetAttribute", &params, INVALID_VALUE, NULL, 1)) return 6;
    return 0;
}
