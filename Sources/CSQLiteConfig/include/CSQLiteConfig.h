#ifndef C_SQLITE_CONFIG_H
#define C_SQLITE_CONFIG_H
#include <sqlite3.h>

/// Process-wide SQLite settings for GRDB's connections, which each serialize their own use:
/// no per-call connection mutex (multi-thread mode) and no global allocation statistics (a
/// global mutex around every allocation). Must run before SQLite is used; returns SQLITE_OK,
/// or SQLITE_MISUSE when SQLite was already initialized (nothing changes then).
static inline int fp_sqlite_configure(void) {
    int mode = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    int stats = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return mode != SQLITE_OK ? mode : stats;
}
#endif
