#ifndef C_SYSTEM_SHIMS_H
#define C_SYSTEM_SHIMS_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

/// Renames `from` to `to`, failing with EEXIST instead of replacing an existing `to`.
static inline int fp_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

/// UTIME_OMIT for utimensat.
static inline long fp_utime_omit(void) { return UTIME_OMIT; }
#endif
