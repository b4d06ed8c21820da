/* bisect-smem trace's collector: loaded into every CUDA process through CUDA_INJECTION64_PATH, it subscribes
 * to CUPTI's callback API and writes one JSON line per shared-memory request into $BISECT_SMEM_TRACE_DIR:
 * attribute sets (MaxDynamicSharedMemorySize, the carveout, the cluster attributes), launches (deduplicated per
 * kernel, block, dynamic bytes, cluster, capture and result, with a count), kernel nodes of CUDA graphs, and the
 * replays of executable graphs (each cuGraphLaunch runs every kernel node of its exec once more).
 *
 * It needs no CUDA headers (cupti_abi.h declares what it reads) and links nothing: libcupti and the driver are
 * found with dlopen/dlsym at InitializeInjection, a libcupti already in the process first, so that one process
 * never holds two copies. Each program image writes a file of its own (PID.jsonl, then PID.2.jsonl, ... when an
 * exec kept the pid), each line with one write(2) on an O_APPEND file, so a killed process keeps every line
 * written before it died; repeated launches are counted without a lock and their counts written as they grow
 * (at each power of two) and at exit. A collector that cannot write says so once over a datagram socket.
 * Names are written mangled, as the driver gives them; bisect-smem demangles them when it explains the trace.
 * Each file's first line is its process line, with "format":2; bisect_smem/core/trace_events.py reads them.
 * A driver without cuFuncGetName/cuKernelGetName (before R545) gives them as parameters of the calls that make
 * the handles (`function` lines).
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

/* This process's pid, kept so that a line costs no getpid(2) (glibc asks the kernel each time): set at start and
 * in a forked child (pthread_atfork), the only way a process's pid changes under this library. */
static pid_t self_pid;

static pid_t current_pid(void) { return self_pid ? self_pid : getpid(); }

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
    pid_t pid = current_pid();
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

/* The decimal digits of `n` at the end of `into` (21 bytes); returns where they start. */
static char *decimal(char *into, unsigned long n) {
    char *at = into + 20;
    *at = 0;
    do *--at = (char)('0' + n % 10); while (n /= 10);
    return at;
}

/* {"event":"count","id":N,"count":N}: the line most written (at each power of two of every configuration), so
 * it is put together by hand rather than by printf, byte for byte as emit() would write it. */
static void count_line(unsigned long id, unsigned long count) {
    static const char head[] = "{\"event\":\"count\",\"id\":", middle[] = ",\"count\":";
    char line[sizeof head + sizeof middle + 2 * 20 + 2], digits[21];
    size_t n = sizeof head - 1;
    memcpy(line, head, n);
    const char *d = decimal(digits, id);
    size_t len = (size_t)(digits + 20 - d);
    memcpy(line + n, d, len), n += len;
    memcpy(line + n, middle, sizeof middle - 1), n += sizeof middle - 1;
    d = decimal(digits, count), len = (size_t)(digits + 20 - d);
    memcpy(line + n, d, len), n += len;
    line[n++] = '}', line[n++] = '\n';
    write_line(line, n);
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

static const char *known_name(const void *handle);

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
    if (!info.name) info.name = known_name(handle); /* a driver without the name calls: the call that made it */
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
} bsm_config;

typedef struct {
    bsm_config config;
    unsigned long id;    /* atomic: 0 until config and count are written (then set with release), never cleared */
    unsigned long count; /* atomic */
} __attribute__((aligned(64))) bsm_entry; /* one cache line: threads counting two entries never share one */

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

/* Read field by field, as launch() writes them, each 32-bit field times its own odd constant: a wide read of
 * fields just stored one by one (memcpy, memcmp, or two fields read as one 64-bit word) waits for the stores to
 * retire, which cost more than the rest of a repeat. The products are independent (a mix per word made a chain
 * of twelve multiplications); their sum is mixed once. */
static uint64_t config_hash(const bsm_config *c) {
    uint64_t h = (uint64_t)(uintptr_t)c->kernel * 0x9E3779B97F4A7C15ull;
    h += c->block[0] * 0xC2B2AE3D27D4EB4Full + c->block[1] * 0x165667B19E3779F9ull;
    h += c->block[2] * 0xD6E8FEB86659FD93ull + c->cluster[0] * 0xFF51AFD7ED558CCDull;
    h += c->cluster[1] * 0xC4CEB9FE1A85EC53ull + c->cluster[2] * 0x27D4EB2F165667C5ull;
    h += c->smem * 0x85EBCA77C2B2AE63ull + (uint32_t)c->result * 0x94D049BB133111EBull;
    h += (uint32_t)c->domain * 0xBF58476D1CE4E5B9ull + (uint32_t)c->captured * 0x2545F4914F6CDD1Dull;
    return mix(h);
}

static int same_config(const bsm_config *a, const bsm_config *b) {
    return a->kernel == b->kernel && a->smem == b->smem && a->block[0] == b->block[0] && a->block[1] == b->block[1] &&
           a->block[2] == b->block[2] && a->cluster[0] == b->cluster[0] && a->cluster[1] == b->cluster[1] &&
           a->cluster[2] == b->cluster[2] && a->result == b->result && a->domain == b->domain &&
           a->captured == b->captured;
}

enum { BSM_FOUND, BSM_EMPTY, BSM_EXHAUSTED };

static int find(const bsm_config *c, uint64_t h, bsm_entry **slot) {
    for (unsigned int i = 0; i < BSM_PROBES_MAX; i++) {
        *slot = &table[(h + i) & (BSM_SLOTS - 1)];
        if (!__atomic_load_n(&(*slot)->id, __ATOMIC_ACQUIRE)) return BSM_EMPTY;
        if (same_config(&(*slot)->config, c)) return BSM_FOUND;
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
            unsigned long id = next_id++;
            e->config = *c, e->count = 1;
            __atomic_store_n(&table_entries, table_entries + 1, __ATOMIC_RELAXED);
            __atomic_store_n(&e->id, id, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&table_lock);
            return (bsm_counted){BSM_NEW, id, 1};
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

/* ---- stream capture: open captures counted, so that a launch asks the driver only while one is open ---- */

/* cuStreamIsCapturing is a driver call, with its locks, on every launch; with no capture open in the process
 * (a serving loop between its graphs' captures, any program that captures none) no stream can be capturing,
 * and the answer is known without asking. A stream joined to a capture (by waiting on an event of a capturing
 * stream) is captured only while the capture that it joined is open, so it is asked about too. */
static int open_captures;

static void capture_changed(uint32_t cbid, const bsm_callback_data *cb) {
    int result = result_of(cb);
    int ended = cbid == BSM_CB_cuStreamEndCapture || cbid == BSM_CB_cuStreamEndCapture_ptsz;
    if (!ended && result == 0) __atomic_add_fetch(&open_captures, 1, __ATOMIC_RELEASE);
    /* An end that fails for an invalidated capture ends it too (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED); one on
     * a stream that was not capturing ends nothing. Never below 0: then every launch asks, as before. */
    if (ended && (result == 0 || result == BSM_STREAM_CAPTURE_INVALIDATED) &&
        __atomic_sub_fetch(&open_captures, 1, __ATOMIC_RELEASE) < 0)
        __atomic_store_n(&open_captures, 0, __ATOMIC_RELEASE);
}

static int capture_call(uint32_t cbid) {
    switch (cbid) {
    case BSM_CB_cuStreamBeginCapture: case BSM_CB_cuStreamBeginCapture_ptsz: case BSM_CB_cuStreamEndCapture:
    case BSM_CB_cuStreamEndCapture_ptsz: case BSM_CB_cuStreamBeginCapture_v2:
    case BSM_CB_cuStreamBeginCapture_v2_ptsz: case BSM_CB_cuStreamBeginCaptureToGraph:
    case BSM_CB_cuStreamBeginCaptureToGraph_ptsz:
        return 1;
    default:
        return 0;
    }
}

static void launch(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    bsm_launch l;
    bsm_config c;
    int captured = 0, result = result_of(cb);
    if (!read_launch(domain, cbid, cb->functionParams, &l)) return;
    if (api.capturing && l.stream && __atomic_load_n(&open_captures, __ATOMIC_ACQUIRE) > 0 &&
        api.capturing(l.stream, &captured) != 0)
        captured = 0;
    captured = captured == 1; /* CU_STREAM_CAPTURE_STATUS_ACTIVE */
    memset(&c, 0, sizeof c);
    c.kernel = l.kernel, c.smem = l.smem, c.result = result, c.domain = domain, c.captured = captured;
    memcpy(c.block, l.block, sizeof c.block), memcpy(c.cluster, l.cluster, sizeof c.cluster);
    bsm_counted counted = count_launch(&c);
    if (counted.kind == BSM_REPEAT) {
        if (power_of_two(counted.count)) count_line(counted.id, counted.count);
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

static void *driver_symbol(void *driver, const char *name);

/* ---- names where the driver has no cuFuncGetName / cuKernelGetName (drivers before R545) ----
 * The name is a parameter of the call that made the handle: cuModuleGetFunction, cuLibraryGetKernel, and
 * cuKernelGetFunction (a CUfunction of a named CUkernel), cudaGetFuncBySymbol (the host stub's own symbol). Each
 * handle is written once as a `function` line; launches and attribute sets of it carry the name as well. */

#define BSM_NAMES_SIZE 8192 /* distinct handles named; past it a name is written on every call that gives it */

typedef struct { const void *handle; char *name; } bsm_named;
static bsm_named names[BSM_NAMES_SIZE];
static int names_needed; /* the driver lacks cuFuncGetName or cuKernelGetName: the calls below are followed */
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER; /* the names below and the executable graphs */

static bsm_named *named_slot(const void *handle) {
    uintptr_t h = (uintptr_t)handle * 0x9E3779B97F4A7C15ull >> 17;
    for (unsigned int probe = 0; probe < BSM_NAMES_SIZE; probe++) {
        bsm_named *slot = &names[(h + probe) % BSM_NAMES_SIZE];
        if (!slot->handle || slot->handle == handle) return slot;
    }
    return NULL;
}

/* The name a call gave this handle, or NULL. Names are never freed, so the pointer outlives the lock. */
static const char *known_name(const void *handle) {
    const char *name = NULL;
    if (!handle || !names_needed) return NULL;
    pthread_mutex_lock(&graph_lock);
    bsm_named *slot = named_slot(handle);
    if (slot && slot->handle) name = slot->name;
    pthread_mutex_unlock(&graph_lock);
    return name;
}

static void remember_name(const char *api_name, const void *handle, const char *name) {
    if (!handle || !name || !*name) return;
    int fresh = 1;
    pthread_mutex_lock(&graph_lock);
    bsm_named *slot = named_slot(handle);
    if (slot && slot->handle && !strcmp(slot->name, name)) fresh = 0;
    else if (slot) {
        char *copy = strdup(name);
        if (copy) slot->handle = handle, slot->name = copy; /* a reused handle takes its new name */
    }
    pthread_mutex_unlock(&graph_lock);
    if (fresh)
        emit("name", name, "\"event\":\"function\",\"api\":\"%s\",\"handle\":\"%p\"", api_name, handle);
}

static void handle_named(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    const char *api_name = cb->functionName ? cb->functionName : "?";
    if (result_of(cb) != 0) return;
    if (domain == BSM_DOMAIN_RUNTIME) { /* cudaGetFuncBySymbol: the host stub has the kernel's mangled name */
        const bsm_cudaGetFuncBySymbol_params *p = cb->functionParams;
        Dl_info where;
        void *function = p->functionPtr ? *p->functionPtr : NULL;
        const char *name = known_name(function); /* its driver call, if it made one, named it already */
        if (!name && p->symbolPtr && dladdr(p->symbolPtr, &where) && where.dli_saddr == p->symbolPtr)
            name = where.dli_sname;
        remember_name(api_name, function, name);
    } else if (cbid == BSM_CB_cuModuleGetFunction) {
        const bsm_cuModuleGetFunction_params *p = cb->functionParams;
        if (p->hfunc) remember_name(api_name, *p->hfunc, p->name);
    } else if (cbid == BSM_CB_cuLibraryGetKernel) {
        const bsm_cuLibraryGetKernel_params *p = cb->functionParams;
        if (p->pKernel) remember_name(api_name, *p->pKernel, p->name);
    } else {
        const bsm_cuKernelGetFunction_params *p = cb->functionParams;
        if (p->pFunc) remember_name(api_name, *p->pFunc, known_name(p->kernel));
    }
}

/* ---- executable graphs: their kernel nodes when instantiated, their replays when launched ----
 * An instantiation writes each kernel node of the graph (child graphs included) as a `graph_node` with the exec
 * and an id; each cuGraphLaunch of that exec is one replay, written as a `replay` count at each power of two and
 * at exit (or when the exec is destroyed). A handle instantiated again after its exec was destroyed or updated
 * is another exec: "0x…#2", "0x…#3". A refused instantiation writes, with the refusal and no exec, the kernel
 * node the driver names as its cause (cuGraphInstantiate_v2, cuGraphInstantiateWithParams), else every kernel
 * node; a refused replay writes a `replay` line with its result. */

#define BSM_EXECS_SIZE 4096      /* executable graphs counted; past it a launch is not counted */
#define BSM_EXEC_NODES_SIZE 16384 /* (exec, node) -> id, for a node changed after instantiation */
#define BSM_GRAPH_DEPTH 8         /* child graphs walked inside a graph */

typedef int (*graph_nodes_fn)(void *graph, void **nodes, size_t *count);
typedef int (*node_type_fn)(void *node, int *type);
typedef int (*kernel_node_params_fn)(void *node, bsm_CUDA_KERNEL_NODE_PARAMS_v2 *params);
typedef int (*child_graph_fn)(void *node, void **graph);

static struct {
    graph_nodes_fn nodes;
    node_type_fn node_type;
    kernel_node_params_fn kernel_params; /* cuGraphKernelNodeGetParams_v2, else the v1 call (a prefix of v2) */
    child_graph_fn child_graph;
} graph_api;

typedef struct {
    const void *exec;
    unsigned int generation; /* instantiations seen at this handle */
    int live;                /* instantiated, not yet destroyed */
    unsigned long replays;
    int refused_result;      /* the last refused launch's result, its call (cuGraphLaunch or _ptsz), and how */
    uint32_t refused_cbid;   /* many refusals with them are not written yet */
    unsigned long refused_unwritten;
    uint64_t signature;      /* of the kernel nodes it runs: an update to the same nodes is no new exec */
} bsm_exec;

/* A kernel node of an exec as last written: a change to the same parameters (a loop that sets each node's
 * arguments before every replay) writes nothing. */
typedef struct { const void *exec, *node; unsigned int generation; unsigned long id; uint64_t config; } bsm_exec_node;

static bsm_exec execs[BSM_EXECS_SIZE];
static bsm_exec_node exec_nodes[BSM_EXEC_NODES_SIZE];

static void find_graph_driver(void) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    graph_api.nodes = (graph_nodes_fn)driver_symbol(driver, "cuGraphGetNodes");
    graph_api.node_type = (node_type_fn)driver_symbol(driver, "cuGraphNodeGetType");
    graph_api.kernel_params = (kernel_node_params_fn)driver_symbol(driver, "cuGraphKernelNodeGetParams_v2");
    if (!graph_api.kernel_params)
        graph_api.kernel_params = (kernel_node_params_fn)driver_symbol(driver, "cuGraphKernelNodeGetParams");
    graph_api.child_graph = (child_graph_fn)driver_symbol(driver, "cuGraphChildGraphNodeGetGraph");
}

/* The entry of this exec (made when first seen, lock held), or NULL when the table is full. */
static bsm_exec *exec_slot(const void *exec) {
    uintptr_t h = (uintptr_t)exec * 0x9E3779B97F4A7C15ull >> 17;
    for (unsigned int probe = 0; probe < BSM_EXECS_SIZE; probe++) {
        bsm_exec *e = &execs[(h + probe) % BSM_EXECS_SIZE];
        if (e->exec == exec) return e;
        if (!e->exec) {
            *e = (bsm_exec){.exec = exec}; /* no instantiation seen yet */
            return e;
        }
    }
    return NULL;
}

static void exec_label(char label[48], const void *exec, unsigned int generation) {
    if (generation > 1) snprintf(label, 48, "%p#%u", exec, generation);
    else snprintf(label, 48, "%p", exec);
}

/* What decides a kernel node's request: its kernel, grid, block and dynamic shared memory. */
static uint64_t node_config(const bsm_CUDA_KERNEL_NODE_PARAMS_v2 *n) {
    uint64_t h = (uint64_t)(uintptr_t)(n->func ? n->func : n->kern) * 0x9E3779B97F4A7C15ull;
    const unsigned int fields[7] = {n->gridDimX, n->gridDimY, n->gridDimZ, n->blockDimX, n->blockDimY,
                                    n->blockDimZ, n->sharedMemBytes};
    for (int i = 0; i < 7; i++) h = (h ^ fields[i]) * 0x100000001B3ull;
    return h;
}

/* The id of a kernel node of this exec: the one it was written with, or a new one; 0 when it was written
 * with this `config` already. */
static unsigned long exec_node_id(const void *exec, unsigned int generation, const void *node, uint64_t config) {
    uintptr_t h = ((uintptr_t)exec ^ (uintptr_t)node * 31u ^ generation) * 0x9E3779B97F4A7C15ull >> 17;
    unsigned long id = 0;
    int same = 0;
    pthread_mutex_lock(&table_lock);
    for (unsigned int probe = 0; probe < BSM_EXEC_NODES_SIZE && node; probe++) {
        bsm_exec_node *n = &exec_nodes[(h + probe) % BSM_EXEC_NODES_SIZE];
        if (n->exec == exec && n->node == node && n->generation == generation) {
            id = n->id, same = n->config == config;
            n->config = config;
            break;
        }
        if (!n->exec) {
            *n = (bsm_exec_node){exec, node, generation, next_id, config};
            break;
        }
    }
    if (!id) id = next_id++;
    pthread_mutex_unlock(&table_lock);
    return same ? 0 : id;
}

/* One kernel node as a `graph_node` line; `exec` (a label) and `id` only for a node of an executable graph. */
static void node_line(const bsm_callback_data *cb, int domain, const bsm_CUDA_KERNEL_NODE_PARAMS_v2 *n,
                      int has_kern, int result, const char *exec, unsigned long id, const void *node) {
    void *handle = n->func;
    int is_kernel = 0, refusal[3] = {-1, -1, -1};
    if (!handle && has_kern) handle = n->kern, is_kernel = 1;
    bsm_kernel_info info = {NULL, -1};
    if (domain == BSM_DOMAIN_DRIVER) {
        info = kernel_info(handle, is_kernel);
        if (result != 0) {
            refusal[0] = kernel_attribute(handle, is_kernel, BSM_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES);
            refusal[1] = kernel_attribute(handle, is_kernel, BSM_ATTR_MAX_THREADS_PER_BLOCK);
            refusal[2] = kernel_attribute(handle, is_kernel, BSM_ATTR_NUM_REGS);
        }
    }
    char where[160] = "";
    if (exec) snprintf(where, sizeof where, ",\"exec\":\"%s\",\"id\":%lu,\"node\":\"%p\"", exec, id, node);
    emit("name", info.name, "\"event\":\"graph_node\",\"api\":\"%s\",\"domain\":\"%s\",\"correlation\":%u,"
         "\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"dynamic_bytes\":%u,\"static_bytes\":%d,\"result\":%d,"
         "\"max_dynamic_bytes\":%d,\"max_threads\":%d,\"registers\":%d,\"handle\":\"%p\"%s",
         cb->functionName ? cb->functionName : "?", domain == BSM_DOMAIN_DRIVER ? "driver" : "runtime",
         cb->correlationId, n->gridDimX, n->gridDimY, n->gridDimZ, n->blockDimX, n->blockDimY, n->blockDimZ,
         n->sharedMemBytes, info.static_bytes, result, refusal[0], refusal[1], refusal[2], handle, where);
}

/* A walk over a graph's kernel nodes: what it writes, and the signature of what it saw. */
typedef struct {
    const bsm_callback_data *cb;
    int result;
    const void *exec;        /* with its generation: nodes of an exec, with ids */
    unsigned int generation;
    int write;               /* 0: only the signature */
    const void *only;        /* the node the driver named as the one it refused; NULL: every node */
    uint64_t signature;
    int written;
} bsm_walk;

/* Every kernel node of `graph` and of the graphs inside it, as the driver holds them now. */
static void walk_graph(bsm_walk *w, void *graph, int depth) {
    size_t count = 0;
    char label[48];
    if (!graph || depth > BSM_GRAPH_DEPTH || !graph_api.nodes || !graph_api.node_type || !graph_api.kernel_params ||
        graph_api.nodes(graph, NULL, &count) != 0 || !count)
        return;
    void **nodes = calloc(count, sizeof *nodes);
    if (!nodes) return;
    if (graph_api.nodes(graph, nodes, &count) == 0) {
        if (w->exec) exec_label(label, w->exec, w->generation);
        for (size_t i = 0; i < count; i++) {
            int type = -1;
            void *child = NULL;
            bsm_CUDA_KERNEL_NODE_PARAMS_v2 params;
            memset(&params, 0, sizeof params);
            if (graph_api.node_type(nodes[i], &type) != 0) continue;
            if (type == BSM_GRAPH_NODE_TYPE_GRAPH && graph_api.child_graph &&
                graph_api.child_graph(nodes[i], &child) == 0)
                walk_graph(w, child, depth + 1);
            if (type != BSM_GRAPH_NODE_TYPE_KERNEL || (w->only && nodes[i] != w->only) ||
                graph_api.kernel_params(nodes[i], &params) != 0)
                continue;
            uint64_t config = node_config(&params);
            w->signature = (w->signature ^ config) * 0x100000001B3ull;
            if (!w->write) continue;
            unsigned long id = w->exec ? exec_node_id(w->exec, w->generation, nodes[i], config) : 0;
            if (w->exec && !id) continue;
            node_line(w->cb, BSM_DOMAIN_DRIVER, &params, 1, w->result, w->exec ? label : NULL, id, nodes[i]);
            w->written++;
        }
    }
    free(nodes);
}

/* The node a refused instantiation names as the cause, where its call has a place for one. */
static const void *refused_node(uint32_t cbid, const void *params) {
    if (cbid == BSM_CB_cuGraphInstantiate || cbid == BSM_CB_cuGraphInstantiate_v2) {
        const bsm_cuGraphInstantiate_v2_params *p = params;
        return p->phErrorNode ? *p->phErrorNode : NULL;
    }
    if (cbid == BSM_CB_cuGraphInstantiateWithParams || cbid == BSM_CB_cuGraphInstantiateWithParams_ptsz) {
        const bsm_cuGraphInstantiateWithParams_params *p = params;
        return p->instantiateParams ? p->instantiateParams->hErrNode_out : NULL;
    }
    return NULL;
}

/* Lines of an exec's counts, taken while the lock is held and written after it is released. */
typedef struct {
    char label[48];
    unsigned long replays, refused;
    int refused_result;
    const char *refused_api;
} bsm_exec_counts;

static void write_exec_counts(const bsm_exec_counts *c) {
    if (c->replays)
        emit("name", NULL, "\"event\":\"replay\",\"exec\":\"%s\",\"count\":%lu", c->label, c->replays);
    if (c->refused)
        emit("name", NULL, "\"event\":\"replay\",\"api\":\"%s\",\"exec\":\"%s\",\"count\":%lu,\"result\":%d",
             c->refused_api ? c->refused_api : "?", c->label, c->refused, c->refused_result);
}

/* Everything of `e` not written yet (its final replay count, its unwritten refusals); lock held. */
static bsm_exec_counts exec_final(bsm_exec *e) {
    bsm_exec_counts c = {"", e->replays, e->refused_unwritten, e->refused_result,
                         e->refused_cbid == BSM_CB_cuGraphLaunch_ptsz ? "cuGraphLaunch_ptsz" : "cuGraphLaunch"};
    exec_label(c.label, e->exec, e->generation);
    e->refused_unwritten = 0;
    return c;
}

static void instantiated(uint32_t cbid, const bsm_callback_data *cb) {
    const bsm_cuGraphInstantiate_params *p = cb->functionParams;
    int result = result_of(cb);
    if (result != 0) { /* no exec: the node the driver names is written with the refusal, else every one */
        bsm_walk refused = {.cb = cb, .result = result, .write = 1, .only = refused_node(cbid, p)};
        walk_graph(&refused, p->hGraph, 0);
        if (!refused.written && refused.only) refused.only = NULL, walk_graph(&refused, p->hGraph, 0);
        return;
    }
    void *exec = p->phGraphExec ? *p->phGraphExec : NULL;
    if (!exec) return;
    bsm_exec_counts before = {"", 0, 0, 0, NULL};
    bsm_walk walk = {.cb = cb, .exec = exec, .generation = 1, .write = 1};
    pthread_mutex_lock(&graph_lock);
    bsm_exec *e = exec_slot(exec);
    if (e) {
        if (e->live) before = exec_final(e); /* a handle reused without a cuGraphExecDestroy seen */
        *e = (bsm_exec){.exec = exec, .generation = e->generation + 1, .live = 1};
        walk.generation = e->generation;
    }
    pthread_mutex_unlock(&graph_lock);
    write_exec_counts(&before);
    walk_graph(&walk, p->hGraph, 0);
    pthread_mutex_lock(&graph_lock);
    if (e && e->exec == exec && e->generation == walk.generation) e->signature = walk.signature;
    pthread_mutex_unlock(&graph_lock);
}

/* cuGraphLaunch: one replay counted, or a refusal. A refused launch or upload is written at once the first time
 * it comes with its result; repeats of a refused launch are counted and written when the exec ends. */
static void replayed(uint32_t cbid, const bsm_callback_data *cb) {
    const bsm_cuGraphLaunch_params *p = cb->functionParams;
    int result = result_of(cb), launch_call = cbid == BSM_CB_cuGraphLaunch || cbid == BSM_CB_cuGraphLaunch_ptsz;
    const char *api_name = cb->functionName ? cb->functionName : "?";
    if (!p->hGraphExec || (result == 0 && !launch_call)) return; /* an upload that succeeded runs nothing */
    bsm_exec_counts earlier = {"", 0, 0, 0, NULL}, now = {"", 0, 0, result, api_name};
    exec_label(now.label, p->hGraphExec, 1);
    pthread_mutex_lock(&graph_lock);
    bsm_exec *e = exec_slot(p->hGraphExec);
    if (e) {
        if (!e->live) *e = (bsm_exec){.exec = e->exec, .generation = e->generation ? e->generation : 1, .live = 1};
        exec_label(now.label, e->exec, e->generation);
        if (result == 0) {
            if (power_of_two(++e->replays)) now.replays = e->replays;
        } else if (launch_call && e->refused_cbid == cbid && e->refused_result == result) {
            e->refused_unwritten++;
        } else {
            now.refused = 1;
            if (launch_call) {
                earlier = exec_final(e), earlier.replays = 0;
                e->refused_result = result, e->refused_cbid = cbid;
            }
        }
    } else if (result != 0) {
        now.refused = 1; /* past the table: the refusal is still written */
    }
    pthread_mutex_unlock(&graph_lock);
    write_exec_counts(&earlier);
    write_exec_counts(&now);
}

/* cuGraphExecDestroy: the exec's counts are final; its handle may come back as another exec. */
static void destroyed(const bsm_callback_data *cb) {
    const bsm_cuGraphExecDestroy_params *p = cb->functionParams;
    bsm_exec_counts last = {"", 0, 0, 0, NULL};
    if (result_of(cb) != 0 || !p->hGraphExec) return;
    pthread_mutex_lock(&graph_lock);
    bsm_exec *e = exec_slot(p->hGraphExec);
    if (e && e->live) last = exec_final(e), e->live = 0;
    else if (e && !e->generation) e->exec = NULL; /* never seen: its slot is left free again */
    pthread_mutex_unlock(&graph_lock);
    if (last.replays && power_of_two(last.replays)) last.replays = 0; /* written already */
    write_exec_counts(&last);
}

/* cuGraphExecUpdate: the exec now runs the updated graph's nodes, and the replays before it stay with the old
 * ones; an update to nodes of the same kernels, grids, blocks and bytes (a loop that updates its graph before
 * each replay) changes nothing recorded. */
static void updated(const bsm_callback_data *cb) {
    const bsm_cuGraphExecUpdate_params *p = cb->functionParams;
    bsm_exec_counts before = {"", 0, 0, 0, NULL};
    bsm_walk look = {.cb = cb}, walk = {.cb = cb, .exec = p->hGraphExec, .generation = 1, .write = 1};
    if (result_of(cb) != 0 || !p->hGraphExec) return; /* a refused update leaves the exec as it was */
    walk_graph(&look, p->hGraph, 0);
    pthread_mutex_lock(&graph_lock);
    bsm_exec *e = exec_slot(p->hGraphExec);
    if (e && e->live && e->signature == look.signature) walk.write = 0;
    else if (e) {
        if (e->live) before = exec_final(e);
        *e = (bsm_exec){.exec = e->exec, .generation = e->generation + 1, .live = 1, .signature = look.signature};
        walk.generation = e->generation;
    }
    pthread_mutex_unlock(&graph_lock);
    write_exec_counts(&before);
    if (walk.write) walk_graph(&walk, p->hGraph, 0);
}

/* The generation an exec runs now, 0 when unknown. */
static unsigned int exec_generation(const void *exec) {
    unsigned int generation = 0;
    pthread_mutex_lock(&graph_lock);
    bsm_exec *e = exec_slot(exec);
    if (e && e->live) generation = e->generation;
    pthread_mutex_unlock(&graph_lock);
    return generation;
}

/* A kernel node set or added by hand. A node of an exec changed with success is written again with the id it
 * was instantiated with (the new parameters replace the old); a refused change names the kernel, no exec. */
static void node_changed(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    bsm_CUDA_KERNEL_NODE_PARAMS_v2 n;
    const void *exec = NULL, *node = NULL;
    int has_kern = 1, result = result_of(cb);
    memset(&n, 0, sizeof n);
    if (domain == BSM_DOMAIN_RUNTIME) { /* cudaGraphKernelNodeSetParams: a host stub, dim3s */
        const bsm_cudaGraphKernelNodeSetParams_params *p = cb->functionParams;
        const bsm_cudaKernelNodeParams *r = p->pNodeParams;
        if (!r) return;
        n.func = r->func, n.sharedMemBytes = r->sharedMemBytes;
        n.gridDimX = r->gridDim.x, n.gridDimY = r->gridDim.y, n.gridDimZ = r->gridDim.z;
        n.blockDimX = r->blockDim.x, n.blockDimY = r->blockDim.y, n.blockDimZ = r->blockDim.z;
        node_line(cb, domain, &n, 0, result, NULL, 0, NULL);
        return;
    }
    const bsm_CUgraphNodeParams *generic = NULL;
    const void *given = NULL;
    switch (cbid) {
    case BSM_CB_cuGraphKernelNodeSetParams: case BSM_CB_cuGraphKernelNodeSetParams_v2: {
        const bsm_cuGraphKernelNodeSetParams_params *p = cb->functionParams;
        given = p->nodeParams, has_kern = cbid == BSM_CB_cuGraphKernelNodeSetParams_v2;
        break;
    }
    case BSM_CB_cuGraphExecKernelNodeSetParams: case BSM_CB_cuGraphExecKernelNodeSetParams_v2: {
        const bsm_cuGraphExecKernelNodeSetParams_params *p = cb->functionParams;
        given = p->nodeParams, exec = p->hGraphExec, node = p->hNode;
        has_kern = cbid == BSM_CB_cuGraphExecKernelNodeSetParams_v2;
        break;
    }
    case BSM_CB_cuGraphAddNode: generic = ((const bsm_cuGraphAddNode_params *)cb->functionParams)->nodeParams; break;
    case BSM_CB_cuGraphAddNode_v2:
        generic = ((const bsm_cuGraphAddNode_v2_params *)cb->functionParams)->nodeParams;
        break;
    case BSM_CB_cuGraphNodeSetParams:
        generic = ((const bsm_cuGraphNodeSetParams_params *)cb->functionParams)->nodeParams;
        break;
    default: { /* cuGraphExecNodeSetParams */
        const bsm_cuGraphExecNodeSetParams_params *p = cb->functionParams;
        generic = p->nodeParams, exec = p->hGraphExec, node = p->hNode;
    }
    }
    if (generic) {
        if (generic->type != BSM_GRAPH_NODE_TYPE_KERNEL) return;
        given = &generic->u.kernel;
    }
    if (!given) return;
    memcpy(&n, given, has_kern ? sizeof n : sizeof(bsm_CUDA_KERNEL_NODE_PARAMS_v1));
    unsigned int generation = exec && result == 0 ? exec_generation(exec) : 0;
    if (!generation) {
        node_line(cb, domain, &n, has_kern, result, NULL, 0, NULL);
        return;
    }
    char label[48];
    exec_label(label, exec, generation);
    unsigned long id = exec_node_id(exec, generation, node, node_config(&n));
    if (id) node_line(cb, domain, &n, has_kern, result, label, id, node);
}

/* Calls of this section; 1 when `cbid` was one of them. */
static int graph_or_name_call(int domain, uint32_t cbid, const bsm_callback_data *cb) {
    if (domain == BSM_DOMAIN_RUNTIME) {
        if (cbid == BSM_CB_cudaGraphKernelNodeSetParams_v10000) node_changed(domain, cbid, cb);
        else if (cbid == BSM_CB_cudaGetFuncBySymbol_v11000) handle_named(domain, cbid, cb);
        else return 0;
        return 1;
    }
    switch (cbid) {
    case BSM_CB_cuGraphInstantiate: case BSM_CB_cuGraphInstantiate_v2: case BSM_CB_cuGraphInstantiateWithFlags:
    case BSM_CB_cuGraphInstantiateWithParams: case BSM_CB_cuGraphInstantiateWithParams_ptsz:
        instantiated(cbid, cb); return 1;
    case BSM_CB_cuGraphLaunch: case BSM_CB_cuGraphLaunch_ptsz: case BSM_CB_cuGraphUpload:
    case BSM_CB_cuGraphUpload_ptsz:
        replayed(cbid, cb); return 1;
    case BSM_CB_cuGraphExecDestroy: destroyed(cb); return 1;
    case BSM_CB_cuGraphExecUpdate: case BSM_CB_cuGraphExecUpdate_v2: updated(cb); return 1;
    case BSM_CB_cuGraphKernelNodeSetParams: case BSM_CB_cuGraphKernelNodeSetParams_v2:
    case BSM_CB_cuGraphExecKernelNodeSetParams: case BSM_CB_cuGraphExecKernelNodeSetParams_v2:
    case BSM_CB_cuGraphAddNode: case BSM_CB_cuGraphAddNode_v2: case BSM_CB_cuGraphNodeSetParams:
    case BSM_CB_cuGraphExecNodeSetParams:
        node_changed(domain, cbid, cb); return 1;
    case BSM_CB_cuModuleGetFunction: case BSM_CB_cuLibraryGetKernel: case BSM_CB_cuKernelGetFunction:
        handle_named(domain, cbid, cb); return 1;
    default: return 0;
    }
}

static const uint32_t graph_driver_ids[] = {
    BSM_CB_cuGraphInstantiate, BSM_CB_cuGraphInstantiate_v2, BSM_CB_cuGraphInstantiateWithFlags,
    BSM_CB_cuGraphInstantiateWithParams, BSM_CB_cuGraphInstantiateWithParams_ptsz, BSM_CB_cuGraphLaunch,
    BSM_CB_cuGraphLaunch_ptsz, BSM_CB_cuGraphUpload, BSM_CB_cuGraphUpload_ptsz, BSM_CB_cuGraphExecDestroy,
    BSM_CB_cuGraphExecUpdate, BSM_CB_cuGraphExecUpdate_v2, BSM_CB_cuGraphKernelNodeSetParams,
    BSM_CB_cuGraphKernelNodeSetParams_v2, BSM_CB_cuGraphExecKernelNodeSetParams,
    BSM_CB_cuGraphExecKernelNodeSetParams_v2, BSM_CB_cuGraphAddNode, BSM_CB_cuGraphAddNode_v2,
    BSM_CB_cuGraphNodeSetParams, BSM_CB_cuGraphExecNodeSetParams,
};
static const uint32_t name_driver_ids[] = {
    BSM_CB_cuModuleGetFunction, BSM_CB_cuLibraryGetKernel, BSM_CB_cuKernelGetFunction,
};

static void enable_graphs_and_names(void) {
    find_graph_driver();
    names_needed = !api.func_name || !api.kernel_name;
    for (unsigned int i = 0; i < sizeof graph_driver_ids / sizeof *graph_driver_ids; i++)
        api.enable(1, subscriber, BSM_DOMAIN_DRIVER, graph_driver_ids[i]);
    api.enable(1, subscriber, BSM_DOMAIN_RUNTIME, BSM_CB_cudaGraphKernelNodeSetParams_v10000);
    if (!names_needed) return;
    for (unsigned int i = 0; i < sizeof name_driver_ids / sizeof *name_driver_ids; i++)
        api.enable(1, subscriber, BSM_DOMAIN_DRIVER, name_driver_ids[i]);
    api.enable(1, subscriber, BSM_DOMAIN_RUNTIME, BSM_CB_cudaGetFuncBySymbol_v11000);
}

/* At exit: every live exec's final replay count and unwritten refusals. */
static void write_replays(void) {
    for (unsigned int i = 0; i < BSM_EXECS_SIZE; i++) {
        bsm_exec_counts last = {"", 0, 0, 0, NULL};
        pthread_mutex_lock(&graph_lock);
        if (execs[i].exec && execs[i].live) last = exec_final(&execs[i]);
        pthread_mutex_unlock(&graph_lock);
        if (power_of_two(last.replays)) last.replays = 0; /* written already */
        write_exec_counts(&last);
    }
}

/* A forked child has no graphs of its own yet (CUDA does not survive a fork) nor names to repeat. */
static void forget_graphs_after_fork(void) {
    memset(execs, 0, sizeof execs);
    memset(exec_nodes, 0, sizeof exec_nodes);
    pthread_mutex_init(&graph_lock, NULL);
}

static void callback(void *userdata, int domain, uint32_t cbid, const void *data) {
    const bsm_callback_data *cb = data;
    (void)userdata;
#ifdef BSM_CUPTI_FLOOR /* bench/trace_overhead.py's floor: every callback enabled as here, none doing any work */
    (void)cb, (void)domain, (void)cbid;
    return;
#endif
    if (cb->callbackSite != BSM_API_EXIT || !cb->functionParams) return; /* the result is known on exit */
    if (graph_or_name_call(domain, cbid, cb)) return;
    if (domain == BSM_DOMAIN_DRIVER && capture_call(cbid)) {
        capture_changed(cbid, cb);
        return;
    }
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
    self_pid = getpid();
    if (table_entries) memset(table, 0, sizeof table);
    memset(overflow, 0, sizeof overflow);
    table_entries = 0, next_id = 1, overflow_unplaced = 0, open_captures = 0;
    pthread_mutex_init(&table_lock, NULL);
    pthread_mutex_init(&out.lock, NULL);
}

/* At exit, each count that grew past its last power of two (those are written already). */
static void write_counts(void) {
    for (unsigned int i = 0; i < BSM_SLOTS; i++) {
        unsigned long id = __atomic_load_n(&table[i].id, __ATOMIC_ACQUIRE);
        unsigned long count = __atomic_load_n(&table[i].count, __ATOMIC_RELAXED);
        if (id && count > 1 && !power_of_two(count)) count_line(id, count);
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
    BSM_CB_cuStreamBeginCapture, BSM_CB_cuStreamBeginCapture_ptsz, BSM_CB_cuStreamEndCapture,
    BSM_CB_cuStreamEndCapture_ptsz, BSM_CB_cuStreamBeginCapture_v2, BSM_CB_cuStreamBeginCapture_v2_ptsz,
    BSM_CB_cuStreamBeginCaptureToGraph, BSM_CB_cuStreamBeginCaptureToGraph_ptsz,
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
    self_pid = getpid();
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
    enable_graphs_and_names();
    pthread_atfork(NULL, NULL, forget_graphs_after_fork);
    atexit(write_replays);
    return 1;
}
