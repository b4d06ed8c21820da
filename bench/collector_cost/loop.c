/* The collector's own cost per launch, without a GPU: CUPTI's callbacks played by the test fake libcupti
 * (tests/trace/fake_cuda.c) into the collector, in a C loop, as a launch-bound program would make them.
 *     loop FAKES_DIR COLLECTOR CASE LAUNCHES     (CASE: best, distinct, threads, runtime)
 * prints "loop: N ns/launch". Run with BISECT_SMEM_TRACE_DIR unset, the collector subscribes nothing: the loop's
 * own cost, to subtract. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cupti_abi.h"

#define DISTINCT_CONFIGS 10000
#define THREADS 8

typedef struct {
    const char *name;
    int static_bytes, is_kernel, max_dynamic_bytes, max_threads, registers;
} fake_kernel; /* tests/trace/fake_cuda.c */
typedef int (*fake_call_fn)(int, uint32_t, const char *, const void *, int, const char *, uint32_t);

static fake_call_fn fake_call;
static fake_kernel kernel = {"_Z5emptyi", 0, 0, 49152, 1024, 8};
static const char *which;
static long per_thread;

static void *launches(void *unused) {
    (void)unused;
    int idle = 0;
    bsm_cuLaunchKernel_params p = {&kernel, 1, 1, 1, 32, 1, 1, 0, &idle, NULL, NULL};
    bsm_cudaLaunchKernel_params rt = {(void *)0x1234, {1, 1, 1}, {32, 1, 1}, NULL, 0, NULL};
    int distinct = !strcmp(which, "distinct"), runtime = !strcmp(which, "runtime");
    for (long i = 0; i < per_thread; i++) {
        if (distinct) p.sharedMemBytes = 4 * (unsigned int)(i % DISTINCT_CONFIGS);
        if (runtime) fake_call(BSM_DOMAIN_RUNTIME, BSM_CB_cudaLaunchKernel_v7000, "cudaLaunchKernel", &rt, 0, "empty", (uint32_t)i);
        fake_call(BSM_DOMAIN_DRIVER, BSM_CB_cuLaunchKernel, "cuLaunchKernel", &p, 0, NULL, (uint32_t)i);
    }
    return NULL;
}

int main(int argc, char **argv) {
    char path[4096];
    if (argc != 5) return 2;
    snprintf(path, sizeof path, "%s/libfakecuda.so", argv[1]);
    void *driver = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libcupti.so.13", argv[1]);
    void *cupti = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    void *collector = dlopen(argv[2], RTLD_NOW);
    if (!driver || !cupti || !collector) return fprintf(stderr, "%s\n", dlerror()), 2;
    fake_call = (fake_call_fn)dlsym(cupti, "fake_call");
    ((int (*)(void))dlsym(collector, "InitializeInjection"))();
    which = argv[3];
    int threads = !strcmp(which, "threads") ? THREADS : 1;
    per_thread = atol(argv[4]) / threads;
    pthread_t workers[THREADS];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int t = 0; t < threads; t++) pthread_create(&workers[t], NULL, launches, NULL);
    for (int t = 0; t < threads; t++) pthread_join(workers[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
    printf("loop: %.1f ns/launch\n", ns / (double)(per_thread * threads));
    return 0;
}
