#ifndef CLIBSSH2_SHIM_H
#define CLIBSSH2_SHIM_H
#include <libssh2.h>
#include <libssh2_sftp.h>
#include <string.h>
/* Not in Swift's Glibc module: a ranged download records its verified prefix in an xattr. */
#include <sys/xattr.h>
/* Not in Swift's Glibc module: the child processes of the adapter (ssh -G, a proxy command) are
   waited for with a timeout through a pidfd, and started in a session of their own. */
#include <sys/pidfd.h>
#include <spawn.h>
#ifdef POSIX_SPAWN_SETSID
#define SHIM_POSIX_SPAWN_SETSID POSIX_SPAWN_SETSID
#else
/* glibc defines it only under _GNU_SOURCE, which Swift's Glibc module is not built with. */
#define SHIM_POSIX_SPAWN_SETSID 0x80
#endif

/* libssh2's function-like macros are not imported into Swift; these wrap the _ex calls. */

static inline LIBSSH2_SESSION *shim_libssh2_session_init(void) {
    return libssh2_session_init_ex(NULL, NULL, NULL, NULL);
}

static inline int shim_libssh2_session_disconnect(LIBSSH2_SESSION *session, const char *description) {
    return libssh2_session_disconnect_ex(session, SSH_DISCONNECT_BY_APPLICATION, description, "");
}

static inline LIBSSH2_CHANNEL *shim_libssh2_channel_open_session(LIBSSH2_SESSION *session) {
    return libssh2_channel_open_ex(session, "session", sizeof("session") - 1,
                                   LIBSSH2_CHANNEL_WINDOW_DEFAULT, LIBSSH2_CHANNEL_PACKET_DEFAULT, NULL, 0);
}

static inline int shim_libssh2_channel_subsystem(LIBSSH2_CHANNEL *channel, const char *name) {
    return libssh2_channel_process_startup(channel, "subsystem", sizeof("subsystem") - 1,
                                           name, (unsigned int)strlen(name));
}

static inline ssize_t shim_libssh2_channel_read(LIBSSH2_CHANNEL *channel, char *buffer, size_t length) {
    return libssh2_channel_read_ex(channel, 0, buffer, length);
}

static inline ssize_t shim_libssh2_channel_write(LIBSSH2_CHANNEL *channel, const char *buffer, size_t length) {
    return libssh2_channel_write_ex(channel, 0, buffer, length);
}

#endif
