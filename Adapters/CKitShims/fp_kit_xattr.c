#include "fp_kit_xattr.h"
#include <sys/xattr.h>

ssize_t fp_kit_getxattr(const char *path, const char *name, void *value, size_t size) {
    return getxattr(path, name, value, size);
}

ssize_t fp_kit_fgetxattr(int fd, const char *name, void *value, size_t size) {
    return fgetxattr(fd, name, value, size);
}

int fp_kit_setxattr(const char *path, const char *name, const void *value, size_t size) {
    return setxattr(path, name, value, size, 0);
}

int fp_kit_fsetxattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}

int fp_kit_removexattr(const char *path, const char *name) { return removexattr(path, name); }

int fp_kit_fremovexattr(int fd, const char *name) { return fremovexattr(fd, name); }
