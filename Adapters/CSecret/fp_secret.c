#include "fp_secret.h"

#include "fp_library.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// libsecret's and GLib's types, as their headers declare them (a stable ABI): the shim is built
// without their headers, so that building needs neither libsecret-1-dev nor libglib2.0-dev.

typedef struct {
    const char *name;
    int type; // SecretSchemaAttributeType: 0 is SECRET_SCHEMA_ATTRIBUTE_STRING
} FPSchemaAttribute;

typedef struct {
    const char *name;
    int flags; // SecretSchemaFlags
    FPSchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} FPSchema;

typedef struct {
    uint32_t domain;
    int code;
    char *message;
} FPGError;

// SECRET_SCHEMA_DONT_MATCH_NAME: items stored by other tools (`secret-tool store service
// fileprovider domain NAME`) are found too.
static const FPSchema schema = {
    .name = "org.fileproviderkit.Password",
    .flags = 1 << 1,
    .attributes = {{"service", 0}, {"domain", 0}, {"user", 0}, {"host", 0}, {"backend", 0}, {NULL, 0}},
};

static struct {
    char *(*lookup)(const FPSchema *, void *, FPGError **, ...);
    int (*store)(const FPSchema *, const char *, const char *, const char *, void *, FPGError **, ...);
    int (*clear)(const FPSchema *, void *, FPGError **, ...);
    void (*passwordFree)(char *);
    void (*errorFree)(FPGError *);
} secret;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t calls = PTHREAD_MUTEX_INITIALIZER;
static fp_library_load loaded;

static void *symbol(void *library, const char *name) {
    return fp_library_symbol(&loaded, library, "libsecret-1.so.0", name, "");
}

static void load(void) {
    // FILEPROVIDER_LIBSECRET names another file (a libsecret installed elsewhere; the tests
    // name one that does not exist to see what a machine without libsecret says).
    void *library = fp_library_open(&loaded, "FILEPROVIDER_LIBSECRET", "libsecret-1.so.0");
    if (library == NULL) return;
    secret.lookup = (char *(*)(const FPSchema *, void *, FPGError **, ...))symbol(library, "secret_password_lookup_sync");
    secret.store = (int (*)(const FPSchema *, const char *, const char *, const char *, void *, FPGError **, ...))symbol(
        library, "secret_password_store_sync");
    secret.clear = (int (*)(const FPSchema *, void *, FPGError **, ...))symbol(library, "secret_password_clear_sync");
    secret.passwordFree = (void (*)(char *))symbol(library, "secret_password_free");
    // GLib's, found through libsecret's dependencies.
    secret.errorFree = (void (*)(FPGError *))symbol(library, "g_error_free");
}

const char *fp_secret_load_error(void) {
    pthread_once(&once, load);
    return loaded.failure;
}

static char *copy(const char *text) {
    size_t length = strlen(text);
    char *result = malloc(length + 1);
    if (result != NULL) memcpy(result, text, length + 1);
    return result;
}

/// Takes the message out of `error` (freeing it) into a malloc'd copy.
static void take(FPGError *error, char **message) {
    *message = copy(error != NULL && error->message != NULL ? error->message : "the Secret Service failed");
    if (error != NULL) secret.errorFree(error);
}

int fp_secret_lookup(const char *domain, char **password, char **error) {
    *password = NULL;
    *error = NULL;
    if (fp_secret_load_error() != NULL) {
        *error = copy(loaded.failure);
        return -1;
    }
    FPGError *failed = NULL;
    pthread_mutex_lock(&calls);
    char *found = secret.lookup(&schema, NULL, &failed, "service", "fileprovider", "domain", domain, NULL);
    pthread_mutex_unlock(&calls);
    if (failed != NULL) {
        if (found != NULL) secret.passwordFree(found);
        take(failed, error);
        return -1;
    }
    if (found == NULL) return 0;
    *password = copy(found);
    secret.passwordFree(found);
    return 1;
}

int fp_secret_store(
    const char *label, const char *domain, const char *user, const char *host, const char *backend, const char *password,
    char **error) {
    *error = NULL;
    if (fp_secret_load_error() != NULL) {
        *error = copy(loaded.failure);
        return -1;
    }
    FPGError *failed = NULL;
    pthread_mutex_lock(&calls);
    // Items stored for the domain with other attributes (by secret-tool, or for another user
    // or host) are not replaced by the store below: delete them first, so a lookup can only
    // find this password.
    secret.clear(&schema, NULL, &failed, "service", "fileprovider", "domain", domain, NULL);
    if (failed != NULL) {
        pthread_mutex_unlock(&calls);
        take(failed, error);
        return -1;
    }
    // NULL collection: the default one (the login keyring).
    int stored = secret.store(
        &schema, NULL, label, password, NULL, &failed, "service", "fileprovider", "domain", domain, "user", user, "host",
        host, "backend", backend, NULL);
    pthread_mutex_unlock(&calls);
    if (!stored || failed != NULL) {
        take(failed, error);
        return -1;
    }
    return 0;
}

int fp_secret_clear(const char *domain, char **error) {
    *error = NULL;
    if (fp_secret_load_error() != NULL) {
        *error = copy(loaded.failure);
        return -1;
    }
    FPGError *failed = NULL;
    pthread_mutex_lock(&calls);
    int cleared = secret.clear(&schema, NULL, &failed, "service", "fileprovider", "domain", domain, NULL);
    pthread_mutex_unlock(&calls);
    if (failed != NULL) {
        take(failed, error);
        return -1;
    }
    return cleared ? 1 : 0;
}

void fp_secret_free(char *text) {
    if (text == NULL) return;
    volatile char *bytes = text;
    while (*bytes != 0) *bytes++ = 0;
    free(text);
}
