#ifndef FP_DBUS_H
#define FP_DBUS_H

#include <stdint.h>

// A service on the D-Bus session bus through sd-bus (libsystemd), loaded with dlopen on first
// use: a program linking this shim starts without libsystemd, and says what is missing when the
// bus is asked for. Built without libsystemd's headers: the shim declares the few functions it
// calls (a stable ABI since systemd 221).
//
// One object at one path, one thread: fp_dbus_run runs the bus on the calling thread (a thread
// of its own: it blocks in poll) until fp_dbus_stop. Method calls of the object's interface go
// to the handler on that thread, which must not block: it keeps the call and answers it later,
// from any thread, with fp_dbus_reply or fp_dbus_reply_error. org.freedesktop.DBus.Introspectable
// is answered here with the XML given to fp_dbus_open; org.freedesktop.DBus.Peer by sd-bus.

typedef struct FPDBus FPDBus;

/// A method call of the object's interface: `member`, its string argument (NULL when the call
/// carries neither one string nor a string and a boolean) and that boolean (`flag`: 0 or 1; -1
/// when the call carries none). Returns 1 when the call is kept (answer it with
/// fp_dbus_reply or fp_dbus_reply_error exactly once), 0 for a member the service does not
/// have (then org.freedesktop.DBus.Error.UnknownMethod is replied). `call` is valid until it is
/// answered.
typedef int (*fp_dbus_handler)(void *context, void *call, const char *member, const char *argument, int flag);

/// NULL once libsystemd.so.0 (or the file $FILEPROVIDER_LIBSYSTEMD names) is loaded with every
/// function used; otherwise why not (static text, never freed).
const char *fp_dbus_load_error(void);

/// Connects to the session bus (DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus), claims
/// `name` (failing when another connection owns it) and serves `interface` at `path`. Returns
/// the service, or NULL and sets `*error` (malloc'd: free it). Call it on the thread that then
/// calls fp_dbus_run.
FPDBus *fp_dbus_open(
    const char *name, const char *path, const char *interface, const char *introspection, fp_dbus_handler handler,
    void *context, char **error);

/// Runs the bus until fp_dbus_stop. Returns 0, or a negative errno when the connection failed.
int fp_dbus_run(FPDBus *bus);

/// Makes fp_dbus_run return (any thread, any number of times).
void fp_dbus_stop(FPDBus *bus);

/// Answers `call` with one string (any thread). After fp_dbus_run returned, only frees the call.
void fp_dbus_reply(FPDBus *bus, void *call, const char *value);

/// Answers `call` with the D-Bus error `name` and `message` (any thread).
void fp_dbus_reply_error(FPDBus *bus, void *call, const char *name, const char *message);

/// Emits the signal `member` with two strings from the object (any thread; dropped after
/// fp_dbus_run returned).
void fp_dbus_emit(FPDBus *bus, const char *member, const char *first, const char *second);

/// Closes the connection and frees everything (after fp_dbus_run returned; calls not answered
/// are dropped).
void fp_dbus_free(FPDBus *bus);

#endif
