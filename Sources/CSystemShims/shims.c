#include "CSystemShims.h"

#include <errno.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

int fp_terminal_columns(int fd) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return 0;
    return size.ws_col;
}

/// setxattrat's number: the same on every architecture (new system calls share one table).
#ifndef SYS_setxattrat
#define SYS_setxattrat 463
#endif

/// struct xattr_args of <linux/xattr.h> (its first version, 16 bytes).
struct fp_xattr_args {
    uint64_t value;
    uint32_t size;
    uint32_t flags;
};

/// Set once the kernel answered ENOSYS: then every later call goes by path at once.
static int fp_no_setxattrat;

int fp_set_xattr_at(int folder, const char *file, const char *path, const char *name, const void *value, size_t size) {
    if (!__atomic_load_n(&fp_no_setxattrat, __ATOMIC_RELAXED)) {
        struct fp_xattr_args args = {(uint64_t)(uintptr_t)value, (uint32_t)size, 0};
        long done = syscall(SYS_setxattrat, folder, file, AT_SYMLINK_NOFOLLOW, name, &args, sizeof args);
        if (done == 0 || errno != ENOSYS) return (int)done;
        __atomic_store_n(&fp_no_setxattrat, 1, __ATOMIC_RELAXED);
    }
    return lsetxattr(path, name, value, size, 0);
}
