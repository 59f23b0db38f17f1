#ifndef C_SYSTEM_SHIMS_H
#define C_SYSTEM_SHIMS_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/fanotify.h>
#include <unistd.h>

/// Renames `from` to `to`, failing with EEXIST instead of replacing an existing `to`.
static inline int fp_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
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

// Declared here rather than through <sys/xattr.h>: under _GNU_SOURCE that header pulls in
// <sys/select.h>, whose fd_set then differs from the one Dispatch's module saw, and a clean
// build fails ("__fds_bits ... is not present in definition of fd_set").
extern int lsetxattr(const char *path, const char *name, const void *value, size_t size, int flags);
extern ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size);
extern int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
extern ssize_t fgetxattr(int fd, const char *name, void *value, size_t size);
extern int fremovexattr(int fd, const char *name);

/// Sets the extended attribute `name` of the file at `path` (not following a final symlink);
/// 0, or -1 with errno (ENOTSUP where the file system has none).
static inline int fp_set_xattr(const char *path, const char *name, const void *value, size_t size) {
    return lsetxattr(path, name, value, size, 0);
}

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

/// Gives back the blocks of bytes [offset, offset + length) of `fd` (reads see zeros; the size
/// stays): FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE. 0, or -1 with errno.
static inline int fp_punch_hole(int fd, off_t offset, off_t length) {
    return fallocate(fd, 0x02 /* FALLOC_FL_PUNCH_HOLE */ | 0x01 /* FALLOC_FL_KEEP_SIZE */, offset, length);
}

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
#endif
