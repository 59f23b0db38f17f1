#ifndef CCURL_SHIM_H
#define CCURL_SHIM_H
#include <curl/curl.h>

// Typed wrappers for libcurl's variadic calls, which Swift cannot call directly.
// Only the adapter kit (Adapters/Kit, HTTPConnection.swift) uses them.

typedef size_t (*fp_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*fp_curl_xferinfo_callback)(void *userdata, curl_off_t download_total, curl_off_t download_now,
                                         curl_off_t upload_total, curl_off_t upload_now);

static inline CURLcode fp_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode fp_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode fp_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode fp_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode fp_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode fp_curl_setopt_callback(CURL *handle, CURLoption option, fp_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode fp_curl_setopt_xferinfo(CURL *handle, fp_curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

static inline CURLcode fp_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode fp_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// CURLOPT_COPYPOSTFIELDS from bytes that need not end in NUL (the size must be set first
/// with CURLOPT_POSTFIELDSIZE).
static inline CURLcode fp_curl_setopt_copy_bytes(CURL *handle, const void *bytes, size_t count) {
    (void)count;
    return curl_easy_setopt(handle, CURLOPT_COPYPOSTFIELDS, bytes);
}

/// CURLAUTH_BASIC, a macro Swift does not import.
static inline unsigned long fp_curl_auth_basic(void) { return CURLAUTH_BASIC; }

/// CURL_READFUNC_ABORT, a macro Swift does not import.
static inline size_t fp_curl_read_abort(void) { return CURL_READFUNC_ABORT; }

#endif
