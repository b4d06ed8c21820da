/* bisect-smem trace's collector: loaded into every CUDA process through CUDA_INJECTION64_PATH, it subscribes
 * to CUPTI's callback API and writes one JSON line per shared-memory request into $BISECT_SMEM_TRACE_DIR/PID.jsonl:
 * attribute sets (MaxDynamicSharedMemorySize, the carveout, the cluster attributes), launches (deduplicated per
 * kernel, block, dynamic bytes, cluster, capture and result, with a count) and kernel nodes of CUDA graphs.
 *
 * It needs no CUDA headers (cupti_abi.h declares what it reads) and links nothing: libcupti and the driver are
 * found with dlopen/dlsym at InitializeInjection, a libcupti already in the process first, so that one process
 * never holds two copies. Each line is written with one write(2) on an O_APPEND file, so a killed process keeps
 * every line written before it died; the counts of repeated launches are written at exit.
 * Names are written mangled, as the driver gives them; bisect-smem demangles them when it explains the trace.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cupti_abi.h"

#define BSM_FORMAT_VERSION 1
#define BSM_TABLE_SIZE 8192 /* distinct launch configurations kept for counting; past it each is written once more */
#define BSM_LINE_MAX 1024   /* a line without its name */

typedef int (*subscribe_fn)(void **subscriber, bsm_callback_fn callback, void *userdata);
typedef int (*result_string_fn)(int result, const char **text);
typedef int (*enable_fn)(uint32_t enable, void *subscriber, int domain, uint32_t cbid);
typedef int (*name_fn)(const char **name, void *handle);
typedef int (*func_attr_fn)(int *value, int attrib, void *hfunc);
typedef int (*kernel_attr_fn)(int *value, int attrib, void *kernel, int dev);
typedef int (*ctx_device_fn)(int *dev);
typedef int (*capturing_fn)(void *stream, int *status);

static struct {
    subscribe_fn subscribe;
    enable_fn enable;
    name_fn func_name, kernel_name;
    func_attr_fn func_attr;
    kernel_attr_fn kernel_attr;
    ctx_device_fn ctx_device;
    capturing_fn capturing;
} api;

typedef struct {
    const void *kernel;
    unsigned int block[3], cluster[3];
    unsigned int smem;
    int result, domain, captured, used;
    unsigned long count, id;
} bsm_entry;

static bsm_entry table[BSM_TABLE_SIZE];
static unsigned long next_id = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int out_fd = -1;
static pid_t out_pid = 0;
static char out_dir[3072];
static void *subscriber;

/* ---- output ---- */

static void open_output(void) {
    char path[3200];
    pid_t pid = getpid();
    if (out_fd >= 0 && out_pid == pid) return;
    if (out_fd >= 0) close(out_fd); /* a forked child writes its own file */
    snprintf(path, sizeof path, "%s/%d.jsonl", out_dir, (int)pid);
    out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    out_pid = pid;
}

/* Appends `text` to `out` as the inside of a JSON string; returns the bytes written (out holds 6 per byte). */
static size_t escape(char *out, const char *text) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') { out[n++] = '\\'; out[n++] = (char)*c; }
        else if (*c < 0x20 || *c == 0x7f) n += (size_t)sprintf(out + n, "\\u%04x", *c);
        else out[n++] = (char)*c;
    }
    out[n] = 0;
    return n;
}

/* One line: the fields (printf-formatted, without braces), then `key` with `text` when given. One write(2). */
static void emit(const char *key, const char *name, const char *format, ...) {
    char head[BSM_LINE_MAX];
    va_list ap;
    va_start(ap, format);
    int len = vsnprintf(head, sizeof head, format, ap);
    va_end(ap);
    if (len < 0 || len >= (int)sizeof head) return;
    size_t name_len = name ? strlen(name) : 0;
    char *line = malloc((size_t)len + name_len * 6 + 32);
    if (!line) return;
    size_t n = (size_t)sprintf(line, "{%s", head);
    if (name) {
        n += (size_t)sprintf(line + n, ",\"%s\":\"", key);
        n += escape(line + n, name);
        line[n++] = '"';
    }
    line[n++] = '}';
    line[n++] = '\n';
    pthread_mutex_lock(&lock);
    open_output();
    if (out_fd >= 0 && write(out_fd, line, n) < 0) { /* a full disk loses the line, never the command */ }
    pthread_mutex_unlock(&lock);
    free(line);
}

/* ---- what the driver says about a kernel ---- */

typedef struct { const char *name; int static_bytes; } bsm_kernel_info;

/* A handle is a CUfunction or a CUkernel (the driver accepts a CUkernel cast to CUfunction): ask as both. */
static bsm_kernel_info kernel_info(void *handle, int is_kernel) {
    bsm_kernel_info info = {NULL, -1};
    int dev = 0;
    if (!handle) return info;
    if (!is_kernel && api.func_name && api.func_name(&info.name, handle) != 0) info.name = NULL;
    if (!info.name && api.kernel_name && api.kernel_name(&info.name, handle) != 0) info.name = NULL;
    if (!is_kernel && api.func_attr && api.func_attr(&info.static_bytes, BSM_ATTR_SHARED_SIZE_BYTES, handle) == 0)
        return info;
    info.static_bytes = -1;
    if (api.kernel_attr && (!api.ctx_device || api.ctx_device(&dev) == 0) &&
        api.kernel_attr(&info.static_bytes, BSM_ATTR_SHARED_SIZE_BYTES, handle, dev) != 0)
        info.static_bytes = -1;
    return info;
}

static int result_of(const bsm_callback_data *cb) {
    return cb->functionReturnValue ? *(const int *)cb->functionReturnValue : -1;
}

/* ---- attribute sets ---- */

static int shared_memory_attribute(int attr) {
    return attr >= BSM_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES && attr <= BSM_ATTR_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
}

static void attribute_set(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    int attr, value, is_kernel = 0;
    void *handle;
    if (cbid == BSM_CB_cuFuncSetAttribute && domain == BSM_DOMAIN_DRIVER) {
        const bsm_cuFuncSetAttribute_params *p = cb->functionParams;
        attr = p->attrib, value = p->value, handle = p->hfunc;
    } else if (cbid == BSM_CB_cuKernelSetAttribute && domain == BSM_DOMAIN_DRIVER) {
        const bsm_cuKernelSetAttribute_params *p = cb->functionParams;
        attr = p->attrib, value = p->val, handle = p->kernel, is_kernel = 1;
    } else {
        const bsm_cudaFuncSetAttribute_params *p = cb->functionParams;
        attr = p->attr, value = p->value, handle = (void *)p->func;
    }
    if (!shared_memory_attribute(attr)) return;
    /* A runtime handle is a host stub, not a driver handle: its name and static bytes come from the driver
     * call it makes, which has the same correlation id. */
    bsm_kernel_info info = {NULL, -1};
    if (domain == BSM_DOMAIN_DRIVER) info = kernel_info(handle, is_kernel);
    emit("name", info.name, "\"event\":\"attribute\",\"api\":\"%s\",\"domain\":\"%s\",\"correlation\":%u,\"attribute\":%d,"
         "\"value\":%d,\"result\":%d,\"static_bytes\":%d,\"handle\":\"%p\"",
         cb->functionName ? cb->functionName : "?", domain == BSM_DOMAIN_DRIVER ? "driver" : "runtime",
         cb->correlationId, attr, value, result_of(cb), info.static_bytes, handle);
}

/* ---- launches ---- */

typedef struct {
    void *kernel, *stream;
    unsigned int grid[3], block[3], cluster[3], smem;
} bsm_launch;

static void cluster_from(const bsm_launch_attribute *attrs, unsigned int count, unsigned int cluster[3]) {
    for (unsigned int i = 0; attrs && i < count; i++)
        if (attrs[i].id == BSM_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            cluster[0] = attrs[i].value.clusterDim.x, cluster[1] = attrs[i].value.clusterDim.y;
            cluster[2] = attrs[i].value.clusterDim.z;
        }
}

static int read_launch(int domain, uint32_t cbid, const void *params, bsm_launch *l) {
    memset(l, 0, sizeof *l);
    if (domain == BSM_DOMAIN_DRIVER && (cbid == BSM_CB_cuLaunchKernelEx || cbid == BSM_CB_cuLaunchKernelEx_ptsz)) {
        const bsm_cuLaunchKernelEx_params *p = params;
        const bsm_CUlaunchConfig *c = p->config;
        if (!c) return 0;
        l->kernel = p->f, l->stream = c->hStream, l->smem = c->sharedMemBytes;
        l->grid[0] = c->gridDimX, l->grid[1] = c->gridDimY, l->grid[2] = c->gridDimZ;
        l->block[0] = c->blockDimX, l->block[1] = c->blockDimY, l->block[2] = c->blockDimZ;
        cluster_from(c->attrs, c->numAttrs, l->cluster);
    } else if (domain == BSM_DOMAIN_DRIVER) { /* cuLaunchKernel, _ptsz, cuLaunchCooperativeKernel: one prefix */
        const bsm_cuLaunchKernel_params *p = params;
        l->kernel = p->f, l->stream = p->hStream, l->smem = p->sharedMemBytes;
        l->grid[0] = p->gridDimX, l->grid[1] = p->gridDimY, l->grid[2] = p->gridDimZ;
        l->block[0] = p->blockDimX, l->block[1] = p->blockDimY, l->block[2] = p->blockDimZ;
    } else if (cbid == BSM_CB_cudaLaunchKernelExC_v11060 || cbid == BSM_CB_cudaLaunchKernelExC_ptsz_v11060) {
        const bsm_cudaLaunchKernelExC_params *p = params;
        const bsm_cudaLaunchConfig *c = p->config;
        if (!c) return 0;
        l->kernel = (void *)p->func, l->stream = c->stream, l->smem = (unsigned int)c->dynamicSmemBytes;
        memcpy(l->grid, &c->gridDim, sizeof l->grid), memcpy(l->block, &c->blockDim, sizeof l->block);
        cluster_from(c->attrs, c->numAttrs, l->cluster);
    } else {
        const bsm_cudaLaunchKernel_params *p = params;
        l->kernel = (void *)p->func, l->stream = p->stream, l->smem = (unsigned int)p->sharedMem;
        memcpy(l->grid, &p->gridDim, sizeof l->grid), memcpy(l->block, &p->blockDim, sizeof l->block);
    }
    return 1;
}

/* The entry of this configuration: its count goes up; 0 when it was seen before, else its new id (or the
 * next id when the table is full, so that the launch is written rather than lost). */
static unsigned long count_launch(const bsm_launch *l, int result, int domain, int captured) {
    uintptr_t h = (uintptr_t)l->kernel * 0x9E3779B97F4A7C15ull;
    h ^= l->smem * 0x85EBCA6Bu ^ (l->block[0] << 20) ^ (l->block[1] << 10) ^ l->block[2];
    h ^= (uintptr_t)(l->cluster[0] * 131u + l->cluster[1] * 17u + l->cluster[2]) << 7 ^ (uintptr_t)result << 3;
    unsigned long id = 0;
    int seen = 0;
    pthread_mutex_lock(&lock);
    for (unsigned int probe = 0; probe < BSM_TABLE_SIZE; probe++) {
        bsm_entry *e = &table[(h + probe) % BSM_TABLE_SIZE];
        if (!e->used) {
            *e = (bsm_entry){l->kernel, {l->block[0], l->block[1], l->block[2]},
                             {l->cluster[0], l->cluster[1], l->cluster[2]}, l->smem, result, domain, captured, 1, 1,
                             next_id};
            id = next_id++;
            break;
        }
        if (e->kernel == l->kernel && e->smem == l->smem && e->result == result && e->domain == domain &&
            e->captured == captured && !memcmp(e->block, l->block, sizeof e->block) &&
            !memcmp(e->cluster, l->cluster, sizeof e->cluster)) {
            e->count++;
            seen = 1;
            break;
        }
    }
    if (!id && !seen) id = next_id++; /* the table is full */
    pthread_mutex_unlock(&lock);
    return id;
}

static void launch(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    bsm_launch l;
    int captured = 0, result = result_of(cb);
    if (!read_launch(domain, cbid, cb->functionParams, &l)) return;
    if (api.capturing && l.stream && api.capturing(l.stream, &captured) != 0) captured = 0;
    captured = captured == 1; /* CU_STREAM_CAPTURE_STATUS_ACTIVE */
    unsigned long id = count_launch(&l, result, domain, captured);
    if (!id) return;
    bsm_kernel_info info = {cb->symbolName, -1};
    if (domain == BSM_DOMAIN_DRIVER) {
        bsm_kernel_info driver = kernel_info(l.kernel, 0);
        info.static_bytes = driver.static_bytes;
        if (driver.name) info.name = driver.name;
    }
    emit("name", info.name, "\"event\":\"launch\",\"id\":%lu,\"api\":\"%s\",\"domain\":\"%s\",\"correlation\":%u,"
         "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"cluster\":[%u,%u,%u],\"dynamic_bytes\":%u,\"static_bytes\":%d,"
         "\"result\":%d,\"captured\":%s,\"handle\":\"%p\"",
         id, cb->functionName ? cb->functionName : "?", domain == BSM_DOMAIN_DRIVER ? "driver" : "runtime",
         cb->correlationId, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.cluster[0],
         l.cluster[1], l.cluster[2], l.smem, info.static_bytes, result, captured ? "true" : "false", l.kernel);
}

/* ---- kernel nodes of graphs built by hand (captured launches come through launch()) ---- */

static void graph_node(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    bsm_launch l;
    memset(&l, 0, sizeof l);
    int is_kernel = 0;
    if (domain == BSM_DOMAIN_DRIVER) {
        const bsm_cuGraphAddKernelNode_params *p = cb->functionParams;
        const bsm_CUDA_KERNEL_NODE_PARAMS_v1 *n = p->nodeParams; /* v2 starts with the same fields */
        if (!n) return;
        l.kernel = n->func, l.smem = n->sharedMemBytes;
        l.grid[0] = n->gridDimX, l.grid[1] = n->gridDimY, l.grid[2] = n->gridDimZ;
        l.block[0] = n->blockDimX, l.block[1] = n->blockDimY, l.block[2] = n->blockDimZ;
        if (cbid == BSM_CB_cuGraphAddKernelNode_v2 && !n->func)
            l.kernel = ((const bsm_CUDA_KERNEL_NODE_PARAMS_v2 *)n)->kern, is_kernel = 1;
    } else {
        const bsm_cudaGraphAddKernelNode_params *p = cb->functionParams;
        const bsm_cudaKernelNodeParams *n = p->pNodeParams;
        if (!n) return;
        l.kernel = n->func, l.smem = n->sharedMemBytes;
        memcpy(l.grid, &n->gridDim, sizeof l.grid), memcpy(l.block, &n->blockDim, sizeof l.block);
    }
    bsm_kernel_info info = {NULL, -1};
    if (domain == BSM_DOMAIN_DRIVER) info = kernel_info(l.kernel, is_kernel);
    emit("name", info.name, "\"event\":\"graph_node\",\"api\":\"%s\",\"domain\":\"%s\",\"correlation\":%u,"
         "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"dynamic_bytes\":%u,\"static_bytes\":%d,\"result\":%d,"
         "\"handle\":\"%p\"",
         cb->functionName ? cb->functionName : "?", domain == BSM_DOMAIN_DRIVER ? "driver" : "runtime",
         cb->correlationId, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem,
         info.static_bytes, result_of(cb), l.kernel);
}

static void callback(void *userdata, int domain, uint32_t cbid, const void *data) {
    const bsm_callback_data *cb = data;
    (void)userdata;
    if (cb->callbackSite != BSM_API_EXIT || !cb->functionParams) return; /* the result is known on exit */
    if (domain == BSM_DOMAIN_DRIVER) {
        switch (cbid) {
        case BSM_CB_cuFuncSetAttribute: case BSM_CB_cuKernelSetAttribute: attribute_set(domain, cbid, cb); return;
        case BSM_CB_cuGraphAddKernelNode: case BSM_CB_cuGraphAddKernelNode_v2: graph_node(domain, cbid, cb); return;
        default: launch(domain, cbid, cb); return;
        }
    }
    switch (cbid) {
    case BSM_CB_cudaFuncSetAttribute_v9000: attribute_set(domain, cbid, cb); return;
    case BSM_CB_cudaGraphAddKernelNode_v10000: graph_node(domain, cbid, cb); return;
    default: launch(domain, cbid, cb); return;
    }
}

/* ---- start and end ---- */

/* A forked child starts with no launches of its own: its counts go to its own file, not the parent's again. */
static void forget_after_fork(void) {
    memset(table, 0, sizeof table);
    next_id = 1;
    pthread_mutex_init(&lock, NULL);
}

static void write_counts(void) {
    for (unsigned int i = 0; i < BSM_TABLE_SIZE; i++)
        if (table[i].used && table[i].count > 1)
            emit("name", NULL, "\"event\":\"count\",\"id\":%lu,\"count\":%lu", table[i].id, table[i].count);
}

static void *driver_symbol(void *driver, const char *name) {
    void *symbol = driver ? dlsym(driver, name) : NULL;
    return symbol ? symbol : dlsym(RTLD_DEFAULT, name);
}

static void find_driver(void) {
    /* The driver is already loaded: it is what loads this library. */
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    api.func_name = (name_fn)driver_symbol(driver, "cuFuncGetName");
    api.kernel_name = (name_fn)driver_symbol(driver, "cuKernelGetName");
    api.func_attr = (func_attr_fn)driver_symbol(driver, "cuFuncGetAttribute");
    api.kernel_attr = (kernel_attr_fn)driver_symbol(driver, "cuKernelGetAttribute");
    api.ctx_device = (ctx_device_fn)driver_symbol(driver, "cuCtxGetDevice");
    api.capturing = (capturing_fn)driver_symbol(driver, "cuStreamIsCapturing");
}

/* libcupti: one already in the process first (two copies in one process collide), else the file
 * bisect-smem found for this run. `how` says which. */
static void *find_cupti(const char **how) {
    static const char *sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    void *handle = NULL;
    *how = "already loaded";
    /* RTLD_DEFAULT is a null handle: the program's own handle searches the same global scope. */
    if (dlsym(RTLD_DEFAULT, "cuptiSubscribe")) return dlopen(NULL, RTLD_NOW);
    for (unsigned int i = 0; i < sizeof sonames / sizeof *sonames && !handle; i++)
        handle = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD);
    if (handle) return handle;
    const char *path = getenv("BISECT_SMEM_CUPTI_LIBRARY");
    *how = "BISECT_SMEM_CUPTI_LIBRARY";
    return path && *path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
}

static void process_line(const char *cupti_path, const char *how, const char *untraced) {
    char cmdline[512] = "";
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, cmdline, sizeof cmdline - 1) : 0;
    if (fd >= 0) close(fd);
    for (ssize_t i = 0; i < n - 1; i++) if (!cmdline[i]) cmdline[i] = ' ';
    if (n > 0) cmdline[n] = 0;
    char cupti_escaped[6 * 512 + 1] = "";
    if (cupti_path && strlen(cupti_path) < 512) escape(cupti_escaped, cupti_path);
    emit("command", cmdline, "\"event\":\"process\",\"format\":%d,\"pid\":%d,\"ppid\":%d,\"collector\":\"c\","
         "\"cupti_library\":\"%s\",\"cupti_found\":\"%s\",\"untraced\":%s%s%s",
         BSM_FORMAT_VERSION, (int)getpid(), (int)getppid(), cupti_escaped, how, untraced ? "\"" : "",
         untraced ? untraced : "null", untraced ? "\"" : "");
}

static const uint32_t driver_ids[] = {
    BSM_CB_cuFuncSetAttribute, BSM_CB_cuKernelSetAttribute, BSM_CB_cuLaunchKernel, BSM_CB_cuLaunchKernel_ptsz,
    BSM_CB_cuLaunchCooperativeKernel, BSM_CB_cuLaunchCooperativeKernel_ptsz, BSM_CB_cuLaunchKernelEx,
    BSM_CB_cuLaunchKernelEx_ptsz, BSM_CB_cuGraphAddKernelNode, BSM_CB_cuGraphAddKernelNode_v2,
};
static const uint32_t runtime_ids[] = {
    BSM_CB_cudaFuncSetAttribute_v9000, BSM_CB_cudaLaunchKernel_v7000, BSM_CB_cudaLaunchKernel_ptsz_v7000,
    BSM_CB_cudaLaunchKernelExC_v11060, BSM_CB_cudaLaunchKernelExC_ptsz_v11060, BSM_CB_cudaGraphAddKernelNode_v10000,
};

/* The entry point CUDA calls in a library named by CUDA_INJECTION64_PATH, once per process, at cuInit. */
int InitializeInjection(void) {
    static int started = 0;
    const char *dir = getenv("BISECT_SMEM_TRACE_DIR"), *how = "";
    Dl_info where;
    if (started++ || !dir || !*dir || strlen(dir) >= sizeof out_dir) return 1;
    strcpy(out_dir, dir);
    void *cupti = find_cupti(&how);
    if (!cupti) {
        process_line(NULL, "none", "no libcupti could be loaded");
        return 1;
    }
    api.subscribe = (subscribe_fn)dlsym(cupti, "cuptiSubscribe");
    api.enable = (enable_fn)dlsym(cupti, "cuptiEnableCallback");
    const char *cupti_path = api.subscribe && dladdr((void *)api.subscribe, &where) ? where.dli_fname : NULL;
    if (!api.subscribe || !api.enable) {
        process_line(cupti_path, how, "libcupti lacks cuptiSubscribe or cuptiEnableCallback");
        return 1;
    }
    find_driver();
    int status = api.subscribe(&subscriber, callback, NULL);
    if (status != BSM_CUPTI_SUCCESS) {
        char why[256];
        const char *text = NULL;
        result_string_fn describe = (result_string_fn)dlsym(cupti, "cuptiGetResultString");
        if (!describe || describe(status, &text) != 0 || !text) text = "unknown";
        if (status == BSM_CUPTI_MULTIPLE_SUBSCRIBERS)
            snprintf(why, sizeof why, "another CUPTI subscriber is active (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)");
        else
            snprintf(why, sizeof why, "cuptiSubscribe failed: CUPTI error %d (%s)", status, text);
        for (char *c = why; *c; c++) if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = ' ';
        process_line(cupti_path, how, why);
        return 1;
    }
    for (unsigned int i = 0; i < sizeof driver_ids / sizeof *driver_ids; i++)
        api.enable(1, subscriber, BSM_DOMAIN_DRIVER, driver_ids[i]);
    for (unsigned int i = 0; i < sizeof runtime_ids / sizeof *runtime_ids; i++)
        api.enable(1, subscriber, BSM_DOMAIN_RUNTIME, runtime_ids[i]);
    process_line(cupti_path, how, NULL);
    pthread_atfork(NULL, NULL, forget_after_fork);
    atexit(write_counts);
    return 1;
}
