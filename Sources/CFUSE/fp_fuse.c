#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // splice
#endif
#include "CFUSE.h"

#include "fp_library.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

// Every libfuse function used, as a pointer filled by dlsym (the types come from the headers).
#define FP_FUSE_FUNCTIONS(X) \
    X(fuse_session_new) \
    X(fuse_session_mount) \
    X(fuse_session_unmount) \
    X(fuse_session_exit) \
    X(fuse_session_exited) \
    X(fuse_session_destroy) \
    X(fuse_session_fd) \
    X(fuse_session_custom_io) \
    X(fuse_opt_free_args) \
    X(fuse_loop_cfg_create) \
    X(fuse_loop_cfg_destroy) \
    X(fuse_loop_cfg_set_max_threads) \
    X(fuse_loop_cfg_set_idle_threads) \
    X(fuse_set_log_func) \
    X(fuse_reply_err) \
    X(fuse_reply_none) \
    X(fuse_reply_entry) \
    X(fuse_reply_create) \
    X(fuse_reply_attr) \
    X(fuse_reply_readlink) \
    X(fuse_reply_open) \
    X(fuse_reply_write) \
    X(fuse_reply_buf) \
    X(fuse_reply_data) \
    X(fuse_reply_statfs) \
    X(fuse_reply_lseek) \
    X(fuse_reply_xattr) \
    X(fuse_add_direntry) \
    X(fuse_add_direntry_plus) \
    X(fuse_req_userdata) \
    X(fuse_req_ctx) \
    X(fuse_lowlevel_notify_inval_inode) \
    X(fuse_lowlevel_notify_inval_entry)

#define FP_FIELD(name) __typeof__(name) *name;
static struct {
    FP_FUSE_FUNCTIONS(FP_FIELD)
    // fuse_session_loop_mt as 3.12 declares it (the library keeps older versions under the
    // same name: the 3.12 one is exported as fuse_session_loop_mt_312 too).
    int (*loop_mt)(struct fuse_session *, struct fuse_loop_config *);
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fp_library_load loaded;

static pthread_mutex_t logLock = PTHREAD_MUTEX_INITIALIZER;
static char lastLog[512];

static void logMessage(enum fuse_log_level level, const char *format, va_list arguments) {
    if (level > FUSE_LOG_NOTICE) return;
    char line[sizeof lastLog];
    vsnprintf(line, sizeof line, format, arguments);
    size_t length = strlen(line);
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == ' ')) line[--length] = 0;
    pthread_mutex_lock(&logLock);
    memcpy(lastLog, line, length + 1);
    pthread_mutex_unlock(&logLock);
}

static void *symbol(void *library, const char *name) {
    return fp_library_symbol(&loaded, library, "libfuse3.so.3", name, " (libfuse 3.12 or later is needed)");
}

static void load(void) {
    void *library = fp_library_open(&loaded, "FILEPROVIDER_LIBFUSE", "libfuse3.so.3");
    if (library == NULL) return;
#define FP_LOAD(name) lib.name = (__typeof__(name) *)symbol(library, #name);
    FP_FUSE_FUNCTIONS(FP_LOAD)
    lib.loop_mt = (int (*)(struct fuse_session *, struct fuse_loop_config *))symbol(library, "fuse_session_loop_mt_312");
    if (loaded.failure == NULL) lib.fuse_set_log_func(logMessage);
}

const char *fp_fuse_load(void) {
    pthread_once(&once, load);
    return loaded.failure;
}

const char *fp_fuse_last_log(void) {
    static __thread char copy[sizeof lastLog];
    pthread_mutex_lock(&logLock);
    memcpy(copy, lastLog, sizeof copy);
    pthread_mutex_unlock(&logLock);
    return copy;
}

void fp_fuse_clear_log(void) {
    pthread_mutex_lock(&logLock);
    lastLog[0] = 0;
    pthread_mutex_unlock(&logLock);
}

struct fuse_session *fp_fuse_session_new(int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata) {
    if (fp_fuse_load() != NULL) return NULL;
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_session *se = lib.fuse_session_new(&args, ops, sizeof(*ops), userdata);
    lib.fuse_opt_free_args(&args);
    return se;
}

int fp_fuse_session_mount(struct fuse_session *se, const char *mountpoint) { return lib.fuse_session_mount(se, mountpoint); }
void fp_fuse_session_unmount(struct fuse_session *se) { lib.fuse_session_unmount(se); }
void fp_fuse_session_exit(struct fuse_session *se) { lib.fuse_session_exit(se); }
int fp_fuse_session_exited(struct fuse_session *se) { return lib.fuse_session_exited(se); }
void fp_fuse_session_destroy(struct fuse_session *se) { lib.fuse_session_destroy(se); }
int fp_fuse_session_fd(struct fuse_session *se) { return lib.fuse_session_fd(se); }

static void installWake(void);
static pthread_once_t wakeOnce = PTHREAD_ONCE_INIT;
static int wakeSignal;

int fp_fuse_loop_mt(struct fuse_session *se, unsigned max_threads, unsigned idle_threads) {
    // The wake-up signal reaches this thread even where the thread that started it blocks
    // signals (the workers libfuse starts inherit the mask).
    pthread_once(&wakeOnce, installWake);
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, wakeSignal);
    pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
    struct fuse_loop_config *config = lib.fuse_loop_cfg_create();
    if (config == NULL) return -ENOMEM;
    lib.fuse_loop_cfg_set_max_threads(config, max_threads);
    lib.fuse_loop_cfg_set_idle_threads(config, idle_threads);
    int result = lib.loop_mt(se, config);
    lib.fuse_loop_cfg_destroy(config);
    return result;
}

// The loop's main thread waits in sem_wait, which a handled signal interrupts (EINTR, never
// restarted); it then sees the session's exit flag and stops its workers.
static void wakeHandler(int signal) { (void)signal; }

static void installWake(void) {
    wakeSignal = SIGRTMIN + 4;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = wakeHandler;
    sigemptyset(&action.sa_mask);
    sigaction(wakeSignal, &action, NULL);
}

void fp_fuse_wake_loop(pthread_t thread) {
    pthread_once(&wakeOnce, installWake);
    pthread_kill(thread, wakeSignal);
}

// FUSE_HANDLE_KILLPRIV_V2 by hand. libfuse 3.14 builds the INIT reply from the capabilities it
// knows, and FUSE_HANDLE_KILLPRIV_V2 (protocol 7.33, <linux/fuse.h>) is not one of them; its
// custom I/O (fuse_session_custom_io, 3.14) lets the reply's flags be changed on the way out.
// The INIT reply is the first message a session writes to /dev/fuse: the kernel sends no
// request before INIT is answered and a notification before that is refused. Sessions that ask
// for it are listed by descriptor until their first write; the others use no custom I/O.
static const uint32_t killprivV2Flag = 1u << 28;  // FUSE_HANDLE_KILLPRIV_V2
static const uint32_t killprivV2Minor = 33;
static const size_t initFlagsOffset = 12;  // struct fuse_init_out: major, minor, max_readahead, flags
enum { pendingCapacity = 64 };
static pthread_mutex_t pendingLock = PTHREAD_MUTEX_INITIALIZER;
static int pendingDescriptors[pendingCapacity];
static int pendingGrant[pendingCapacity];
static atomic_int pendingCount;

/// Takes `fd` off the list; returns whether it was on it, and its grant.
static int takePending(int fd, int *grant) {
    if (atomic_load_explicit(&pendingCount, memory_order_acquire) == 0) return 0;
    int found = 0;
    pthread_mutex_lock(&pendingLock);
    int count = atomic_load_explicit(&pendingCount, memory_order_relaxed);
    for (int i = 0; i < count; i++) {
        if (pendingDescriptors[i] != fd) continue;
        *grant = pendingGrant[i];
        pendingDescriptors[i] = pendingDescriptors[count - 1];
        pendingGrant[i] = pendingGrant[count - 1];
        atomic_store_explicit(&pendingCount, count - 1, memory_order_release);
        found = 1;
        break;
    }
    pthread_mutex_unlock(&pendingLock);
    return found;
}

static ssize_t ioWritev(int fd, struct iovec *iov, int count, void *userdata) {
    (void)userdata;
    int grant = 0;
    int32_t error = -1;
    // struct fuse_out_header: uint32_t len, int32_t error, uint64_t unique.
    if (count >= 1 && iov[0].iov_len == 16) memcpy(&error, (char *)iov[0].iov_base + 4, sizeof error);
    if (takePending(fd, &grant) && grant && count >= 2 && error == 0 && iov[1].iov_len >= initFlagsOffset + sizeof(uint32_t)) {
        uint32_t flags;
        memcpy(&flags, (char *)iov[1].iov_base + initFlagsOffset, sizeof flags);
        flags |= killprivV2Flag;
        memcpy((char *)iov[1].iov_base + initFlagsOffset, &flags, sizeof flags);
    }
    return writev(fd, iov, count);
}

static ssize_t ioRead(int fd, void *buffer, size_t length, void *userdata) {
    (void)userdata;
    return read(fd, buffer, length);
}

static ssize_t ioSplice(int in, off_t *inOffset, int out, off_t *outOffset, size_t length, unsigned flags, void *userdata) {
    (void)userdata;
    return splice(in, inOffset, out, outOffset, length, flags);
}

int fp_fuse_handle_killpriv(struct fuse_session *se) {
    int fd = lib.fuse_session_fd(se);
    pthread_mutex_lock(&pendingLock);
    int count = atomic_load_explicit(&pendingCount, memory_order_relaxed);
    if (count == pendingCapacity) {
        pthread_mutex_unlock(&pendingLock);
        return -EBUSY;
    }
    pendingDescriptors[count] = fd;
    pendingGrant[count] = 0;
    atomic_store_explicit(&pendingCount, count + 1, memory_order_release);
    pthread_mutex_unlock(&pendingLock);
    struct fuse_custom_io io = {.writev = ioWritev, .read = ioRead, .splice_receive = ioSplice, .splice_send = ioSplice};
    int result = lib.fuse_session_custom_io(se, &io, fd);
    if (result != 0) {
        int grant;
        takePending(fd, &grant);
    }
    return result;
}

int fp_fuse_grant_killpriv(struct fuse_session *se, const struct fuse_conn_info *conn) {
    if (conn->proto_major != 7 || conn->proto_minor < killprivV2Minor) return 0;
    int fd = lib.fuse_session_fd(se);
    int granted = 0;
    pthread_mutex_lock(&pendingLock);
    int count = atomic_load_explicit(&pendingCount, memory_order_relaxed);
    for (int i = 0; i < count; i++) {
        if (pendingDescriptors[i] == fd) {
            pendingGrant[i] = 1;
            granted = 1;
        }
    }
    pthread_mutex_unlock(&pendingLock);
    return granted;
}

void fp_fuse_configure(struct fuse_conn_info *conn, int writeback, int readdirplus, unsigned max_bytes) {
    if (writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    if (!writeback) conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    if (readdirplus && (conn->capable & FUSE_CAP_READDIRPLUS)) {
        conn->want |= FUSE_CAP_READDIRPLUS;
        conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    } else {
        conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
    }
    if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
    conn->max_write = max_bytes;
    conn->max_readahead = max_bytes;
}

int fp_fuse_writeback_granted(const struct fuse_conn_info *conn) { return (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0; }

int fp_fuse_reply_fd(fuse_req_t req, int fd, size_t size, off_t offset) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buf.buf[0].fd = fd;
    buf.buf[0].pos = offset;
    return lib.fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

int fp_fuse_reply_err(fuse_req_t req, int err) { return lib.fuse_reply_err(req, err); }
void fp_fuse_reply_none(fuse_req_t req) { lib.fuse_reply_none(req); }
int fp_fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e) { return lib.fuse_reply_entry(req, e); }
int fp_fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e, const struct fuse_file_info *fi) {
    return lib.fuse_reply_create(req, e, fi);
}
int fp_fuse_reply_attr(fuse_req_t req, const struct stat *attr, double attr_timeout) {
    return lib.fuse_reply_attr(req, attr, attr_timeout);
}
int fp_fuse_reply_readlink(fuse_req_t req, const char *link) { return lib.fuse_reply_readlink(req, link); }
int fp_fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi) { return lib.fuse_reply_open(req, fi); }
int fp_fuse_reply_write(fuse_req_t req, size_t count) { return lib.fuse_reply_write(req, count); }
int fp_fuse_reply_buf(fuse_req_t req, const char *buf, size_t size) { return lib.fuse_reply_buf(req, buf, size); }
int fp_fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf) { return lib.fuse_reply_statfs(req, stbuf); }
int fp_fuse_reply_lseek(fuse_req_t req, off_t off) { return lib.fuse_reply_lseek(req, off); }
int fp_fuse_reply_xattr(fuse_req_t req, size_t count) { return lib.fuse_reply_xattr(req, count); }

size_t fp_fuse_add_direntry(fuse_req_t req, char *buf, size_t bufsize, const char *name, const struct stat *stbuf, off_t off) {
    return lib.fuse_add_direntry(req, buf, bufsize, name, stbuf, off);
}

size_t fp_fuse_add_direntry_plus(
    fuse_req_t req, char *buf, size_t bufsize, const char *name, const struct fuse_entry_param *e, off_t off) {
    return lib.fuse_add_direntry_plus(req, buf, bufsize, name, e, off);
}

void *fp_fuse_req_userdata(fuse_req_t req) { return lib.fuse_req_userdata(req); }

void fp_fuse_req_context(fuse_req_t req, pid_t *pid, uid_t *uid, gid_t *gid, mode_t *umask) {
    const struct fuse_ctx *context = lib.fuse_req_ctx(req);
    *pid = context->pid;
    *uid = context->uid;
    *gid = context->gid;
    *umask = context->umask;
}

int fp_fuse_notify_inval_inode(struct fuse_session *se, fuse_ino_t ino, off_t off, off_t len) {
    return lib.fuse_lowlevel_notify_inval_inode(se, ino, off, len);
}

int fp_fuse_notify_inval_entry(struct fuse_session *se, fuse_ino_t parent, const char *name, size_t namelen) {
    return lib.fuse_lowlevel_notify_inval_entry(se, parent, name, namelen);
}
