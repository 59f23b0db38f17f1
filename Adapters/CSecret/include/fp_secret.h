#ifndef FP_SECRET_H
#define FP_SECRET_H

// The Secret Service (GNOME Keyring, KWallet, KeePassXC) through libsecret, loaded with dlopen
// on first use: a program linking this shim starts without libsecret or GLib installed, and
// says what is missing when a secret is asked for.
//
// Every item this shim stores or looks up carries the attribute service=fileprovider and
// domain=<the domain's name> (what a lookup matches), and user, host and backend for people
// reading the keyring (seahorse, `secret-tool search service fileprovider`). The calls block
// on D-Bus: run them on a thread of their own. They are serialized by a lock.

/// NULL once libsecret-1.so.0 (or the file $FILEPROVIDER_LIBSECRET names) is loaded with every
/// function used; otherwise why not (static text, never freed).
const char *fp_secret_load_error(void);

/// Looks up the password of `domain`. Returns 1 and sets `*password` when one is stored, 0
/// when none is, -1 and sets `*error` when the Secret Service cannot be asked. What is set is
/// malloc'd: free it with fp_secret_free.
int fp_secret_lookup(const char *domain, char **password, char **error);

/// Stores `password` for `domain` in the default collection under `label`, after deleting every
/// item stored for it (whatever its other attributes). Returns 0, or -1 and sets `*error`.
int fp_secret_store(
    const char *label, const char *domain, const char *user, const char *host, const char *backend, const char *password,
    char **error);

/// Deletes the passwords stored for `domain`. Returns 1 when one was deleted, 0 when there was
/// none, -1 and sets `*error` when the Secret Service cannot be asked.
int fp_secret_clear(const char *domain, char **error);

/// Zeroes and frees text the functions above returned.
void fp_secret_free(char *text);

#endif
