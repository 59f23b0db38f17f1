#ifndef FP_CURL_H
#define FP_CURL_H
#include <curl/curl.h>

// libcurl, loaded with dlopen on first use: the programs start without loading it and the
// libraries it needs (GnuTLS, Kerberos, LDAP, …: about 2.4 ms of every command's start on the
// test machine), and run without libcurl installed until an HTTP store is used. Its header gives
// the types and constants; call libcurl only through these functions (a direct call does not
// link). Only the adapter kit (Adapters/Kit) uses them.

/// NULL once libcurl.so.4 (or the file $FILEPROVIDER_LIBCURL names) is loaded with every function
/// below and initialized (`curl_global_init(CURL_GLOBAL_ALL)`); otherwise why not. Loads it on
/// the first call; safe from any thread.
const char *fp_curl_load_error(void);

// The functions below need fp_curl_load_error() to have returned NULL.

const char *fp_curl_version(void);
CURL *fp_curl_easy_init(void);
void fp_curl_easy_cleanup(CURL *handle);
void fp_curl_easy_reset(CURL *handle);
CURLcode fp_curl_easy_perform(CURL *handle);
const char *fp_curl_easy_strerror(CURLcode code);
struct curl_slist *fp_curl_slist_append(struct curl_slist *list, const char *line);
void fp_curl_slist_free_all(struct curl_slist *list);

// Typed forms of libcurl's variadic calls, which Swift cannot call directly.

typedef size_t (*fp_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*fp_curl_xferinfo_callback)(void *userdata, curl_off_t download_total, curl_off_t download_now,
                                         curl_off_t upload_total, curl_off_t upload_now);

CURLcode fp_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode fp_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode fp_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode fp_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode fp_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode fp_curl_setopt_callback(CURL *handle, CURLoption option, fp_curl_data_callback value);
CURLcode fp_curl_setopt_xferinfo(CURL *handle, fp_curl_xferinfo_callback value);
CURLcode fp_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode fp_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value);

/// CURLOPT_COPYPOSTFIELDS from bytes that need not end in NUL (the size must be set first
/// with CURLOPT_POSTFIELDSIZE).
CURLcode fp_curl_setopt_copy_bytes(CURL *handle, const void *bytes, size_t count);

/// CURLAUTH_BASIC, a macro Swift does not import.
static inline unsigned long fp_curl_auth_basic(void) { return CURLAUTH_BASIC; }

/// CURL_READFUNC_ABORT, a macro Swift does not import.
static inline size_t fp_curl_read_abort(void) { return CURL_READFUNC_ABORT; }

#endif
