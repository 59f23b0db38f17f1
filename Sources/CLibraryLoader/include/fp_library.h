#ifndef FP_LIBRARY_H
#define FP_LIBRARY_H

// Loading a shared library on first use, for the C shims that call one through function
// pointers instead of linking it (CCurl, CSecret, CGD, CDBus, CFUSE): the programs start
// without it, and a feature that needs it says what is missing.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/// Why a library could not be used: `failure` is NULL while nothing went wrong, else the first
/// reason (pointing into `message`).
typedef struct {
    const char *failure;
    char message[512];
} fp_library_load;

/// Opens `name`, or the file the environment variable `override` names when it is set and not
/// empty (`override` may be NULL), with RTLD_NOW | RTLD_LOCAL. NULL when it cannot, with
/// dlerror's reason in `load`.
static inline void *fp_library_open(fp_library_load *load, const char *override, const char *name) {
    const char *chosen = override != NULL ? getenv(override) : NULL;
    if (chosen == NULL || chosen[0] == 0) chosen = name;
    void *library = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL && load->failure == NULL) {
        const char *reason = dlerror();
        if (reason != NULL) {
            snprintf(load->message, sizeof load->message, "%s", reason);
        } else {
            snprintf(load->message, sizeof load->message, "%s cannot be loaded", chosen);
        }
        load->failure = load->message;
    }
    return library;
}

/// The address of `symbol` in `library` (opened as `name`); NULL when it has none, the first
/// such symbol recorded in `load` as "`name` has no `symbol``hint`" (`hint`: "" or what the
/// user needs, such as " (libfuse 3.12 or later is needed)").
static inline void *fp_library_symbol(
    fp_library_load *load, void *library, const char *name, const char *symbol, const char *hint) {
    void *found = dlsym(library, symbol);
    if (found == NULL && load->failure == NULL) {
        snprintf(load->message, sizeof load->message, "%s has no %s%s", name, symbol, hint);
        load->failure = load->message;
    }
    return found;
}

/// Records `reason` (formatted as printf does) in `load` unless a failure is recorded already.
#define fp_library_fail(load, ...)                                                                 \
    do {                                                                                           \
        if ((load)->failure == NULL) {                                                             \
            snprintf((load)->message, sizeof (load)->message, __VA_ARGS__);                        \
            (load)->failure = (load)->message;                                                     \
        }                                                                                          \
    } while (0)

#endif
