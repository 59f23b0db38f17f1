// fileprovider-backend-cfolder: a local folder as a FileProviderKit store, in C (POSIX and
// the C library only). The second reference external backend (Docs/ExternalBackends.md):
// protocol version 1, one JSON object per line on standard input and output, requests
// answered one after another. Identifiers are paths below the root ("/a/b.txt"); contents
// never travel through the pipe (fetch writes the file it is given, create and modify read
// the file they are given). It exits when its standard input ends.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ROOT_ID "NSFileProviderRootContainerItemIdentifier"
#define STAGING_PREFIX ".fpk-cfolder-"
#define PAGE_SIZE 200
#define CHUNK (1 << 20)

// MARK: Growing buffers

typedef struct {
    char *data;
    size_t length, capacity;
} Buffer;

static void grow(Buffer *b, size_t more) {
    if (b->length + more + 1 <= b->capacity) return;
    size_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->length + more + 1) capacity *= 2;
    b->data = realloc(b->data, capacity);
    if (!b->data) abort();
    b->capacity = capacity;
}

static void append(Buffer *b, const void *bytes, size_t count) {
    grow(b, count);
    memcpy(b->data + b->length, bytes, count);
    b->length += count;
    b->data[b->length] = 0;
}

static void appendf(Buffer *b, const char *format, ...) {
    va_list args;
    va_start(args, format);
    char small[512];
    int n = vsnprintf(small, sizeof small, format, args);
    va_end(args);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        append(b, small, (size_t)n);
        return;
    }
    grow(b, (size_t)n);
    va_start(args, format);
    vsnprintf(b->data + b->length, (size_t)n + 1, format, args);
    va_end(args);
    b->length += (size_t)n;
}

// MARK: JSON values

typedef enum { J_NULL, J_BOOL, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } JType;

typedef struct JValue {
    JType type;
    int boolean;
    double number;
    long long integer;
    char *string;  // J_STRING: bytes (may hold NUL), J_OBJECT member: key
    size_t length;
    struct JValue *items;  // J_ARRAY, J_OBJECT
    char **keys;           // J_OBJECT
    size_t count;
} JValue;

typedef struct {
    const char *p, *end;
    int failed;
} Parser;

static void skip(Parser *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static void put_utf8(Buffer *b, unsigned code) {
    char out[4];
    size_t n;
    if (code < 0x80) {
        out[0] = (char)code;
        n = 1;
    } else if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3F));
        n = 2;
    } else if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (code >> 18));
        out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[3] = (char)(0x80 | (code & 0x3F));
        n = 4;
    }
    append(b, out, n);
}

static int hex4(Parser *s, unsigned *value) {
    if (s->end - s->p < 4) return 0;
    *value = 0;
    for (int i = 0; i < 4; i++) {
        char c = *s->p++;
        *value <<= 4;
        if (c >= '0' && c <= '9') *value |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') *value |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *value |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    return 1;
}

static int parse_string(Parser *s, char **out, size_t *length) {
    if (s->p >= s->end || *s->p != '"') return 0;
    s->p++;
    Buffer b = {0};
    append(&b, "", 0);
    while (s->p < s->end && *s->p != '"') {
        char c = *s->p++;
        if (c != '\\') {
            append(&b, &c, 1);
            continue;
        }
        if (s->p >= s->end) break;
        char e = *s->p++;
        switch (e) {
        case '"': append(&b, "\"", 1); break;
        case '\\': append(&b, "\\", 1); break;
        case '/': append(&b, "/", 1); break;
        case 'b': append(&b, "\b", 1); break;
        case 'f': append(&b, "\f", 1); break;
        case 'n': append(&b, "\n", 1); break;
        case 'r': append(&b, "\r", 1); break;
        case 't': append(&b, "\t", 1); break;
        case 'u': {
            unsigned code;
            if (!hex4(s, &code)) goto fail;
            if (code >= 0xD800 && code < 0xDC00 && s->end - s->p >= 6 && s->p[0] == '\\' && s->p[1] == 'u') {
                s->p += 2;
                unsigned low;
                if (!hex4(s, &low)) goto fail;
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            }
            put_utf8(&b, code);
            break;
        }
        default: goto fail;
        }
    }
    if (s->p >= s->end) goto fail;
    s->p++;
    *out = b.data;
    *length = b.length;
    return 1;
fail:
    free(b.data);
    return 0;
}

static int parse_value(Parser *s, JValue *v, int depth);

static int parse_value(Parser *s, JValue *v, int depth) {
    memset(v, 0, sizeof *v);
    if (depth > 32) return 0;
    skip(s);
    if (s->p >= s->end) return 0;
    char c = *s->p;
    if (c == '{' || c == '[') {
        int object = c == '{';
        v->type = object ? J_OBJECT : J_ARRAY;
        s->p++;
        size_t capacity = 0;
        skip(s);
        if (s->p < s->end && *s->p == (object ? '}' : ']')) {
            s->p++;
            return 1;
        }
        while (1) {
            if (v->count == capacity) {
                capacity = capacity ? capacity * 2 : 8;
                v->items = realloc(v->items, capacity * sizeof(JValue));
                if (object) v->keys = realloc(v->keys, capacity * sizeof(char *));
            }
            if (object) {
                skip(s);
                size_t ignored;
                if (!parse_string(s, &v->keys[v->count], &ignored)) return 0;
                skip(s);
                if (s->p >= s->end || *s->p != ':') return 0;
                s->p++;
            }
            if (!parse_value(s, &v->items[v->count], depth + 1)) return 0;
            v->count++;
            skip(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == (object ? '}' : ']')) {
                s->p++;
                return 1;
            }
            return 0;
        }
    }
    if (c == '"') {
        v->type = J_STRING;
        return parse_string(s, &v->string, &v->length);
    }
    if (s->end - s->p >= 4 && !strncmp(s->p, "null", 4)) {
        s->p += 4;
        v->type = J_NULL;
        return 1;
    }
    if (s->end - s->p >= 4 && !strncmp(s->p, "true", 4)) {
        s->p += 4;
        v->type = J_BOOL;
        v->boolean = 1;
        return 1;
    }
    if (s->end - s->p >= 5 && !strncmp(s->p, "false", 5)) {
        s->p += 5;
        v->type = J_BOOL;
        return 1;
    }
    char text[64];
    size_t n = 0;
    while (s->p < s->end && n < sizeof text - 1 && strchr("+-0123456789.eE", *s->p)) text[n++] = *s->p++;
    if (n == 0) return 0;
    text[n] = 0;
    v->type = J_NUMBER;
    v->number = strtod(text, NULL);
    v->integer = strtoll(text, NULL, 10);
    return 1;
}

static void free_value(JValue *v) {
    free(v->string);
    for (size_t i = 0; i < v->count; i++) {
        free_value(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static const JValue *get(const JValue *object, const char *key) {
    if (!object || object->type != J_OBJECT) return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (!strcmp(object->keys[i], key)) return &object->items[i];
    return NULL;
}

static const char *get_string(const JValue *object, const char *key) {
    const JValue *v = get(object, key);
    return v && v->type == J_STRING ? v->string : NULL;
}

static int has_number_in(const JValue *object, const char *key, long long wanted) {
    const JValue *list = get(object, key);
    if (!list || list->type != J_ARRAY) return 0;
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].type == J_NUMBER && list->items[i].integer == wanted) return 1;
    return 0;
}

static int has_string_in(const JValue *object, const char *key, const char *wanted) {
    const JValue *list = get(object, key);
    if (!list || list->type != J_ARRAY) return 0;
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].type == J_STRING && !strcmp(list->items[i].string, wanted)) return 1;
    return 0;
}

// MARK: Output

static void json_string(Buffer *b, const char *bytes, size_t length) {
    append(b, "\"", 1);
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c == '"') append(b, "\\\"", 2);
        else if (c == '\\') append(b, "\\\\", 2);
        else if (c == '\n') append(b, "\\n", 2);
        else if (c < 0x20) appendf(b, "\\u%04x", c);
        else append(b, &bytes[i], 1);
    }
    append(b, "\"", 1);
}

static void base64(Buffer *b, const unsigned char *bytes, size_t length) {
    static const char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    append(b, "\"", 1);
    for (size_t i = 0; i < length; i += 3) {
        unsigned value = (unsigned)bytes[i] << 16;
        if (i + 1 < length) value |= (unsigned)bytes[i + 1] << 8;
        if (i + 2 < length) value |= bytes[i + 2];
        char out[4] = {table[(value >> 18) & 63], table[(value >> 12) & 63], i + 1 < length ? table[(value >> 6) & 63] : '=',
            i + 2 < length ? table[value & 63] : '='};
        append(b, out, 4);
    }
    append(b, "\"", 1);
}

static int unbase64(const char *text, Buffer *out) {
    static int table[256];
    static int ready = 0;
    if (!ready) {
        for (int i = 0; i < 256; i++) table[i] = -1;
        const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; i++) table[(unsigned char)alphabet[i]] = i;
        ready = 1;
    }
    size_t length = strlen(text);
    if (length % 4) return 0;
    for (size_t i = 0; i < length; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) v[k] = text[i + k] == '=' ? -2 : table[(unsigned char)text[i + k]];
        if (v[0] < 0 || v[1] < 0 || v[2] == -1 || v[3] == -1) return 0;
        unsigned value = ((unsigned)v[0] << 18) | ((unsigned)v[1] << 12) | ((unsigned)(v[2] < 0 ? 0 : v[2]) << 6) | (unsigned)(v[3] < 0 ? 0 : v[3]);
        char bytes[3] = {(char)(value >> 16), (char)(value >> 8), (char)value};
        append(out, bytes, v[2] < 0 ? 1 : v[3] < 0 ? 2 : 3);
    }
    return 1;
}

static void send_line(Buffer *b) {
    append(b, "\n", 1);
    fwrite(b->data, 1, b->length, stdout);
    fflush(stdout);
}

// MARK: Errors

typedef struct {
    const char *code;
    char message[600];
} Failure;

static Failure failure;

static int fail(const char *code, const char *format, ...) {
    failure.code = code;
    va_list args;
    va_start(args, format);
    vsnprintf(failure.message, sizeof failure.message, format, args);
    va_end(args);
    return 0;
}

static int fail_errno(const char *what) {
    int e = errno;
    const char *code = "localIOFailure";
    if (e == ENOENT || e == ENOTDIR) code = "noSuchItem";
    else if (e == EEXIST) code = "filenameCollision";
    else if (e == ENOTEMPTY) code = "directoryNotEmpty";
    else if (e == EACCES || e == EPERM || e == EROFS) code = "permissionDenied";
    else if (e == ENOSPC || e == EDQUOT) code = "insufficientQuota";
    else if (e == ENAMETOOLONG) code = "invalidFilename";
    return fail(code, "%s: %s", what, strerror(e));
}

// MARK: The store

static char *root;

static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t extra;
        unsigned code;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) extra = 1, code = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) extra = 2, code = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) extra = 3, code = c & 0x07;
        else return 0;
        if (i + extra >= n) return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            code = (code << 6) | (s[i + k] & 0x3F);
        }
        if ((extra == 1 && code < 0x80) || (extra == 2 && code < 0x800) || (extra == 3 && (code < 0x10000 || code > 0x10FFFF)) ||
            (code >= 0xD800 && code < 0xE000))
            return 0;
        i += extra + 1;
    }
    return 1;
}

// A safe single name: 1 to 255 bytes, not . or .., no / or NUL (length is the decoded length).
static int valid_name(const char *name, size_t length) {
    if (length == 0 || length > 255 || strlen(name) != length || strchr(name, '/')) return 0;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
    return 1;
}

// The path of an identifier, in `out`; 0 with noSuchItem for one this store never made.
static int path_of(const char *identifier, Buffer *out) {
    out->length = 0;
    append(out, root, strlen(root));
    if (!strcmp(identifier, ROOT_ID)) return 1;
    if (identifier[0] != '/') return fail("noSuchItem", "no item '%s'", identifier);
    const char *p = identifier + 1;
    while (1) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char name[256];
        if (n == 0 || n > 255) return fail("noSuchItem", "no item '%s'", identifier);
        memcpy(name, p, n);
        name[n] = 0;
        if (!valid_name(name, n)) return fail("noSuchItem", "no item '%s'", identifier);
        append(out, "/", 1);
        append(out, name, n);
        if (!slash) return 1;
        p = slash + 1;
    }
}

static void parent_of(const char *identifier, Buffer *out) {
    out->length = 0;
    const char *slash = strrchr(identifier, '/');
    if (!slash || slash == identifier) append(out, ROOT_ID, strlen(ROOT_ID));
    else append(out, identifier, (size_t)(slash - identifier));
}

static void child_identifier(const char *parent, const char *name, Buffer *out) {
    out->length = 0;
    if (strcmp(parent, ROOT_ID)) append(out, parent, strlen(parent));
    append(out, "/", 1);
    append(out, name, strlen(name));
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

static long long nanoseconds(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

// The content version of a file or folder, as base64 JSON text, in `out`.
static void content_version(const struct stat *info, Buffer *out) {
    unsigned char bytes[24];
    put64(bytes, (uint64_t)info->st_ino);
    if (S_ISDIR(info->st_mode)) {
        base64(out, bytes, 8);
        return;
    }
    put64(bytes + 8, (uint64_t)nanoseconds(info->st_mtim));
    put64(bytes + 16, (uint64_t)info->st_size);
    base64(out, bytes, 24);
}

// Appends the item's JSON; 0 when it is neither a file nor a folder.
static int describe(Buffer *b, const char *identifier, const char *path) {
    struct stat info;
    if (lstat(path, &info) != 0) return fail_errno(identifier);
    if (!S_ISDIR(info.st_mode) && !S_ISREG(info.st_mode)) return fail("noSuchItem", "no item '%s'", identifier);
    Buffer parent = {0}, version = {0};
    const char *name;
    if (!strcmp(identifier, ROOT_ID)) {
        append(&parent, ROOT_ID, strlen(ROOT_ID));
        const char *slash = strrchr(root, '/');
        name = slash && slash[1] ? slash + 1 : "root";
    } else {
        parent_of(identifier, &parent);
        name = strrchr(identifier, '/') + 1;
    }
    content_version(&info, &version);
    append(b, "{\"identifier\":", 14);
    json_string(b, identifier, strlen(identifier));
    append(b, ",\"parent\":", 10);
    json_string(b, parent.data, parent.length);
    append(b, ",\"filename\":", 12);
    json_string(b, name, strlen(name));
    appendf(b, ",\"kind\":\"%s\",\"size\":%lld,\"modified\":%.9f,\"version\":{\"content\":", S_ISDIR(info.st_mode) ? "folder" : "file",
        S_ISDIR(info.st_mode) ? 0LL : (long long)info.st_size, (double)info.st_mtim.tv_sec + info.st_mtim.tv_nsec / 1e9);
    append(b, version.data, version.length);
    append(b, ",\"metadata\":", 12);
    if (S_ISDIR(info.st_mode)) {
        append(b, "\"\"", 2);
    } else {
        unsigned char bytes[8];
        put64(bytes, (uint64_t)nanoseconds(info.st_ctim));
        base64(b, bytes, 8);
    }
    append(b, "}", 1);
    // The owner's x bit (fileSystemFlags.userExecutable); a chmod changes the ctime, so the
    // metadata version.
    if (S_ISREG(info.st_mode)) appendf(b, ",\"executable\":%s", (info.st_mode & S_IXUSR) ? "true" : "false");
    append(b, "}", 1);
    free(parent.data);
    free(version.data);
    return 1;
}

// Whether the item at `path` has the content version `wanted` (a version object).
static int same_content(const char *path, const JValue *wanted) {
    const char *content = get_string(wanted, "content");
    struct stat info;
    if (!content || lstat(path, &info) != 0) return 0;
    Buffer mine = {0};
    content_version(&info, &mine);
    int same = mine.length == strlen(content) + 2 && !strncmp(mine.data + 1, content, strlen(content));
    free(mine.data);
    return same;
}

static int is_kind(const char *path, mode_t kind) {
    struct stat info;
    return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == kind;
}

static int folder_path(const char *identifier, Buffer *path) {
    if (!path_of(identifier, path)) return 0;
    struct stat info;
    if (lstat(path->data, &info) != 0) return fail_errno(identifier);
    if (!S_ISDIR(info.st_mode)) return fail("invalidArgument", "'%s' is not a folder", identifier);
    return 1;
}

// MARK: Methods (each appends its result object to `b`, or fails)

static int m_item(const JValue *params, Buffer *b) {
    const char *identifier = get_string(params, "identifier");
    if (!identifier) return fail("invalidArgument", "no identifier");
    Buffer path = {0};
    int ok = path_of(identifier, &path);
    if (ok) {
        append(b, "{\"item\":", 8);
        ok = describe(b, identifier, path.data);
        append(b, "}", 1);
    }
    free(path.data);
    return ok;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int m_enumerate(const JValue *params, Buffer *b) {
    const char *container = get_string(params, "container");
    const char *page = get_string(params, "page");
    if (!container || !page) return fail("invalidArgument", "no container or page");
    Buffer path = {0}, token = {0}, child = {0}, childPath = {0};
    int ok = 0;
    char **names = NULL;
    size_t count = 0, capacity = 0;
    if (!folder_path(container, &path)) goto done;
    if (!unbase64(page, &token)) {
        fail("pageExpired", "not a page of this store");
        goto done;
    }
    const char *after = NULL;
    if (token.length && strcmp(token.data, "NSFileProviderInitialPageSortedByName") && strcmp(token.data, "NSFileProviderInitialPageSortedByDate")) {
        if (strncmp(token.data, "after:", 6)) {
            fail("pageExpired", "not a page of this store");
            goto done;
        }
        after = token.data + 6;
    }
    DIR *dir = opendir(path.data);
    if (!dir) {
        fail_errno(container);
        goto done;
    }
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        const char *name = entry->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..") || !strncmp(name, STAGING_PREFIX, strlen(STAGING_PREFIX))) continue;
        if (after && strcmp(name, after) <= 0) continue;
        if (count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            names = realloc(names, capacity * sizeof(char *));
        }
        names[count++] = strdup(name);
    }
    closedir(dir);
    qsort(names, count, sizeof(char *), compare_names);
    append(b, "{\"items\":[", 10);
    size_t listed = 0, i = 0;
    const char *last = NULL;
    for (; i < count && listed < PAGE_SIZE; i++) {
        last = names[i];
        if (!valid_utf8((const unsigned char *)names[i], strlen(names[i]))) continue;
        child_identifier(container, names[i], &child);
        childPath.length = 0;
        appendf(&childPath, "%s/%s", path.data, names[i]);
        Buffer one = {0};
        if (describe(&one, child.data, childPath.data)) {
            if (listed++) append(b, ",", 1);
            append(b, one.data, one.length);
        }
        free(one.data);
    }
    append(b, "],\"nextPage\":", 13);
    if (i < count && last) {
        Buffer next = {0};
        appendf(&next, "after:%s", last);
        base64(b, (const unsigned char *)next.data, next.length);
        free(next.data);
    } else {
        append(b, "null", 4);
    }
    append(b, "}", 1);
    ok = 1;
done:
    for (size_t k = 0; k < count; k++) free(names[k]);
    free(names);
    free(path.data);
    free(token.data);
    free(child.data);
    free(childPath.data);
    return ok;
}

static int m_fetch(long long id, const JValue *params, Buffer *b) {
    const char *identifier = get_string(params, "identifier");
    const char *destination = get_string(params, "path");
    const JValue *offsetValue = get(params, "offset");
    const JValue *lengthValue = get(params, "length");
    const JValue *version = get(params, "version");
    if (!identifier || !destination) return fail("invalidArgument", "no identifier or path");
    Buffer path = {0};
    int ok = 0, in = -1, out = -1;
    char *chunk = NULL;
    if (!path_of(identifier, &path)) goto done;
    struct stat info;
    if (lstat(path.data, &info) != 0) {
        fail_errno(identifier);
        goto done;
    }
    if (!S_ISREG(info.st_mode)) {
        fail("invalidArgument", "'%s' is not a file", identifier);
        goto done;
    }
    if (version && version->type == J_OBJECT && !same_content(path.data, version)) {
        fail("versionNoLongerAvailable", "'%s' has changed", identifier);
        goto done;
    }
    long long size = info.st_size;
    long long offset = offsetValue && offsetValue->type == J_NUMBER ? offsetValue->integer : 0;
    int ranged = lengthValue && lengthValue->type == J_NUMBER;
    long long start = offset < size ? offset : size;
    long long end = ranged ? (offset + lengthValue->integer < size ? offset + lengthValue->integer : size) : size;
    if (offset < 0 || (ranged && lengthValue->integer < 0)) {
        fail("invalidArgument", "a negative offset or length");
        goto done;
    }
    in = open(path.data, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fail_errno(identifier);
        goto done;
    }
    out = open(destination, O_WRONLY | O_CLOEXEC);
    if (out < 0 || (!ranged && ftruncate(out, start) != 0)) {
        fail(errno == ENOSPC || errno == EDQUOT ? "fileWriteOutOfSpace" : "localIOFailure", "%s: %s", destination, strerror(errno));
        goto done;
    }
    chunk = malloc(CHUNK);
    long long done_bytes = start;
    while (done_bytes < end) {
        size_t want = (size_t)(end - done_bytes < CHUNK ? end - done_bytes : CHUNK);
        ssize_t n = pread(in, chunk, want, done_bytes);
        if (n < 0) {
            fail_errno(identifier);
            goto done;
        }
        if (n == 0) {
            fail("versionNoLongerAvailable", "'%s' shrank while it was read", identifier);
            goto done;
        }
        for (ssize_t written = 0; written < n;) {
            ssize_t w = pwrite(out, chunk + written, (size_t)(n - written), done_bytes + written);
            if (w < 0) {
                fail(errno == ENOSPC || errno == EDQUOT ? "fileWriteOutOfSpace" : "localIOFailure", "%s: %s", destination, strerror(errno));
                goto done;
            }
            written += w;
        }
        done_bytes += n;
        if (!ranged) {
            Buffer progress = {0};
            appendf(&progress, "{\"id\":%lld,\"progress\":{\"completed\":%lld,\"total\":%lld}}", id, done_bytes, size);
            send_line(&progress);
            free(progress.data);
        }
    }
    if (!ranged && size == 0) {
        Buffer progress = {0};
        appendf(&progress, "{\"id\":%lld,\"progress\":{\"completed\":0,\"total\":0}}", id);
        send_line(&progress);
        free(progress.data);
    }
    Buffer before = {0}, after = {0};
    content_version(&info, &before);
    struct stat now;
    if (lstat(path.data, &now) == 0) content_version(&now, &after);
    int unchanged = after.length == before.length && !memcmp(after.data, before.data, before.length);
    free(before.data);
    free(after.data);
    if (!unchanged) {
        fail("versionNoLongerAvailable", "'%s' changed while it was read", identifier);
        goto done;
    }
    append(b, "{\"item\":", 8);
    if (!describe(b, identifier, path.data)) goto done;
    if (ranged) appendf(b, ",\"offset\":%lld,\"length\":%lld", start, end > start ? end - start : 0);
    append(b, "}", 1);
    ok = 1;
done:
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    free(chunk);
    free(path.data);
    return ok;
}

// Copies `source` (or nothing) into a new staging file in `folder`; its path in `staging`.
static int stage(const char *folder, const char *source, Buffer *staging) {
    static unsigned counter = 0;
    staging->length = 0;
    appendf(staging, "%s/%s%d-%u-%ld", folder, STAGING_PREFIX, (int)getpid(), counter++, (long)time(NULL));
    int out = open(staging->data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) return fail_errno("staging an upload");
    int ok = 1;
    if (source) {
        int in = open(source, O_RDONLY | O_CLOEXEC);
        if (in < 0) {
            ok = fail_errno(source);
        } else {
            char *chunk = malloc(CHUNK);
            ssize_t n;
            while ((n = read(in, chunk, CHUNK)) > 0) {
                if (write(out, chunk, (size_t)n) != n) {
                    ok = fail_errno("staging an upload");
                    break;
                }
            }
            if (n < 0) ok = fail_errno(source);
            free(chunk);
            close(in);
        }
    }
    close(out);
    if (!ok) unlink(staging->data);
    return ok;
}

// x where r is set (0644 -> 0755), or no x bit; 0 with errno set when the file cannot be changed.
static int set_executable(const char *path, int executable) {
    struct stat info;
    if (stat(path, &info) != 0) return 0;
    mode_t mode = info.st_mode & 07777;
    mode = executable ? mode | ((mode & 0444) >> 2) : mode & ~(mode_t)0111;
    return chmod(path, mode) == 0;
}

// Whether `item` asks for the executable bit (`"executable": true`).
static int wants_executable(const JValue *item) {
    const JValue *value = get(item, "executable");
    return value && value->type == J_BOOL && value->boolean;
}

static void set_date(const char *path, const JValue *modified) {
    if (!modified || modified->type != J_NUMBER) return;
    double seconds = modified->number;
    if (!(seconds > -1e11 && seconds < 1e11)) return;
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = (time_t)seconds;
    long nanos = (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (nanos < 0) nanos = 0;
    times[0].tv_nsec = times[1].tv_nsec = nanos;
    utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW);
}

static int m_create(const JValue *params, Buffer *b) {
    const JValue *template = get(params, "template");
    const char *parent = get_string(template, "parent");
    const JValue *filename = get(template, "filename");
    const char *kind = get_string(template, "kind");
    if (!parent || !filename || filename->type != J_STRING || !kind) return fail("invalidArgument", "no parent, filename or kind");
    if (!valid_name(filename->string, filename->length)) return fail("invalidFilename", "unsafe name");
    int replay = has_string_in(params, "options", "mayAlreadyExist");
    Buffer folder = {0}, target = {0}, identifier = {0}, staging = {0};
    int ok = 0;
    if (!folder_path(parent, &folder)) goto done;
    appendf(&target, "%s/%s", folder.data, filename->string);
    child_identifier(parent, filename->string, &identifier);
    if (!strcmp(kind, "folder")) {
        if (mkdir(target.data, 0755) != 0) {
            if (errno == EEXIST) {
                if (!(replay && is_kind(target.data, S_IFDIR))) {
                    fail("filenameCollision", "'%s' exists", filename->string);
                    goto done;
                }
            } else {
                fail_errno(identifier.data);
                goto done;
            }
        }
    } else if (!strcmp(kind, "file")) {
        const char *contents = get_string(params, "contents");
        if (!stage(folder.data, contents, &staging)) goto done;
        if (wants_executable(template) && !set_executable(staging.data, 1)) {
            fail_errno(identifier.data);
            unlink(staging.data);
            goto done;
        }
        int result;
        if (replay && is_kind(target.data, S_IFREG)) result = rename(staging.data, target.data);
        else result = link(staging.data, target.data);
        int saved = errno;
        unlink(staging.data);
        errno = saved;
        if (result != 0) {
            if (errno == EEXIST) fail("filenameCollision", "'%s' exists", filename->string);
            else fail_errno(identifier.data);
            goto done;
        }
        set_date(target.data, get(template, "modified"));
    } else {
        fail("notSupported", "this store holds files and folders only");
        goto done;
    }
    append(b, "{\"item\":", 8);
    if (!describe(b, identifier.data, target.data)) goto done;
    append(b, "}", 1);
    ok = 1;
done:
    free(folder.data);
    free(target.data);
    free(identifier.data);
    free(staging.data);
    return ok;
}

static int m_modify(const JValue *params, Buffer *b) {
    const JValue *item = get(params, "item");
    const char *identifier = get_string(item, "identifier");
    const JValue *base = get(params, "baseVersion");
    if (!identifier || !base) return fail("invalidArgument", "no identifier or base version");
    Buffer path = {0}, folder = {0}, target = {0}, newIdentifier = {0}, staging = {0}, dir = {0};
    int ok = 0;
    if (!path_of(identifier, &path)) goto done;
    struct stat info;
    if (lstat(path.data, &info) != 0) {
        fail_errno(identifier);
        goto done;
    }
    if (!same_content(path.data, base)) {
        fail("versionOutOfDate", "'%s' changed in the store since the base version", identifier);
        goto done;
    }
    append(&newIdentifier, identifier, strlen(identifier));
    if (has_string_in(params, "changedFields", "contents") && S_ISREG(info.st_mode)) {
        append(&dir, path.data, (size_t)(strrchr(path.data, '/') - path.data));
        if (!stage(dir.data, get_string(params, "contents"), &staging)) goto done;
        // New contents keep the file's x bit unless the flags change too.
        int executable = has_string_in(params, "changedFields", "fileSystemFlags") ? wants_executable(item) : (info.st_mode & S_IXUSR) != 0;
        if ((executable && !set_executable(staging.data, 1)) || rename(staging.data, path.data) != 0) {
            fail_errno(identifier);
            unlink(staging.data);
            goto done;
        }
    }
    if (has_string_in(params, "changedFields", "contentModificationDate")) set_date(path.data, get(item, "modified"));
    if (has_string_in(params, "changedFields", "fileSystemFlags") && !has_string_in(params, "changedFields", "contents") && S_ISREG(info.st_mode)
        && !set_executable(path.data, wants_executable(item))) {
        fail_errno(identifier);
        goto done;
    }
    int renaming = has_string_in(params, "changedFields", "filename");
    int moving = has_string_in(params, "changedFields", "parentItemIdentifier");
    if (renaming || moving) {
        const JValue *filename = get(item, "filename");
        if (!filename || filename->type != J_STRING || !valid_name(filename->string, filename->length)) {
            fail("invalidFilename", "unsafe name");
            goto done;
        }
        Buffer parent = {0};
        if (moving && get_string(item, "parent")) append(&parent, get_string(item, "parent"), strlen(get_string(item, "parent")));
        else parent_of(identifier, &parent);
        int found = folder_path(parent.data, &folder);
        if (found) {
            appendf(&target, "%s/%s", folder.data, filename->string);
            child_identifier(parent.data, filename->string, &newIdentifier);
        }
        free(parent.data);
        if (!found) goto done;
        if (strcmp(target.data, path.data)) {
            size_t n = path.length;
            if (S_ISDIR(info.st_mode) && !strncmp(folder.data, path.data, n) && (folder.data[n] == '/' || folder.data[n] == 0)) {
                fail("invalidArgument", "a folder cannot move into itself");
                goto done;
            }
            struct stat existing;
            if (lstat(target.data, &existing) == 0) {
                fail("filenameCollision", "'%s' exists", filename->string);
                goto done;
            }
            if (rename(path.data, target.data) != 0) {
                fail_errno(identifier);
                goto done;
            }
            path.length = 0;
            append(&path, target.data, target.length);
        }
    }
    append(b, "{\"item\":", 8);
    if (!describe(b, newIdentifier.data, path.data)) goto done;
    append(b, "}", 1);
    ok = 1;
done:
    free(path.data);
    free(folder.data);
    free(target.data);
    free(newIdentifier.data);
    free(staging.data);
    free(dir.data);
    return ok;
}

static int remove_entry(const char *path, const struct stat *info, int flag, struct FTW *ftw) {
    (void)info;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int m_delete(const JValue *params, Buffer *b) {
    const char *identifier = get_string(params, "identifier");
    const JValue *base = get(params, "baseVersion");
    if (!identifier) return fail("invalidArgument", "no identifier");
    if (!strcmp(identifier, ROOT_ID)) return fail("deletionRejected", "the root cannot be deleted");
    Buffer path = {0};
    int ok = 0;
    if (!path_of(identifier, &path)) goto done;
    struct stat info;
    if (lstat(path.data, &info) != 0) {
        fail_errno(identifier);
        goto done;
    }
    if (base && base->type == J_OBJECT && !same_content(path.data, base)) {
        fail("versionOutOfDate", "'%s' changed in the store since the base version", identifier);
        goto done;
    }
    int result;
    if (S_ISDIR(info.st_mode)) {
        result = has_string_in(params, "options", "recursive") ? nftw(path.data, remove_entry, 16, FTW_DEPTH | FTW_PHYS) : rmdir(path.data);
    } else {
        result = unlink(path.data);
    }
    if (result != 0) {
        if (errno == EEXIST) errno = ENOTEMPTY;
        fail_errno(identifier);
        goto done;
    }
    append(b, "{}", 2);
    ok = 1;
done:
    free(path.data);
    return ok;
}

// MARK: The loop

static const char *capabilities =
    "{\"changeFeed\":false,\"thumbnails\":false,\"rangedReads\":true,\"serverSideMove\":true,\"symlinks\":false,"
    "\"creatableKinds\":[\"file\",\"folder\"],\"pathDerivedIdentifiers\":true,\"fileSystemFlags\":true}";

int main(void) {
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, stdin)) > 0) {
        Parser parser = {line, line + length, 0};
        JValue message;
        if (!parse_value(&parser, &message, 0) || message.type != J_OBJECT) {
            free_value(&message);
            continue;
        }
        const char *method = get_string(&message, "method");
        const JValue *idValue = get(&message, "id");
        long long id = idValue && idValue->type == J_NUMBER ? idValue->integer : 0;
        const JValue *params = get(&message, "params");
        Buffer reply = {0};
        appendf(&reply, "{\"id\":%lld,\"result\":", id);
        int ok = 1, answer = 1;
        failure.code = NULL;
        if (!method || !strcmp(method, "cancel")) {
            answer = 0;  // requests run one at a time: nothing to cancel
        } else if (!strcmp(method, "hello")) {
            appendf(&reply, "{\"version\":%d,\"name\":\"cfolder\",\"capabilities\":%s}", has_number_in(params, "versions", 1) ? 1 : 0, capabilities);
        } else if (!strcmp(method, "describe")) {
            append(&reply,
                "{\"summary\":\"a local folder, through the reference external backend in C\",\"options\":[{\"name\":\"root\","
                "\"help\":\"The folder to serve.\",\"type\":\"path\",\"required\":true}]}",
                strlen("{\"summary\":\"a local folder, through the reference external backend in C\",\"options\":[{\"name\":\"root\","
                       "\"help\":\"The folder to serve.\",\"type\":\"path\",\"required\":true}]}"));
        } else if (!strcmp(method, "open")) {
            const char *folder = get_string(get(params, "options"), "root");
            struct stat info;
            if (!folder || stat(folder, &info) != 0 || !S_ISDIR(info.st_mode)) {
                ok = fail("invalidArgument", "--root must name a folder");
            } else {
                free(root);
                root = strdup(folder);
                size_t n = strlen(root);
                while (n > 1 && root[n - 1] == '/') root[--n] = 0;
                append(&reply, "{}", 2);
            }
        } else if (!root) {
            ok = fail("invalidArgument", "the store is not open");
        } else if (!strcmp(method, "item")) {
            ok = m_item(params, &reply);
        } else if (!strcmp(method, "enumerate")) {
            ok = m_enumerate(params, &reply);
        } else if (!strcmp(method, "fetch")) {
            ok = m_fetch(id, params, &reply);
        } else if (!strcmp(method, "create")) {
            ok = m_create(params, &reply);
        } else if (!strcmp(method, "modify")) {
            ok = m_modify(params, &reply);
        } else if (!strcmp(method, "delete")) {
            ok = m_delete(params, &reply);
        } else {
            ok = fail("notSupported", "no method '%s'", method);
        }
        if (answer) {
            if (ok) {
                append(&reply, "}", 1);
            } else {
                reply.length = 0;
                appendf(&reply, "{\"id\":%lld,\"error\":{\"code\":\"%s\",\"message\":", id, failure.code ? failure.code : "localIOFailure");
                json_string(&reply, failure.message, strlen(failure.message));
                append(&reply, "}}", 2);
            }
            send_line(&reply);
        }
        free(reply.data);
        free_value(&message);
    }
    free(line);
    return 0;
}
