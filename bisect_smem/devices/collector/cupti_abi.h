/* The few CUPTI and CUDA declarations the collector needs, so that it builds without CUDA headers.
 *
 * Copied field for field from CUDA 13.0 (CUPTI API version 130001), and equal in CUDA 12.9's:
 *   cupti_callbacks.h            CUpti_CallbackData, CUpti_CallbackFunc, CUpti_ApiCallbackSite, domains
 *   cupti_result.h               CUPTI_SUCCESS, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 *   cupti_driver_cbid.h          CUPTI_DRIVER_TRACE_CBID_* ids
 *   cupti_runtime_cbid.h         CUPTI_RUNTIME_TRACE_CBID_* ids
 *   generated_cuda_meta.h        cu*_params (driver calls' parameters as CUPTI hands them over)
 *   generated_cuda_runtime_api_meta.h  cuda*_params (runtime calls' parameters)
 *   cuda.h                       CUlaunchConfig, CUlaunchAttribute, CUDA_KERNEL_NODE_PARAMS_v2, attribute ids
 *   driver_types.h               cudaLaunchConfig_t, cudaLaunchAttribute, cudaKernelNodeParams
 * The ids and layouts have been stable since CUDA 12.3 (cuKernelSetAttribute, cuGraphAddKernelNode_v2);
 * tests/trace checks every offset against the real headers of CUDA 13 and of CUDA 12 (`make test` fetches
 * the CUDA 12 wheels' headers).
 * Every name carries the bsm_ prefix so that this file and the real headers can be included together.
 */
#ifndef BSM_CUPTI_ABI_H
#define BSM_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

/* cupti_callbacks.h */
enum { BSM_API_ENTER = 0, BSM_API_EXIT = 1 };
enum { BSM_DOMAIN_DRIVER = 1, BSM_DOMAIN_RUNTIME = 2 };
typedef struct {
    int callbackSite; /* CUpti_ApiCallbackSite: an enum, int-sized */
    const char *functionName;
    const void *functionParams;
    void *functionReturnValue;
    const char *symbolName;
    void *context;
    uint32_t contextUid;
    uint64_t *correlationData;
    uint32_t correlationId;
} bsm_callback_data;
typedef void (*bsm_callback_fn)(void *userdata, int domain, uint32_t cbid, const void *cbdata);

/* cupti_result.h */
enum { BSM_CUPTI_SUCCESS = 0, BSM_CUPTI_MULTIPLE_SUBSCRIBERS = 39 };
enum { BSM_STREAM_CAPTURE_INVALIDATED = 901 }; /* cuda.h's CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */

/* cupti_driver_cbid.h */
enum {
    BSM_CB_cuLaunchKernel = 307,
    BSM_CB_cuLaunchKernel_ptsz = 442,
    BSM_CB_cuLaunchCooperativeKernel = 477,
    BSM_CB_cuLaunchCooperativeKernel_ptsz = 478,
    BSM_CB_cuFuncSetAttribute = 481,
    BSM_CB_cuGraphAddKernelNode = 502,
    BSM_CB_cuLaunchKernelEx = 652,
    BSM_CB_cuLaunchKernelEx_ptsz = 653,
    BSM_CB_cuKernelSetAttribute = 687,
    BSM_CB_cuGraphAddKernelNode_v2 = 689,
    /* graphs: instantiation, upload, replay, destruction, and kernel nodes changed after they were added */
    BSM_CB_cuGraphInstantiate = 513, /* the CUDA 10 call (with error node and log), still in 12.x and 13.0 */
    BSM_CB_cuGraphLaunch = 514,
    BSM_CB_cuGraphLaunch_ptsz = 515,
    BSM_CB_cuGraphExecDestroy = 516,
    BSM_CB_cuGraphKernelNodeSetParams = 521,
    BSM_CB_cuGraphExecKernelNodeSetParams = 538,
    BSM_CB_cuGraphExecUpdate = 561,
    BSM_CB_cuGraphInstantiate_v2 = 578,
    BSM_CB_cuGraphUpload = 580,
    BSM_CB_cuGraphUpload_ptsz = 581,
    BSM_CB_cuGraphInstantiateWithFlags = 643, /* cuda.h's cuGraphInstantiate since CUDA 12.0 */
    BSM_CB_cuGraphInstantiateWithParams = 656,
    BSM_CB_cuGraphInstantiateWithParams_ptsz = 657,
    BSM_CB_cuGraphKernelNodeSetParams_v2 = 691,
    BSM_CB_cuGraphExecKernelNodeSetParams_v2 = 692,
    BSM_CB_cuGraphExecUpdate_v2 = 696,
    BSM_CB_cuGraphAddNode = 712,
    BSM_CB_cuGraphNodeSetParams = 713,
    BSM_CB_cuGraphExecNodeSetParams = 714,
    BSM_CB_cuGraphAddNode_v2 = 723,
    /* where kernel handles get their names, for drivers without cuFuncGetName/cuKernelGetName (before R545) */
    BSM_CB_cuModuleGetFunction = 23,
    BSM_CB_cuLibraryGetKernel = 681,
    BSM_CB_cuKernelGetFunction = 683,
    /* stream capture begun and ended: a launch asks the driver whether its stream captures only while one is */
    BSM_CB_cuStreamBeginCapture = 495,
    BSM_CB_cuStreamBeginCapture_ptsz = 496,
    BSM_CB_cuStreamEndCapture = 497,
    BSM_CB_cuStreamEndCapture_ptsz = 498,
    BSM_CB_cuStreamBeginCapture_v2 = 539,
    BSM_CB_cuStreamBeginCapture_v2_ptsz = 540,
    BSM_CB_cuStreamBeginCaptureToGraph = 720,
    BSM_CB_cuStreamBeginCaptureToGraph_ptsz = 721,
};
/* cupti_runtime_cbid.h */
enum {
    BSM_CB_cudaLaunchKernel_v7000 = 211,
    BSM_CB_cudaLaunchKernel_ptsz_v7000 = 214,
    BSM_CB_cudaFuncSetAttribute_v9000 = 273,
    BSM_CB_cudaGraphAddKernelNode_v10000 = 289,
    BSM_CB_cudaLaunchKernelExC_v11060 = 430,
    BSM_CB_cudaLaunchKernelExC_ptsz_v11060 = 431,
    BSM_CB_cudaGraphKernelNodeSetParams_v10000 = 288,
    BSM_CB_cudaGetFuncBySymbol_v11000 = 336,
};

/* cuda.h: CUfunction_attribute and CUlaunchAttributeID values used; the runtime's cudaFuncAttribute and
 * cudaLaunchAttributeID have the same numbers. */
enum {
    BSM_ATTR_MAX_THREADS_PER_BLOCK = 0,
    BSM_ATTR_SHARED_SIZE_BYTES = 1,
    BSM_ATTR_NUM_REGS = 4,
    BSM_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    BSM_ATTR_PREFERRED_SHARED_MEMORY_CARVEOUT = 9,
    BSM_ATTR_CLUSTER_SIZE_MUST_BE_SET = 10,
    BSM_ATTR_REQUIRED_CLUSTER_WIDTH = 11,
    BSM_ATTR_REQUIRED_CLUSTER_HEIGHT = 12,
    BSM_ATTR_REQUIRED_CLUSTER_DEPTH = 13,
    BSM_ATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
    BSM_ATTR_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 15,
    BSM_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    BSM_GRAPH_NODE_TYPE_KERNEL = 0, /* CUgraphNodeType */
    BSM_GRAPH_NODE_TYPE_GRAPH = 4,
};

typedef struct {
    int id;
    char pad[4];
    union {
        char pad[64];
        struct { unsigned int x, y, z; } clusterDim;
    } value;
} bsm_launch_attribute; /* CUlaunchAttribute and cudaLaunchAttribute */

typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void *hStream;
    bsm_launch_attribute *attrs;
    unsigned int numAttrs;
} bsm_CUlaunchConfig;

typedef struct { unsigned int x, y, z; } bsm_dim3;

typedef struct {
    bsm_dim3 gridDim;
    bsm_dim3 blockDim;
    size_t dynamicSmemBytes;
    void *stream;
    bsm_launch_attribute *attrs;
    unsigned int numAttrs;
} bsm_cudaLaunchConfig;

typedef struct {
    void *func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern;
    void *ctx;
} bsm_CUDA_KERNEL_NODE_PARAMS_v2;

typedef struct {
    void *func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
} bsm_CUDA_KERNEL_NODE_PARAMS_v1;

typedef struct {
    void *func;
    bsm_dim3 gridDim;
    bsm_dim3 blockDim;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
} bsm_cudaKernelNodeParams;

/* CUgraphNodeParams (cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams): a type, then a union
 * whose kernel member is CUDA_KERNEL_NODE_PARAMS_v3, laid out as _v2. */
typedef struct {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        bsm_CUDA_KERNEL_NODE_PARAMS_v2 kernel;
    } u;
    long long reserved2;
} bsm_CUgraphNodeParams;

typedef struct {
    uint64_t flags;
    void *hUploadStream;
    void *hErrNode_out;
    int result_out;
} bsm_CUDA_GRAPH_INSTANTIATE_PARAMS;

/* generated_cuda_meta.h */
typedef struct { void *hfunc; int attrib; int value; } bsm_cuFuncSetAttribute_params;
typedef struct { int attrib; int val; void *kernel; int dev; } bsm_cuKernelSetAttribute_params;
typedef struct {
    void *f;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void *hStream;
    void **kernelParams;
    void **extra;
} bsm_cuLaunchKernel_params; /* also cuLaunchKernel_ptsz and, without extra, cuLaunchCooperativeKernel */
typedef struct { const bsm_CUlaunchConfig *config; void *f; void **kernelParams; void **extra; } bsm_cuLaunchKernelEx_params;
typedef struct {
    void **phGraphNode;
    void *hGraph;
    void *const *dependencies;
    size_t numDependencies;
    const void *nodeParams; /* CUDA_KERNEL_NODE_PARAMS_v1 or _v2 */
} bsm_cuGraphAddKernelNode_params;

/* Every cuGraphInstantiate* call (cuGraphInstantiate, _v2, WithFlags, WithParams, WithParams_ptsz) starts so. */
typedef struct { void **phGraphExec; void *hGraph; } bsm_cuGraphInstantiate_params;
typedef struct {
    void **phGraphExec;
    void *hGraph;
    void **phErrorNode;
    char *logBuffer;
    size_t bufferSize;
} bsm_cuGraphInstantiate_v2_params; /* also cuGraphInstantiate (CUDA 10's) */
typedef struct {
    void **phGraphExec;
    void *hGraph;
    const bsm_CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams;
} bsm_cuGraphInstantiateWithParams_params; /* also _ptsz */
typedef struct { void *hGraphExec; void *hStream; } bsm_cuGraphLaunch_params; /* also _ptsz, cuGraphUpload(_ptsz) */
typedef struct { void *hGraphExec; } bsm_cuGraphExecDestroy_params;
typedef struct { void *hGraphExec; void *hGraph; } bsm_cuGraphExecUpdate_params; /* also _v2 */
typedef struct { void *hNode; const void *nodeParams; } bsm_cuGraphKernelNodeSetParams_params; /* v1 or v2 params */
typedef struct { void *hGraphExec; void *hNode; const void *nodeParams; } bsm_cuGraphExecKernelNodeSetParams_params;
typedef struct {
    void **phGraphNode;
    void *hGraph;
    void *const *dependencies;
    size_t numDependencies;
    bsm_CUgraphNodeParams *nodeParams;
} bsm_cuGraphAddNode_params;
typedef struct {
    void **phGraphNode;
    void *hGraph;
    void *const *dependencies;
    const void *dependencyData;
    size_t numDependencies;
    bsm_CUgraphNodeParams *nodeParams;
} bsm_cuGraphAddNode_v2_params;
typedef struct { void *hNode; bsm_CUgraphNodeParams *nodeParams; } bsm_cuGraphNodeSetParams_params;
typedef struct { void *hGraphExec; void *hNode; bsm_CUgraphNodeParams *nodeParams; } bsm_cuGraphExecNodeSetParams_params;
typedef struct { void **hfunc; void *hmod; const char *name; } bsm_cuModuleGetFunction_params;
typedef struct { void **pKernel; void *library; const char *name; } bsm_cuLibraryGetKernel_params;
typedef struct { void **pFunc; void *kernel; } bsm_cuKernelGetFunction_params;

/* generated_cuda_runtime_api_meta.h */
typedef struct { const void *func; int attr; int value; } bsm_cudaFuncSetAttribute_params;
typedef struct {
    const void *func;
    bsm_dim3 gridDim;
    bsm_dim3 blockDim;
    void **args;
    size_t sharedMem;
    void *stream;
} bsm_cudaLaunchKernel_params;
typedef struct { const bsm_cudaLaunchConfig *config; const void *func; void **args; } bsm_cudaLaunchKernelExC_params;
typedef struct {
    void **pGraphNode;
    void *graph;
    void *const *pDependencies;
    size_t numDependencies;
    const bsm_cudaKernelNodeParams *pNodeParams;
} bsm_cudaGraphAddKernelNode_params;
typedef struct { void *node; const bsm_cudaKernelNodeParams *pNodeParams; } bsm_cudaGraphKernelNodeSetParams_params;
typedef struct { void **functionPtr; const void *symbolPtr; } bsm_cudaGetFuncBySymbol_params;

#endif
