#ifndef C_SYSTEM_SHIMS_H
#define C_SYSTEM_SHIMS_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/fanotify.h>
#include <unistd.h>

/// Renames `from` to `to`, failing with EEXIST instead of replacing an existing `to`.
static inline int fp_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

/// Renames `name` in the folder `folder` (a descriptor) to the path `to`, failing with EEXIST
/// instead of replacing an existing `to`.
static inline int fp_rename_noreplace_at(int folder, const char *name, const char *to) {
    return renameat2(folder, name, AT_FDCWD, to, RENAME_NOREPLACE);
}

/// Renames `name` in the folder `folder` to `target` in the folder `into` (descriptors both),
/// failing with EEXIST instead of replacing an existing `target`.
static inline int fp_rename_noreplace_between(int folder, const char *name, int into, const char *target) {
    return renameat2(folder, name, into, target, RENAME_NOREPLACE);
}

/// A descriptor of the folder `path` for `*at` calls only (O_PATH: nothing is read through
/// it), or -1 with errno.
static inline int fp_open_folder_path(const char *path) {
    return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/// An unnamed regular file in `folder` (O_TMPFILE), open for writing, or -1 with errno
/// (EOPNOTSUPP, EISDIR or EINVAL where the file system has no unnamed files). Making it does
/// not take the folder's lock, so several threads can make files in one folder at once.
static inline int fp_open_unnamed(const char *folder, mode_t mode) {
    return open(folder, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
}

/// Gives the unnamed file `fd` (from fp_open_unnamed) the name `target`; fails with EEXIST
/// when the name is taken, never replacing anything. Goes through /proc/self/fd, so it needs
/// no privilege; fails with ENOENT without /proc.
static inline int fp_link_unnamed(int fd, const char *target) {
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, path, AT_FDCWD, target, AT_SYMLINK_FOLLOW);
}

/// Lets glibc keep up to `bytes` of freed memory at the top of each arena before giving it
/// back to the kernel (M_TRIM_THRESHOLD); returns 1 on success.
static inline int fp_set_trim_threshold(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }

/// The width in columns of the terminal `fd` is open on (TIOCGWINSZ), or 0 when `fd` is not a
/// terminal or the terminal does not say (ioctl is variadic, which Swift cannot call).
int fp_terminal_columns(int fd);

// Declared here rather than through <sys/xattr.h>: under _GNU_SOURCE that header pulls in
// <sys/select.h>, whose fd_set then differs from the one Dispatch's module saw, and a clean
// build fails ("__fds_bits ... is not present in definition of fd_set").
extern int lsetxattr(const char *path, const char *name, const void *value, size_t size, int flags);
extern ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size);
extern int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
extern ssize_t fgetxattr(int fd, const char *name, void *value, size_t size);
extern int fremovexattr(int fd, const char *name);
extern ssize_t llistxattr(const char *path, char *list, size_t size);
extern int lremovexattr(const char *path, const char *name);

/// Sets the extended attribute `name` of the file at `path` (not following a final symlink);
/// 0, or -1 with errno (ENOTSUP where the file system has none).
static inline int fp_set_xattr(const char *path, const char *name, const void *value, size_t size) {
    return lsetxattr(path, name, value, size, 0);
}

/// Sets the extended attribute `name` of the file `file` in the folder `folder` (a descriptor,
/// O_PATH will do), without following a final symlink: setxattrat (Linux 6.13), so the file's
/// path is not walked again from the root; where the kernel has no setxattrat, lsetxattr of
/// `path` (the same file by its whole path). 0, or -1 with errno.
int fp_set_xattr_at(int folder, const char *file, const char *path, const char *name, const void *value, size_t size);

/// Sets the extended attribute `name` of the open file `fd`; 0, or -1 with errno.
static inline int fp_fset_xattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}

/// Reads the extended attribute `name` of the open file `fd` into `buffer`; its length, or -1
/// with errno.
static inline long fp_fget_xattr(int fd, const char *name, void *buffer, size_t capacity) {
    return fgetxattr(fd, name, buffer, capacity);
}

/// Removes the extended attribute `name` of the open file `fd`; 0, or -1 with errno (ENODATA
/// when it has none).
static inline int fp_fremove_xattr(int fd, const char *name) { return fremovexattr(fd, name); }

/// Reads the extended attribute `name` of the file at `path` (not following a final symlink)
/// into `buffer`; its length, or -1 with errno (ENODATA when the file has none, ERANGE when it
/// is longer than `capacity`).
static inline long fp_get_xattr(const char *path, const char *name, void *buffer, size_t capacity) {
    return lgetxattr(path, name, buffer, capacity);
}

/// Sets the extended attribute `name` of the file at `path` (not following a final symlink)
/// with setxattr's `flags` (XATTR_CREATE 1, XATTR_REPLACE 2); 0, or -1 with errno.
static inline int fp_set_xattr_flags(const char *path, const char *name, const void *value, size_t size, int flags) {
    return lsetxattr(path, name, value, size, flags);
}

/// Lists the names of the extended attributes of the file at `path` (not following a final
/// symlink) into `buffer`, each ending in NUL; their length, or -1 with errno (ERANGE when
/// longer than `capacity`; 0 `capacity` asks for the length).
static inline long fp_list_xattr(const char *path, void *buffer, size_t capacity) {
    return llistxattr(path, (char *)buffer, capacity);
}

/// Removes the extended attribute `name` of the file at `path` (not following a final
/// symlink); 0, or -1 with errno (ENODATA when it has none).
static inline int fp_remove_xattr(const char *path, const char *name) { return lremovexattr(path, name); }

/// Gives back the blocks of bytes [offset, offset + length) of `fd` (reads see zeros; the size
/// stays): FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE. 0, or -1 with errno.
static inline int fp_punch_hole(int fd, off_t offset, off_t length) {
    return fallocate(fd, 0x02 /* FALLOC_FL_PUNCH_HOLE */ | 0x01 /* FALLOC_FL_KEEP_SIZE */, offset, length);
}

/// Takes a write lease on `fd` (F_SETLEASE, F_WRLCK): 0, or -1 with errno. The kernel grants it
/// only while no other open file of the inode exists (another process's or this one's, and
/// mappings of it, even after their descriptor was closed): EAGAIN otherwise. While it is held,
/// another open of the file waits until it is released (at most /proc/sys/fs/lease-break-time
/// seconds). EINVAL when leases are disabled (fs.leases-enable = 0) or the file system has
/// none; EACCES without CAP_LEASE on a file of another owner. The notice of a lease break is
/// sent as SIGURG, which is ignored unless a handler is installed (the default SIGIO would end
/// the process).
static inline int fp_take_write_lease(int fd) {
    if (fcntl(fd, F_SETSIG, SIGURG) != 0) return -1;
    return fcntl(fd, F_SETLEASE, F_WRLCK);
}

/// Takes a read lease on `fd`, which must be open read-only (F_SETLEASE, F_RDLCK): 0, or -1 with
/// errno. The kernel grants it only while no open file of the inode is open for writing (EAGAIN
/// otherwise); while it is held, an open of the file for writing (or a truncate) waits until it
/// is released (at most /proc/sys/fs/lease-break-time seconds). The other errors and the notice
/// of a break are as for fp_take_write_lease.
static inline int fp_take_read_lease(int fd) {
    if (fcntl(fd, F_SETSIG, SIGURG) != 0) return -1;
    return fcntl(fd, F_SETLEASE, F_RDLCK);
}

/// Releases a lease taken with fp_take_write_lease or fp_take_read_lease: 0, or -1 with errno.
static inline int fp_release_lease(int fd) { return fcntl(fd, F_SETLEASE, F_UNLCK); }

/// UTIME_OMIT for utimensat.
static inline long fp_utime_omit(void) { return UTIME_OMIT; }

/// A fanotify descriptor for permission events (`FAN_CLASS_CONTENT`), or -1 with errno.
static inline int fp_fanotify_open(void) {
    return fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY | O_CLOEXEC | O_LARGEFILE);
}

/// Asks for a permission event whenever the folder at `path` is opened (`opendir`), or stops.
static inline int fp_fanotify_mark_folder(int fd, const char *path, int add) {
    return fanotify_mark(fd, (add ? FAN_MARK_ADD : FAN_MARK_REMOVE) | FAN_MARK_ONLYDIR, FAN_OPEN_PERM | FAN_ONDIR, AT_FDCWD, path);
}

/// A fanotify group of notifications only (nothing waits on it).
static inline int fp_fanotify_open_notifications(void) {
    return fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY | O_CLOEXEC | O_LARGEFILE);
}

/// Asks for a notification whenever a file or folder of the mount at `path` is opened.
static inline int fp_fanotify_mark_mount_opens(int fd, const char *path) {
    return fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_OPEN | FAN_ONDIR, AT_FDCWD, path);
}

/// One event read from a fanotify descriptor.
typedef struct {
    int fd;
    int pid;
} fp_fanotify_event;

/// Reads up to `capacity` events into `events`; returns how many, 0 when none are waiting, or
/// -1 with errno. Events without a file descriptor (queue overflow) are skipped.
static inline int fp_fanotify_read(int fd, fp_fanotify_event *events, int capacity) {
    char buffer[4096] __attribute__((aligned(8)));
    ssize_t length = read(fd, buffer, sizeof buffer);
    if (length < 0) return -1;
    int count = 0;
    struct fanotify_event_metadata *event = (struct fanotify_event_metadata *)buffer;
    while (FAN_EVENT_OK(event, length) && count < capacity) {
        if (event->fd >= 0) {
            events[count].fd = event->fd;
            events[count].pid = event->pid;
            count++;
        }
        event = FAN_EVENT_NEXT(event, length);
    }
    return count;
}

/// Lets (or denies) the access an event is about.
static inline int fp_fanotify_respond(int fd, int eventFD, int allow) {
    struct fanotify_response response = { .fd = eventFD, .response = allow ? FAN_ALLOW : FAN_DENY };
    return write(fd, &response, sizeof response) == sizeof response ? 0 : -1;
}

#include <sys/vfs.h>

/// The type of the file system holding `path` (`statfs` f_type: 0xEF53 for ext4, 0x01021994
/// for tmpfs, ...), or -1 with errno.
static inline long long fp_file_system_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long long)(unsigned int)info.f_type;
}

// MARK: fanotify pre-content events (on-access files), in precontent.c
//
// Linux 6.14 added FAN_PRE_ACCESS with byte-range information and FAN_DENY_ERRNO; Debian 12's
// headers predate them. The values are the kernel's uapi (include/uapi/linux/fanotify.h).
#ifndef FAN_PRE_ACCESS
#define FAN_PRE_ACCESS 0x00100000
#endif
#ifndef FAN_EVENT_INFO_TYPE_RANGE
#define FAN_EVENT_INFO_TYPE_RANGE 6
#endif
#ifndef FAN_MARK_EVICTABLE
#define FAN_MARK_EVICTABLE 0x00000200
#endif
#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE 0x00000400
#endif
#ifndef FAN_MARK_IGNORE_SURV
#define FAN_MARK_IGNORE_SURV (FAN_MARK_IGNORE | FAN_MARK_IGNORED_SURV_MODIFY)
#endif
#ifndef FAN_ERRNO_BITS
#define FAN_ERRNO_BITS 8
#define FAN_ERRNO_SHIFT (32 - FAN_ERRNO_BITS)
#define FAN_ERRNO_MASK ((1 << FAN_ERRNO_BITS) - 1)
#define FAN_DENY_ERRNO(err) (FAN_DENY | ((((__u32)(err)) & FAN_ERRNO_MASK) << FAN_ERRNO_SHIFT))
#endif

/// One event read from a pre-content group.
typedef struct {
    /// The event's file descriptor (opened by the kernel for the reader, O_RDWR, without
    /// events of its own); -1 for an event without one (queue overflow).
    int fd;
    /// The process whose access raised the event.
    int pid;
    /// The event's mask (FAN_PRE_ACCESS, FAN_OPEN_PERM, ...).
    unsigned long long mask;
    /// The byte range the access needs, when `hasRange` is 1.
    unsigned long long offset;
    unsigned long long count;
    int hasRange;
} fp_precontent_event;

/// A pre-content fanotify group (FAN_CLASS_PRE_CONTENT, non-blocking, unlimited queue and
/// marks; event descriptors close-on-exec, O_RDWR with `writable` to fill files through them,
/// else O_RDONLY: then an event's descriptor does not count as a writer of the file, and a read
/// lease can be taken while an access waits), or -1 with errno (EPERM without CAP_SYS_ADMIN).
int fp_precontent_init(int writable);

/// Adds (`add` 1) or removes (0) FAN_PRE_ACCESS on the mount of `path` (resolved from
/// `dirfd`, which may be an O_PATH descriptor of a detached mount with path "."); 0 or -1 with
/// errno (EINVAL: a kernel before 6.14 or a file system that refuses pre-content marks).
int fp_precontent_mark_mount(int group, int dirfd, const char *path, int add);

/// Adds (`add` 1) or removes (0) FAN_PRE_ACCESS on the inode of `path` (every access to that
/// file through any path, mount or mount namespace raises an event); 0 or -1 with errno.
int fp_precontent_mark_inode(int group, int dirfd, const char *path, int add);

/// Adds (`add` 1) or removes (0) an ignore mark for FAN_PRE_ACCESS on the inode of `path`
/// (from `dirfd`; path NULL marks the inode `dirfd` is open on); `evictable` lets the kernel
/// drop the mark with the inode from its cache. 0 or -1 with errno (ENOENT when removing a
/// mark that is not there).
int fp_precontent_ignore(int group, int dirfd, const char *path, int add, int evictable);

/// Reads what is queued into `events` (at most `capacity`; the rest stays queued); the count,
/// 0 when nothing is waiting, or -1 with errno.
int fp_precontent_read(int group, fp_precontent_event *events, int capacity);

/// Answers the event whose descriptor is `eventFD`: FAN_ALLOW when `denyErrno` is 0, else
/// FAN_DENY_ERRNO(denyErrno). 0, or -1 with errno (ENOENT: no pending event has that
/// descriptor; EINVAL: an errno the kernel does not accept).
int fp_precontent_respond(int group, int eventFD, int denyErrno);

/// Whether `fd` is a fanotify group (its /proc/self/fd link reads "anon_inode:[fanotify]").
int fp_is_fanotify(int fd);

// MARK: mounts (precontent.c)

/// A detached copy of the mount tree at `path` (open_tree OPEN_TREE_CLONE), close-on-exec;
/// or -1 with errno (EPERM without CAP_SYS_ADMIN).
int fp_open_tree_clone(const char *path);

/// Makes the detached mount `treeFD` unbindable (mount_setattr): a recursive bind of a folder
/// above it (a container's volume, a sandbox's view of the home folder) leaves it out instead
/// of copying it without its fanotify mark. 0 or -1 with errno.
int fp_mount_set_unbindable(int treeFD);

/// Binds the folder `path` onto itself and makes that mount private, so mounts attached on
/// top of it propagate to no other mount namespace; 0 or -1 with errno (nothing is left
/// mounted on failure).
int fp_mount_private_anchor(const char *path);

/// Attaches the detached mount `treeFD` at `path` (move_mount); 0 or -1 with errno.
int fp_move_mount(int treeFD, const char *path);

/// Detaches the topmost mount at `path` lazily (umount2 MNT_DETACH | UMOUNT_NOFOLLOW); 0 or -1
/// with errno (EINVAL when `path` is not a mount point).
int fp_detach_mount(const char *path);

/// The id of the mount `path` is on and whether `path` is the root of that mount; 0 or -1 with
/// errno. With `unique` 0 the id is the one /proc/self/mountinfo and fanotify's fdinfo show
/// (STATX_MNT_ID; the kernel gives a freed mount's id to the next new mount), with 1 the
/// 64-bit id no other mount ever gets (STATX_MNT_ID_UNIQUE, Linux 6.8).
int fp_mount_identity(const char *path, int unique, unsigned long long *mountID, int *isMountRoot);

/// Whether a live fanotify group of any process marks the mount with id `mountID` (the id
/// /proc/self/mountinfo shows: fp_mount_identity with `unique` 0) with events: 1 when one
/// does, 0 when none does, -1 with errno EACCES when some process's descriptors could not be
/// read (not root) and none of the others marks it. Looks at every process's descriptors.
int fp_mount_is_guarded(unsigned long long mountID);

// MARK: the guardian (precontent.c)

/// Starts `executable` with `argv` (NULL-terminated), `groupFD` as its descriptor 3,
/// `channelFD` as 4, /dev/null as 0-2 and nothing else open, in a session of its own; the
/// child's id in `pid`. 0, or an errno value.
int fp_spawn_guardian(const char *executable, char *const argv[], int groupFD, int channelFD, int *pid);

/// A connected pair of close-on-exec SOCK_SEQPACKET Unix sockets in `ends`; 0 or -1 with errno.
int fp_channel_pair(int ends[2]);

/// Connects a close-on-exec SOCK_SEQPACKET socket to the Unix socket at `path`; the socket or
/// -1 with errno (ECONNREFUSED when nothing listens, ENAMETOOLONG for a path over 107 bytes).
int fp_channel_connect(const char *path);

/// Binds and listens on a close-on-exec SOCK_SEQPACKET Unix socket at `path` (mode 0600),
/// replacing a stale file; the socket or -1 with errno.
int fp_channel_listen(const char *path);

/// Sends one message, with descriptor `fd` attached (SCM_RIGHTS) when it is not -1; 0 or -1
/// with errno.
int fp_channel_send(int socket, const void *bytes, unsigned long length, int fd);

/// Receives one message into `buffer` (at most `capacity` bytes); a descriptor attached to it
/// lands in `*fd` (close-on-exec), else `*fd` is -1. The message's length, 0 at end of file,
/// or -1 with errno. Waits at most `timeoutMilliseconds` (-1: forever; ETIMEDOUT after).
long fp_channel_receive(int socket, void *buffer, unsigned long capacity, int *fd, int timeoutMilliseconds);

/// The user id of the process at the other end of a connected Unix socket, or -1 with errno.
long fp_channel_peer_uid(int socket);
#endif
