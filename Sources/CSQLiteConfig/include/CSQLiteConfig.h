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

/// Turns the triggers of one connection on (`on` 1) or off (0), for every statement it prepares
/// or runs next (SQLite expires its prepared statements when the setting changes, and prepares
/// them again on their next step). Other connections are not affected. Returns SQLITE_OK or
/// SQLite's error.
static inline int fp_sqlite_enable_triggers(sqlite3 *db, int on) {
    int now = -1;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, on, &now);
}

/// Turns the foreign key checks of one connection on (`on` 1) or off (0), as
/// `fp_sqlite_enable_triggers` does the triggers; unlike `PRAGMA foreign_keys`, this works
/// inside a transaction. Returns SQLITE_OK or SQLite's error.
static inline int fp_sqlite_enable_foreign_keys(sqlite3 *db, int on) {
    int now = -1;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FKEY, on, &now);
}
#endif
