/* bisect-smem trace's collector: loaded into every CUDA process through CUDA_INJECTION64_PATH, it subscribes
 * to CUPTI's callback API and writes one JSON line per shared-memory request into $BISECT_SMEM_TRACE_DIR:
 * attribute sets (MaxDynamicSharedMemorySize, the carveout, the cluster attributes), launches (deduplicated per
 * kernel, block, dynamic bytes, cluster, capture and result, with a count) and kernel nodes of CUDA graphs.
 *
 * It needs no CUDA headers (cupti_abi.h declares what it reads) and links nothing: libcupti and the driver are
 * found with dlopen/dlsym at InitializeInjection, a libcupti already in the process first, so that one process
 * never holds two copies. Each program image writes a file of its own (PID.jsonl, then PID.2.jsonl, ... when an
 * exec kept the pid), each line with one write(2) on an O_APPEND file, so a killed process keeps every line
 * written before it died; repeated launches are counted without a lock and their counts written as they grow
 * (at each power of two) and at exit. A collector that cannot write says so once over a datagram socket.
 * Names are written mangled, as the driver gives them; bisect-smem demangles them when it explains the trace.
 * Each file's first line is its process line, with "format":2; bisect_smem/core/trace_events.py reads them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cupti_abi.h"

#define BSM_FORMAT_VERSION 2
#define BSM_LINE_MAX 1024        /* a line without its name */
#define BSM_DIR_MAX 4000         /* bytes of $BISECT_SMEM_TRACE_DIR with its NUL; trace refuses a longer --out */
#define BSM_PATH_MAX (BSM_DIR_MAX + 32) /* the folder, '/', a pid, '.', an image number, ".jsonl" */
#define BSM_IMAGES_MAX 1000      /* PID.jsonl, PID.2.jsonl, ...: the program images one pid may leave */
#define BSM_COMMAND_MAX 512      /* bytes of the command line kept */

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

static void *subscriber;

static int power_of_two(unsigned long n) { return n && !(n & (n - 1)); }

/* ---- output: one file per program image, and a notice when it cannot be written ---- */

static struct {
    pthread_mutex_t lock;
    int fd, image;
    pid_t pid, notified; /* the process whose file fd is (or failed to be), and the one that sent its notice */
    char dir[BSM_DIR_MAX], path[BSM_PATH_MAX];
    char notify[sizeof ((struct sockaddr_un *)0)->sun_path]; /* $BISECT_SMEM_TRACE_NOTIFY, without its NUL */
    char cupti[6 * 512 + 1], untraced[256];                  /* the process line's, escaped */
    const char *how;
} out = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .how = ""};

/* Appends `text` to `into` as the inside of a JSON string; returns the bytes written (into holds 6 per byte). */
static size_t escape(char *into, const char *text) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') { into[n++] = '\\'; into[n++] = (char)*c; }
        else if (*c < 0x20 || *c == 0x7f) n += (size_t)sprintf(into + n, "\\u%04x", *c);
        else into[n++] = (char)*c;
    }
    into[n] = 0;
    return n;
}

/* The command line, its arguments joined by spaces, escaped into `escaped` (6 * BSM_COMMAND_MAX + 1 bytes). */
static void command_line(char *escaped) {
    char cmdline[BSM_COMMAND_MAX] = "";
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, cmdline, sizeof cmdline - 1) : 0;
    if (fd >= 0) close(fd);
    for (ssize_t i = 0; i < n - 1; i++) if (!cmdline[i]) cmdline[i] = ' ';
    cmdline[n > 0 ? n : 0] = 0;
    escape(escaped, cmdline);
}

/* The one notice a process sends when its trace cannot be written (the folder's path too long, open() or
 * write() failing): a datagram to the abstract unix socket bisect-smem listens on, without waiting. A tool that
 * is not listening loses it; the command is never held up. */
static void notify_unwritable(int error, const char *path) {
    pid_t pid = getpid();
    if (out.notified == pid || !out.notify[0]) return;
    out.notified = pid;
    size_t path_len = strnlen(path, BSM_PATH_MAX);
    char *line = malloc(path_len * 6 + 6 * BSM_COMMAND_MAX + 128), *command = malloc(6 * BSM_COMMAND_MAX + 1);
    char *escaped = malloc(path_len * 6 + 1), *cut = strndup(path, path_len);
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (line && command && escaped && cut && s >= 0) {
        struct sockaddr_un to = {.sun_family = AF_UNIX};
        size_t name_len = strlen(out.notify);
        memcpy(to.sun_path + 1, out.notify, name_len); /* sun_path[0] stays 0: an abstract name */
        command_line(command);
        escape(escaped, cut);
        int n = sprintf(line, "{\"event\":\"unwritable\",\"pid\":%d,\"errno\":%d,\"path\":\"%s\",\"command\":\"%s\"}\n",
                        (int)pid, error, escaped, command);
        if (sendto(s, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&to,
                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + name_len)) < 0) { /* nobody listens */ }
    }
    if (s >= 0) close(s);
    free(line), free(command), free(escaped), free(cut);
}

/* The first line of every file: who wrote it. Under out.lock, with out.fd open. */
static void write_process_line(void) {
    char command[6 * BSM_COMMAND_MAX + 1], line[6 * BSM_COMMAND_MAX + sizeof out.cupti + sizeof out.untraced + 256];
    command_line(command);
    int untraced = out.untraced[0] != 0;
    int n = snprintf(line, sizeof line, "{\"event\":\"process\",\"format\":%d,\"image\":%d,\"pid\":%d,\"ppid\":%d,"
                     "\"collector\":\"c\",\"cupti_library\":\"%s\",\"cupti_found\":\"%s\",\"untraced\":%s%s%s,"
                     "\"command\":\"%s\"}\n", BSM_FORMAT_VERSION, out.image, (int)getpid(), (int)getppid(), out.cupti,
                     out.how, untraced ? "\"" : "", untraced ? out.untraced : "null", untraced ? "\"" : "", command);
    if (n > 0 && n < (int)sizeof line && write(out.fd, line, (size_t)n) < 0) notify_unwritable(errno, out.path);
}

/* This process's file, opened at its first line: O_EXCL, so an exec that kept the pid (or a reused pid) gets
 * the next image's name rather than mixing its counts into another image's. Under out.lock. */
static void open_output(void) {
    pid_t pid = getpid();
    if (out.pid == pid) return;
    if (out.fd >= 0) close(out.fd); /* a forked child writes its own file */
    out.fd = -1, out.pid = pid;
    int error = EEXIST;
    for (int image = 1; image <= BSM_IMAGES_MAX && error == EEXIST; image++) {
        if (image == 1) snprintf(out.path, sizeof out.path, "%s/%d.jsonl", out.dir, (int)pid);
        else snprintf(out.path, sizeof out.path, "%s/%d.%d.jsonl", out.dir, (int)pid, image);
        out.fd = open(out.path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
        if (out.fd >= 0) {
            out.image = image;
            write_process_line();
            return;
        }
        error = errno;
    }
    notify_unwritable(error, out.path);
}

static void write_line(const char *line, size_t n) {
    pthread_mutex_lock(&out.lock);
    open_output();
    if (out.fd >= 0 && write(out.fd, line, n) < 0) notify_unwritable(errno, out.path); /* the line is lost, never the command */
    pthread_mutex_unlock(&out.lock);
}

/* One line: the fields (printf-formatted, without braces), then `key` with `text` when given. One write(2). */
static void emit(const char *key, const char *name, const char *format, ...) {
    char head[BSM_LINE_MAX], small[4096];
    va_list ap;
    va_start(ap, format);
    int len = vsnprintf(head, sizeof head, format, ap);
    va_end(ap);
    if (len < 0 || len >= (int)sizeof head) return;
    size_t need = (size_t)len + (name ? strlen(name) * 6 + strlen(key) : 0) + 32;
    char *line = need <= sizeof small ? small : malloc(need); /* counts and most names: no malloc */
    if (!line) return;
    size_t n = (size_t)sprintf(line, "{%s", head);
    if (name) {
        n += (size_t)sprintf(line + n, ",\"%s\":\"", key);
        n += escape(line + n, name);
        line[n++] = '"';
    }
    line[n++] = '}';
    line[n++] = '\n';
    write_line(line, n);
    if (line != small) free(line);
}

/* The process line's fields, then the file with it: at start, so that an untraced process says why. */
static void start_output(const char *cupti_path, const char *how, const char *untraced) {
    if (cupti_path && strlen(cupti_path) < 512) escape(out.cupti, cupti_path);
    out.how = how;
    if (untraced) {
        snprintf(out.untraced, sizeof out.untraced, "%s", untraced);
        for (char *c = out.untraced; *c; c++) if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = ' ';
    }
    pthread_mutex_lock(&out.lock);
    open_output();
    pthread_mutex_unlock(&out.lock);
}

/* ---- what the driver says about a kernel ---- */

typedef struct { const char *name; int static_bytes; } bsm_kernel_info;

/* One attribute of a kernel, -1 when the driver does not say. A handle is a CUfunction or a CUkernel (the driver
 * accepts a CUkernel cast to CUfunction): ask as both. */
static int kernel_attribute(void *handle, int is_kernel, int attr) {
    int value = -1, dev = 0;
    if (!handle) return -1;
    if (!is_kernel && api.func_attr && api.func_attr(&value, attr, handle) == 0) return value;
    value = -1;
    if (api.kernel_attr && (!api.ctx_device || api.ctx_device(&dev) == 0) &&
        api.kernel_attr(&value, attr, handle, dev) == 0)
        return value;
    return -1;
}

static bsm_kernel_info kernel_info(void *handle, int is_kernel) {
    bsm_kernel_info info = {NULL, -1};
    if (!handle) return info;
    if (!is_kernel && api.func_name && api.func_name(&info.name, handle) != 0) info.name = NULL;
    if (!info.name && api.kernel_name && api.kernel_name(&info.name, handle) != 0) info.name = NULL;
    info.static_bytes = kernel_attribute(handle, is_kernel, BSM_ATTR_SHARED_SIZE_BYTES);
    return info;
}

/* ---- a refused launch: the kernel's limits as the driver holds them at the refusal ---- */

/* The fields a refused launch or graph node adds, "" for one that was accepted. A launch above 48 KiB whose
 * kernel never raised MaxDynamicSharedMemorySize is refused with the limit still at its default; a refusal
 * for threads or registers shows here too. A runtime handle is a host stub the driver does not know: -1. */
static void refusal_fields(char *text, size_t size, void *handle, int is_kernel, int domain, int result) {
    int driver = domain == BSM_DOMAIN_DRIVER;
    text[0] = 0;
    if (result == 0) return;
    snprintf(text, size, ",\"max_dynamic_bytes\":%d,\"max_threads\":%d,\"registers\":%d",
             driver ? kernel_attribute(handle, is_kernel, BSM_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES) : -1,
             driver ? kernel_attribute(handle, is_kernel, BSM_ATTR_MAX_THREADS_PER_BLOCK) : -1,
             driver ? kernel_attribute(handle, is_kernel, BSM_ATTR_NUM_REGS) : -1);
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

/* ---- what a launch asked for ---- */

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

/* ---- the launch table: repeats counted without a lock ---- */

#define BSM_CONFIGS_MAX 8192   /* distinct launch configurations, each with a launch line and a count */
#define BSM_REFUSED_EXTRA 1024 /* past them, refused configurations still get theirs: a refusal is what is asked */
#define BSM_SLOTS 16384        /* a power of two; at most 56 % full, so that a probe ends within a few slots */
#define BSM_PROBES_MAX 64      /* a probe that finds neither its configuration nor an empty slot: past the table */
#define BSM_OVERFLOW_SLOTS 1024
#define BSM_OVERFLOW_PROBES 16

typedef struct {
    const void *kernel;
    unsigned int block[3], cluster[3], smem;
    int result, domain, captured;
} bsm_config; /* compared whole (memcmp): always built from a zeroed struct */

typedef struct {
    bsm_config config;
    unsigned long id, count; /* count: atomic */
    int ready;               /* atomic: set (release) once config and id are written, never cleared */
} bsm_entry;

/* Entries are added under table_lock and never removed, so that a repeat finds its entry and counts it with
 * one atomic add and no lock; a configuration is in the table for good or never, as the table only fills. */
static bsm_entry table[BSM_SLOTS];
static unsigned long table_entries, next_id = 1;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Past the table: launches counted per kernel handle (a bounded table filled by compare-and-swap), and past
 * that in one count for the process; neither needs a name nor writes more than a line per power of two. */
typedef struct { const void *kernel; unsigned long count; } bsm_overflow;
static bsm_overflow overflow[BSM_OVERFLOW_SLOTS];
static unsigned long overflow_unplaced;

static uint64_t mix(uint64_t h) { /* murmur3's finalizer: every input bit reaches the low bits of the index */
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint64_t config_hash(const bsm_config *c) {
    uint64_t words[sizeof *c / 8], h = 0;
    memcpy(words, c, sizeof words);
    for (unsigned int i = 0; i < sizeof words / sizeof *words; i++) h = mix(h ^ words[i]);
    return h;
}

enum { BSM_FOUND, BSM_EMPTY, BSM_EXHAUSTED };

static int find(const bsm_config *c, uint64_t h, bsm_entry **slot) {
    for (unsigned int i = 0; i < BSM_PROBES_MAX; i++) {
        *slot = &table[(h + i) & (BSM_SLOTS - 1)];
        if (!__atomic_load_n(&(*slot)->ready, __ATOMIC_ACQUIRE)) return BSM_EMPTY;
        if (!memcmp(&(*slot)->config, c, sizeof *c)) return BSM_FOUND;
    }
    return BSM_EXHAUSTED;
}

static int room_for(const bsm_config *c) {
    unsigned long n = __atomic_load_n(&table_entries, __ATOMIC_RELAXED);
    return n < BSM_CONFIGS_MAX || (c->result != 0 && n < BSM_CONFIGS_MAX + BSM_REFUSED_EXTRA);
}

enum { BSM_NEW, BSM_REPEAT, BSM_PAST_TABLE };
typedef struct { int kind; unsigned long id, count; } bsm_counted;

static bsm_counted count_launch(const bsm_config *c) {
    uint64_t h = config_hash(c);
    bsm_entry *e;
    int found = find(c, h, &e);
    if (found == BSM_EMPTY && room_for(c)) {
        pthread_mutex_lock(&table_lock);
        found = find(c, h, &e); /* another thread may have added it since */
        if (found == BSM_EMPTY && room_for(c)) {
            e->config = *c, e->id = next_id++, e->count = 1;
            __atomic_store_n(&table_entries, table_entries + 1, __ATOMIC_RELAXED);
            __atomic_store_n(&e->ready, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&table_lock);
            return (bsm_counted){BSM_NEW, e->id, 1};
        }
        pthread_mutex_unlock(&table_lock);
    }
    if (found == BSM_FOUND) return (bsm_counted){BSM_REPEAT, e->id, __atomic_add_fetch(&e->count, 1, __ATOMIC_RELAXED)};
    return (bsm_counted){BSM_PAST_TABLE, 0, 0};
}

static void overflow_line(const void *kernel, unsigned long count) {
    if (kernel) emit("name", NULL, "\"event\":\"overflow\",\"handle\":\"%p\",\"count\":%lu", kernel, count);
    else emit("name", NULL, "\"event\":\"overflow\",\"handle\":null,\"count\":%lu", count);
}

static void count_past_table(const void *kernel) {
    uint64_t h = mix((uint64_t)(uintptr_t)kernel);
    for (unsigned int i = 0; kernel && i < BSM_OVERFLOW_PROBES; i++) {
        bsm_overflow *o = &overflow[(h + i) & (BSM_OVERFLOW_SLOTS - 1)];
        const void *held = __atomic_load_n(&o->kernel, __ATOMIC_ACQUIRE);
        if (!held) /* claim the slot; a thread that claimed it first leaves its kernel in `held` */
            held = __atomic_compare_exchange_n(&o->kernel, &held, kernel, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
                       ? kernel : held;
        if (held == kernel) {
            unsigned long n = __atomic_add_fetch(&o->count, 1, __ATOMIC_RELAXED);
            if (power_of_two(n)) overflow_line(kernel, n);
            return;
        }
    }
    unsigned long n = __atomic_add_fetch(&overflow_unplaced, 1, __ATOMIC_RELAXED);
    if (power_of_two(n)) overflow_line(NULL, n);
}

/* ---- launches ---- */

static void launch(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    bsm_launch l;
    bsm_config c;
    int captured = 0, result = result_of(cb);
    if (!read_launch(domain, cbid, cb->functionParams, &l)) return;
    if (api.capturing && l.stream && api.capturing(l.stream, &captured) != 0) captured = 0;
    captured = captured == 1; /* CU_STREAM_CAPTURE_STATUS_ACTIVE */
    memset(&c, 0, sizeof c);
    c.kernel = l.kernel, c.smem = l.smem, c.result = result, c.domain = domain, c.captured = captured;
    memcpy(c.block, l.block, sizeof c.block), memcpy(c.cluster, l.cluster, sizeof c.cluster);
    bsm_counted counted = count_launch(&c);
    if (counted.kind == BSM_REPEAT) {
        if (power_of_two(counted.count))
            emit("name", NULL, "\"event\":\"count\",\"id\":%lu,\"count\":%lu", counted.id, counted.count);
        return;
    }
    if (counted.kind == BSM_PAST_TABLE) {
        /* A runtime launch reaches the driver, whose callback counts it: counted once, by its driver handle. */
        if (domain == BSM_DOMAIN_DRIVER) count_past_table(l.kernel);
        return;
    }
    bsm_kernel_info info = {cb->symbolName, -1};
    if (domain == BSM_DOMAIN_DRIVER) {
        bsm_kernel_info driver = kernel_info(l.kernel, 0);
        info.static_bytes = driver.static_bytes;
        if (driver.name) info.name = driver.name;
    }
    char refusal[128];
    refusal_fields(refusal, sizeof refusal, l.kernel, 0, domain, result);
    emit("name", info.name, "\"event\":\"launch\",\"id\":%lu,\"api\":\"%s\",\"domain\":\"%s\",\"correlation\":%u,"
         "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"cluster\":[%u,%u,%u],\"dynamic_bytes\":%u,\"static_bytes\":%d,"
         "\"result\":%d%s,\"captured\":%s,\"handle\":\"%p\"",
         counted.id, cb->functionName ? cb->functionName : "?", domain == BSM_DOMAIN_DRIVER ? "driver" : "runtime",
         cb->correlationId, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.cluster[0],
         l.cluster[1], l.cluster[2], l.smem, info.static_bytes, result, refusal, captured ? "true" : "false", l.kernel);
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
    char refusal[128];
    refusal_fields(refusal, sizeof refusal, l.kernel, is_kernel, domain, result_of(cb));
    emit("name", info.name, "\"event\":\"graph_node\",\"api\":\"%s\",\"domain\":\"%s\",\"correlation\":%u,"
         "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"dynamic_bytes\":%u,\"static_bytes\":%d,\"result\":%d%s,"
         "\"handle\":\"%p\"",
         cb->functionName ? cb->functionName : "?", domain == BSM_DOMAIN_DRIVER ? "driver" : "runtime",
         cb->correlationId, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem,
         info.static_bytes, result_of(cb), refusal, l.kernel);
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
    if (table_entries) memset(table, 0, sizeof table);
    memset(overflow, 0, sizeof overflow);
    table_entries = 0, next_id = 1, overflow_unplaced = 0;
    pthread_mutex_init(&table_lock, NULL);
    pthread_mutex_init(&out.lock, NULL);
}

/* At exit, each count that grew past its last power of two (those are written already). */
static void write_counts(void) {
    for (unsigned int i = 0; i < BSM_SLOTS; i++) {
        unsigned long count = __atomic_load_n(&table[i].count, __ATOMIC_RELAXED);
        if (__atomic_load_n(&table[i].ready, __ATOMIC_ACQUIRE) && count > 1 && !power_of_two(count))
            emit("name", NULL, "\"event\":\"count\",\"id\":%lu,\"count\":%lu", table[i].id, count);
    }
    for (unsigned int i = 0; i < BSM_OVERFLOW_SLOTS; i++) {
        unsigned long count = __atomic_load_n(&overflow[i].count, __ATOMIC_RELAXED);
        if (count && !power_of_two(count)) overflow_line(overflow[i].kernel, count);
    }
    unsigned long unplaced = __atomic_load_n(&overflow_unplaced, __ATOMIC_RELAXED);
    if (unplaced && !power_of_two(unplaced)) overflow_line(NULL, unplaced);
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
    const char *dir = getenv("BISECT_SMEM_TRACE_DIR"), *notify = getenv("BISECT_SMEM_TRACE_NOTIFY"), *how = "";
    Dl_info where;
    if (started++ || !dir || !*dir) return 1;
    if (notify && strlen(notify) < sizeof out.notify) strcpy(out.notify, notify);
    if (strlen(dir) >= sizeof out.dir) {
        notify_unwritable(ENAMETOOLONG, dir);
        return 1;
    }
    strcpy(out.dir, dir);
    void *cupti = find_cupti(&how);
    if (!cupti) {
        start_output(NULL, "none", "no libcupti could be loaded");
        return 1;
    }
    api.subscribe = (subscribe_fn)dlsym(cupti, "cuptiSubscribe");
    api.enable = (enable_fn)dlsym(cupti, "cuptiEnableCallback");
    const char *cupti_path = api.subscribe && dladdr((void *)api.subscribe, &where) ? where.dli_fname : NULL;
    if (!api.subscribe || !api.enable) {
        start_output(cupti_path, how, "libcupti lacks cuptiSubscribe or cuptiEnableCallback");
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
        start_output(cupti_path, how, why);
        return 1;
    }
    for (unsigned int i = 0; i < sizeof driver_ids / sizeof *driver_ids; i++)
        api.enable(1, subscriber, BSM_DOMAIN_DRIVER, driver_ids[i]);
    for (unsigned int i = 0; i < sizeof runtime_ids / sizeof *runtime_ids; i++)
        api.enable(1, subscriber, BSM_DOMAIN_RUNTIME, runtime_ids[i]);
    start_output(cupti_path, how, NULL);
    pthread_atfork(NULL, NULL, forget_after_fork);
    atexit(write_counts);
    return 1;
}
