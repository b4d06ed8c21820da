/* A fake libcupti and driver for tests/trace, built by the tests with cc. Compiled with -DFAKE_CUPTI it is
 * libcupti (soname libcupti.so.13): cuptiSubscribe keeps the callback, cuptiEnableCallback records what was
 * enabled, and fake_call() plays one driver or runtime call: the callback at enter and at exit, as CUPTI calls
 * it, only for ids that were enabled. Compiled with -DFAKE_DRIVER it is the few driver calls the collector
 * makes: a kernel handle points at a fake_kernel, a stream at its capture status, a graph at a fake_graph.
 * A fake_kernel keeps its own attributes, as the driver does: MaxDynamicSharedMemorySize starts at 48 KiB less
 * its static bytes, and cuFuncSetAttribute raises it up to the opt-in limit (FAKE_OPTIN_BYTES);
 * fake_launch_result() is what cuLaunchKernel answers for a launch of it. With -DFAKE_R535 as well it is a
 * driver before R545: without cuFuncGetName and cuKernelGetName. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int static_bytes, is_kernel;
    int max_dynamic_bytes, max_threads, registers; /* CU_FUNC_ATTRIBUTE_* 8, 0 and 4 */
} fake_kernel;

#if defined(FAKE_DRIVER) && !defined(FAKE_R535)
int cuFuncGetName(const char **name, void *f) {
    const fake_kernel *k = f;
    if (!k || k->is_kernel) return 400; /* CUDA_ERROR_INVALID_HANDLE: a CUkernel is no CUfunction */
    *name = k->name;
    return 0;
}
int cuKernelGetName(const char **name, void *f) {
    const fake_kernel *k = f;
    if (!k || !k->is_kernel) return 400;
    *name = k->name;
    return 0;
}
#endif

#ifdef FAKE_DRIVER

enum { FAKE_INVALID_VALUE = 1, FAKE_INVALID_HANDLE = 400, FAKE_OPTIN_BYTES = 232448 }; /* the H100's opt-in */

/* The attribute of a kernel the driver would answer, or -1 for one the fake does not hold. */
static int attribute_of(const fake_kernel *k, int attrib) {
    switch (attrib) {
    case 0: return k->max_threads;       /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
    case 1: return k->static_bytes;      /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    case 4: return k->registers;         /* CU_FUNC_ATTRIBUTE_NUM_REGS */
    case 8: return k->max_dynamic_bytes; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    default: return -1;
    }
}
int cuFuncGetAttribute(int *value, int attrib, void *f) {
    const fake_kernel *k = f;
    if (!k || k->is_kernel) return FAKE_INVALID_HANDLE;
    if (attribute_of(k, attrib) < 0) return FAKE_INVALID_VALUE;
    *value = attribute_of(k, attrib);
    return 0;
}
int cuKernelGetAttribute(int *value, int attrib, void *f, int dev) {
    const fake_kernel *k = f;
    if (!k || !k->is_kernel || dev != 0) return FAKE_INVALID_HANDLE;
    if (attribute_of(k, attrib) < 0) return FAKE_INVALID_VALUE;
    *value = attribute_of(k, attrib);
    return 0;
}
/* Only MaxDynamicSharedMemorySize changes here; above the opt-in limit less the static bytes it is refused. */
int cuFuncSetAttribute(void *f, int attrib, int value) {
    fake_kernel *k = f;
    if (!k || k->is_kernel) return FAKE_INVALID_HANDLE;
    if (attrib != 8 || value < 0 || value > FAKE_OPTIN_BYTES - k->static_bytes) return FAKE_INVALID_VALUE;
    k->max_dynamic_bytes = value;
    return 0;
}
/* What cuLaunchKernel answers: more dynamic bytes than the kernel's limit, or more threads, is an invalid value. */
int fake_launch_result(void *f, unsigned int threads, unsigned int dynamic_bytes) {
    const fake_kernel *k = f;
    if (!k) return FAKE_INVALID_HANDLE;
    return (int)dynamic_bytes > k->max_dynamic_bytes || (int)threads > k->max_threads ? FAKE_INVALID_VALUE : 0;
}
int cuCtxGetDevice(int *dev) { *dev = 0; return 0; }
int cuStreamIsCapturing(void *stream, int *status) { *status = *(int *)stream; return 0; }

/* Graphs as the driver holds them: a graph is a list of nodes; a kernel node has its parameters (the layout of
 * CUDA_KERNEL_NODE_PARAMS_v2), a child graph node its graph. The test process builds them with fake_graph_*,
 * as stream capture or cuGraphAdd*Node would, and the collector reads them back through the driver's calls. */
typedef struct {
    void *func;
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern, *ctx;
} fake_kernel_params;
struct fake_graph;
typedef struct { int type; fake_kernel_params kernel; struct fake_graph *child; } fake_node;
typedef struct fake_graph { size_t count; fake_node nodes[16]; } fake_graph;
enum { FAKE_NODE_KERNEL = 0, FAKE_NODE_MEMCPY = 1, FAKE_NODE_GRAPH = 4 }; /* CUgraphNodeType */

fake_graph *fake_graph_create(void) { return calloc(1, sizeof(fake_graph)); }
/* A node of `type`: kernel parameters copied for a kernel node, `child` for a child graph node. */
fake_node *fake_graph_add(fake_graph *graph, int type, const fake_kernel_params *kernel, fake_graph *child) {
    if (graph->count == sizeof graph->nodes / sizeof *graph->nodes) return NULL;
    fake_node *node = &graph->nodes[graph->count++];
    node->type = type, node->child = child;
    if (kernel) node->kernel = *kernel;
    return node;
}
int cuGraphGetNodes(fake_graph *graph, fake_node **nodes, size_t *count) {
    if (!graph || !count) return 1; /* CUDA_ERROR_INVALID_VALUE */
    if (!nodes) {
        *count = graph->count;
        return 0;
    }
    size_t n = *count < graph->count ? *count : graph->count;
    for (size_t i = 0; i < n; i++) nodes[i] = &graph->nodes[i];
    *count = n;
    return 0;
}
int cuGraphNodeGetType(fake_node *node, int *type) {
    if (!node) return 400;
    *type = node->type;
    return 0;
}
int cuGraphKernelNodeGetParams_v2(fake_node *node, fake_kernel_params *params) {
    if (!node || node->type != FAKE_NODE_KERNEL) return 1;
    *params = node->kernel;
    return 0;
}
int cuGraphChildGraphNodeGetGraph(fake_node *node, fake_graph **graph) {
    if (!node || node->type != FAKE_NODE_GRAPH) return 1;
    *graph = node->child;
    return 0;
}
/* A runtime host stub: a host function named as its kernel (what cudaGetFuncBySymbol is given). */
void fake_host_stub(void) __asm__("_Z11stub_kernelPf");
void fake_host_stub(void) {}
int cuGraphKernelNodeSetParams_v2(fake_node *node, const fake_kernel_params *params) {
    if (!node || node->type != FAKE_NODE_KERNEL) return 1;
    node->kernel = *params;
    return 0;
}
#endif

#ifdef FAKE_CUPTI
typedef struct {
    int callbackSite;
    const char *functionName;
    const void *functionParams;
    void *functionReturnValue;
    const char *symbolName;
    void *context;
    uint32_t contextUid;
    uint64_t *correlationData;
    uint32_t correlationId;
} CUpti_CallbackData; /* cupti_callbacks.h, CUDA 13.0 */
typedef void (*callback_fn)(void *, int, uint32_t, const void *);

static callback_fn subscribed;
static void *subscribed_data;
static unsigned char enabled[8][1024];

int cuptiSubscribe(void **subscriber, callback_fn callback, void *userdata) {
    const char *busy = getenv("FAKE_CUPTI_BUSY");
    if (busy && *busy) return 39; /* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
    subscribed = callback, subscribed_data = userdata;
    *subscriber = (void *)&subscribed;
    return 0;
}
int cuptiEnableCallback(uint32_t enable, void *subscriber, int domain, uint32_t cbid) {
    if (subscriber != (void *)&subscribed || domain < 0 || domain >= 8 || cbid >= 1024) return 1;
    enabled[domain][cbid] = (unsigned char)enable;
    return 0;
}
/* One call: enter, then exit with `result`; 0 when the id was not enabled (nothing was called). */
int fake_call(int domain, uint32_t cbid, const char *function, const void *params, int result, const char *symbol,
              uint32_t correlation) {
    if (!subscribed || !enabled[domain][cbid]) return 0;
    int garbage = 0x7eadbeef; /* the return value is not known at enter */
    CUpti_CallbackData data = {0, function, params, &garbage, symbol, NULL, 1, NULL, correlation};
    subscribed(subscribed_data, domain, cbid, &data);
    data.callbackSite = 1;
    data.functionReturnValue = &result;
    subscribed(subscribed_data, domain, cbid, &data);
    return 1;
}
#endif
