#include "fp_curl.h"

#include "fp_library.h"

#include <pthread.h>

// libcurl's functions, found in the library loaded on first use. setopt and getinfo are
// variadic: called through pointers of their variadic type, as the header declares them.
static struct {
    CURLcode (*globalInit)(long);
    char *(*version)(void);
    CURL *(*easyInit)(void);
    void (*easyCleanup)(CURL *);
    void (*easyReset)(CURL *);
    CURLcode (*easyPerform)(CURL *);
    const char *(*easyStrerror)(CURLcode);
    CURLcode (*easySetopt)(CURL *, CURLoption, ...);
    CURLcode (*easyGetinfo)(CURL *, CURLINFO, ...);
    struct curl_slist *(*slistAppend)(struct curl_slist *, const char *);
    void (*slistFreeAll)(struct curl_slist *);
} curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fp_library_load loaded;

static void *symbol(void *library, const char *name) {
    return fp_library_symbol(&loaded, library, "libcurl.so.4", name, "");
}

static void load(void) {
    // FILEPROVIDER_LIBCURL names another file (a libcurl installed elsewhere; the tests name one
    // that does not exist to see what a machine without libcurl says).
    void *library = fp_library_open(&loaded, "FILEPROVIDER_LIBCURL", "libcurl.so.4");
    if (library == NULL) return;
    curl.globalInit = (CURLcode(*)(long))symbol(library, "curl_global_init");
    curl.version = (char *(*)(void))symbol(library, "curl_version");
    curl.easyInit = (CURL * (*)(void)) symbol(library, "curl_easy_init");
    curl.easyCleanup = (void (*)(CURL *))symbol(library, "curl_easy_cleanup");
    curl.easyReset = (void (*)(CURL *))symbol(library, "curl_easy_reset");
    curl.easyPerform = (CURLcode(*)(CURL *))symbol(library, "curl_easy_perform");
    curl.easyStrerror = (const char *(*)(CURLcode))symbol(library, "curl_easy_strerror");
    curl.easySetopt = (CURLcode(*)(CURL *, CURLoption, ...))symbol(library, "curl_easy_setopt");
    curl.easyGetinfo = (CURLcode(*)(CURL *, CURLINFO, ...))symbol(library, "curl_easy_getinfo");
    curl.slistAppend = (struct curl_slist * (*)(struct curl_slist *, const char *)) symbol(library, "curl_slist_append");
    curl.slistFreeAll = (void (*)(struct curl_slist *))symbol(library, "curl_slist_free_all");
    if (loaded.failure != NULL) return;
    // Once, before any other thread uses libcurl (it is not thread-safe before 7.84).
    CURLcode code = curl.globalInit(CURL_GLOBAL_ALL);
    if (code != CURLE_OK) {
        fp_library_fail(&loaded, "libcurl could not be initialized (%s)", curl.easyStrerror(code));
    }
}

const char *fp_curl_load_error(void) {
    pthread_once(&once, load);
    return loaded.failure;
}

const char *fp_curl_version(void) { return curl.version(); }
CURL *fp_curl_easy_init(void) { return curl.easyInit(); }
void fp_curl_easy_cleanup(CURL *handle) { curl.easyCleanup(handle); }
void fp_curl_easy_reset(CURL *handle) { curl.easyReset(handle); }
CURLcode fp_curl_easy_perform(CURL *handle) { return curl.easyPerform(handle); }
const char *fp_curl_easy_strerror(CURLcode code) { return curl.easyStrerror(code); }

struct curl_slist *fp_curl_slist_append(struct curl_slist *list, const char *line) {
    return curl.slistAppend(list, line);
}

void fp_curl_slist_free_all(struct curl_slist *list) { curl.slistFreeAll(list); }

CURLcode fp_curl_setopt_long(CURL *handle, CURLoption option, long value) { return curl.easySetopt(handle, option, value); }

CURLcode fp_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl.easySetopt(handle, option, value);
}

CURLcode fp_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl.easySetopt(handle, option, value);
}

CURLcode fp_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl.easySetopt(handle, option, value);
}

CURLcode fp_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl.easySetopt(handle, option, value);
}

CURLcode fp_curl_setopt_callback(CURL *handle, CURLoption option, fp_curl_data_callback value) {
    return curl.easySetopt(handle, option, value);
}

CURLcode fp_curl_setopt_xferinfo(CURL *handle, fp_curl_xferinfo_callback value) {
    return curl.easySetopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}

CURLcode fp_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) { return curl.easyGetinfo(handle, info, value); }

CURLcode fp_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl.easyGetinfo(handle, info, value);
}

CURLcode fp_curl_setopt_copy_bytes(CURL *handle, const void *bytes, size_t count) {
    (void)count;
    return curl.easySetopt(handle, CURLOPT_COPYPOSTFIELDS, bytes);
}
