#ifndef FP_KIT_XATTR_H
#define FP_KIT_XATTR_H
#include <stddef.h>
#include <sys/types.h>

// The extended-attribute calls of the adapter kit (Adapters/Kit, PrefixRecord.swift), which
// Swift's Glibc module does not offer. <sys/xattr.h> is included by the .c file only: under
// _GNU_SOURCE it pulls in <sys/select.h>, whose fd_set would then differ from the one
// Dispatch's module saw (see Sources/CSystemShims).

/// getxattr(2): the value's length, or -1 with errno.
ssize_t fp_kit_getxattr(const char *path, const char *name, void *value, size_t size);
/// fgetxattr(2): the value's length, or -1 with errno (ENODATA when there is none).
ssize_t fp_kit_fgetxattr(int fd, const char *name, void *value, size_t size);
/// setxattr(2): 0, or -1 with errno (ENOTSUP where the file system keeps none).
int fp_kit_setxattr(const char *path, const char *name, const void *value, size_t size);
/// fsetxattr(2): 0, or -1 with errno.
int fp_kit_fsetxattr(int fd, const char *name, const void *value, size_t size);
/// removexattr(2): 0, or -1 with errno (ENODATA when there is none).
int fp_kit_removexattr(const char *path, const char *name);
/// fremovexattr(2): 0, or -1 with errno.
int fp_kit_fremovexattr(int fd, const char *name);

#endif
