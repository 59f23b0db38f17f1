#ifndef C_FUSE_H
#define C_FUSE_H
// libfuse 3's low-level API for ProviderSystem (the only module that imports this one). The
// library is loaded with dlopen on first use (`fp_fuse_load`), so the programs start, and every
// layout but FUSE works, on a machine without libfuse3.so.3; only its headers are needed to build
// (Debian's libfuse3-dev). Swift calls the library through the fp_fuse_* functions below, never
// through the declarations of <fuse_lowlevel.h> (they are not linked).
//
// _FILE_OFFSET_BITS is not defined here (64-bit off_t is the default on 64-bit Linux; defining
// it changes the Glibc module Swift imports).
#define FUSE_USE_VERSION 312

#include <fuse3/fuse_lowlevel.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>

/// `SEEK_DATA` and `SEEK_HOLE` (under _GNU_SOURCE in <unistd.h>, which Swift's Glibc module
/// does not define).
static const int fp_seek_data = 3;
static const int fp_seek_hole = 4;

/// `RENAME_NOREPLACE` and `RENAME_EXCHANGE`, the flags of a FUSE rename.
static const unsigned fp_rename_noreplace = 1;
static const unsigned fp_rename_exchange = 2;

/// The `to_set` bits of a FUSE setattr.
static const int fp_set_mode = FUSE_SET_ATTR_MODE;
static const int fp_set_uid = FUSE_SET_ATTR_UID;
static const int fp_set_gid = FUSE_SET_ATTR_GID;
static const int fp_set_size = FUSE_SET_ATTR_SIZE;
static const int fp_set_atime = FUSE_SET_ATTR_ATIME;
static const int fp_set_mtime = FUSE_SET_ATTR_MTIME;
static const int fp_set_atime_now = FUSE_SET_ATTR_ATIME_NOW;
static const int fp_set_mtime_now = FUSE_SET_ATTR_MTIME_NOW;
static const int fp_set_ctime = FUSE_SET_ATTR_CTIME;

/// Loads libfuse3.so.3 (once; later calls return the first answer): NULL when it is loaded
/// with every function used here, otherwise why not (dlopen's message, or the missing symbol).
/// `FILEPROVIDER_LIBFUSE` names another file to load.
const char *fp_fuse_load(void);

/// The last message libfuse logged (fuse_log: why a mount failed, in its words), or "".
/// Cleared by `fp_fuse_clear_log`.
const char *fp_fuse_last_log(void);
void fp_fuse_clear_log(void);

/// fuse_session_new with `argv` (argv[0] a program name, then "-o" options) and the table's
/// size filled in; NULL on bad options (see fp_fuse_last_log).
struct fuse_session *fp_fuse_session_new(int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata);
int fp_fuse_session_mount(struct fuse_session *se, const char *mountpoint);
void fp_fuse_session_unmount(struct fuse_session *se);
void fp_fuse_session_exit(struct fuse_session *se);
int fp_fuse_session_exited(struct fuse_session *se);
void fp_fuse_session_destroy(struct fuse_session *se);
int fp_fuse_session_fd(struct fuse_session *se);

/// Runs the multi-threaded session loop on the calling thread until the session ends (the file
/// system is unmounted, or fp_fuse_session_exit then fp_fuse_wake_loop): up to `max_threads`
/// workers, `idle_threads` kept waiting. Returns 0, or a negative errno.
int fp_fuse_loop_mt(struct fuse_session *se, unsigned max_threads, unsigned idle_threads);

/// Interrupts the thread `thread` (the one in fp_fuse_loop_mt) with a signal whose handler does
/// nothing, so the loop sees fp_fuse_session_exit and returns. Installs the handler once.
void fp_fuse_wake_loop(pthread_t thread);

/// Sets what the kernel is asked for at INIT: writeback cache, readdirplus (always, not
/// adaptive), `max_bytes` per read, write and readahead request (max_pages).
void fp_fuse_configure(struct fuse_conn_info *conn, int writeback, int readdirplus, unsigned max_bytes);
/// Asks the kernel, at INIT, for FUSE_HANDLE_KILLPRIV_V2 (which libfuse 3.14 cannot ask for):
/// the file system clears set-user-ID and set-group-ID bits and file capabilities itself when a
/// file is written, truncated or given away, and the kernel marks the mount SB_NOSEC, so it no
/// longer asks `security.capability` before every write. Call it after fp_fuse_session_mount and
/// before the loop: the session's messages then go through plain read, writev and splice
/// wrappers (libfuse's custom I/O), the first of which (the INIT reply) gets the flag when
/// fp_fuse_grant_killpriv said so. Returns 0, or a negative errno (nothing changed then).
int fp_fuse_handle_killpriv(struct fuse_session *se);
/// From the INIT callback: grants FUSE_HANDLE_KILLPRIV_V2 in the reply when the session asked
/// for it (fp_fuse_handle_killpriv) and the kernel speaks protocol 7.33 or later. Returns
/// whether it was granted.
int fp_fuse_grant_killpriv(struct fuse_session *se, const struct fuse_conn_info *conn);
/// Whether the kernel granted the writeback cache.
int fp_fuse_writeback_granted(const struct fuse_conn_info *conn);

/// Replies `size` bytes at `offset` of `fd`, spliced by the kernel where it can (an fd buffer:
/// FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK, no copy through this process).
int fp_fuse_reply_fd(fuse_req_t req, int fd, size_t size, off_t offset);

int fp_fuse_reply_err(fuse_req_t req, int err);
void fp_fuse_reply_none(fuse_req_t req);
int fp_fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e);
int fp_fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e, const struct fuse_file_info *fi);
int fp_fuse_reply_attr(fuse_req_t req, const struct stat *attr, double attr_timeout);
int fp_fuse_reply_readlink(fuse_req_t req, const char *link);
int fp_fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi);
int fp_fuse_reply_write(fuse_req_t req, size_t count);
int fp_fuse_reply_buf(fuse_req_t req, const char *buf, size_t size);
int fp_fuse_reply_statfs(fuse_req_t req, const struct statvfs *stbuf);
int fp_fuse_reply_lseek(fuse_req_t req, off_t off);
/// The length of an extended attribute's value or of the list of names (a getxattr or
/// listxattr that asked for the length only).
int fp_fuse_reply_xattr(fuse_req_t req, size_t count);
size_t fp_fuse_add_direntry(fuse_req_t req, char *buf, size_t bufsize, const char *name, const struct stat *stbuf, off_t off);
size_t fp_fuse_add_direntry_plus(
    fuse_req_t req, char *buf, size_t bufsize, const char *name, const struct fuse_entry_param *e, off_t off);
void *fp_fuse_req_userdata(fuse_req_t req);
/// The requester of `req`: its pid, uid, gid and umask.
void fp_fuse_req_context(fuse_req_t req, pid_t *pid, uid_t *uid, gid_t *gid, mode_t *umask);

/// fuse_lowlevel_notify_inval_inode / _entry: 0, or a negative errno (-ENOENT when the kernel
/// does not know the inode or name, which is fine).
int fp_fuse_notify_inval_inode(struct fuse_session *se, fuse_ino_t ino, off_t off, off_t len);
int fp_fuse_notify_inval_entry(struct fuse_session *se, fuse_ino_t parent, const char *name, size_t namelen);

#endif
