#include "fp_dbus.h"

#include "fp_library.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

// sd-bus's types, as <systemd/sd-bus.h> declares them: opaque but for sd_bus_error, whose layout
// is part of the ABI. The shim is built without the header, so building needs no libsystemd-dev.
typedef struct sd_bus sd_bus;
typedef struct sd_bus_message sd_bus_message;
typedef struct sd_bus_slot sd_bus_slot;
typedef struct {
    const char *name;
    const char *message;
    int need_free;
} sd_bus_error;
typedef int (*sd_bus_message_handler_t)(sd_bus_message *m, void *userdata, sd_bus_error *ret_error);

static struct {
    int (*open_user)(sd_bus **);
    int (*request_name)(sd_bus *, const char *, uint64_t);
    int (*add_object)(sd_bus *, sd_bus_slot **, const char *, sd_bus_message_handler_t, void *);
    sd_bus_slot *(*slot_unref)(sd_bus_slot *);
    int (*is_method_call)(sd_bus_message *, const char *, const char *);
    const char *(*get_member)(sd_bus_message *);
    const char *(*get_interface)(sd_bus_message *);
    const char *(*get_signature)(sd_bus_message *, int);
    int (*read)(sd_bus_message *, const char *, ...);
    int (*reply_return)(sd_bus_message *, const char *, ...);
    int (*reply_errorf)(sd_bus_message *, const char *, const char *, ...);
    sd_bus_message *(*message_ref)(sd_bus_message *);
    sd_bus_message *(*message_unref)(sd_bus_message *);
    int (*emit_signal)(sd_bus *, const char *, const char *, const char *, const char *, ...);
    int (*process)(sd_bus *, sd_bus_message **);
    int (*get_fd)(sd_bus *);
    int (*get_events)(sd_bus *);
    int (*get_timeout)(sd_bus *, uint64_t *);
    int (*flush)(sd_bus *);
    sd_bus *(*flush_close_unref)(sd_bus *);
} sd;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fp_library_load loaded;

static void *symbol(void *library, const char *name) {
    return fp_library_symbol(&loaded, library, "libsystemd.so.0", name, "");
}

static void load(void) {
    // FILEPROVIDER_LIBSYSTEMD names another file (the tests name one that does not exist to see
    // what a machine without libsystemd says).
    void *library = fp_library_open(&loaded, "FILEPROVIDER_LIBSYSTEMD", "libsystemd.so.0");
    if (library == NULL) return;
    sd.open_user = (int (*)(sd_bus **))symbol(library, "sd_bus_open_user");
    sd.request_name = (int (*)(sd_bus *, const char *, uint64_t))symbol(library, "sd_bus_request_name");
    sd.add_object = (int (*)(sd_bus *, sd_bus_slot **, const char *, sd_bus_message_handler_t, void *))symbol(
        library, "sd_bus_add_object");
    sd.slot_unref = (sd_bus_slot * (*)(sd_bus_slot *)) symbol(library, "sd_bus_slot_unref");
    sd.is_method_call = (int (*)(sd_bus_message *, const char *, const char *))symbol(library, "sd_bus_message_is_method_call");
    sd.get_member = (const char *(*)(sd_bus_message *))symbol(library, "sd_bus_message_get_member");
    sd.get_interface = (const char *(*)(sd_bus_message *))symbol(library, "sd_bus_message_get_interface");
    sd.get_signature = (const char *(*)(sd_bus_message *, int))symbol(library, "sd_bus_message_get_signature");
    sd.read = (int (*)(sd_bus_message *, const char *, ...))symbol(library, "sd_bus_message_read");
    sd.reply_return = (int (*)(sd_bus_message *, const char *, ...))symbol(library, "sd_bus_reply_method_return");
    sd.reply_errorf = (int (*)(sd_bus_message *, const char *, const char *, ...))symbol(library, "sd_bus_reply_method_errorf");
    sd.message_ref = (sd_bus_message * (*)(sd_bus_message *)) symbol(library, "sd_bus_message_ref");
    sd.message_unref = (sd_bus_message * (*)(sd_bus_message *)) symbol(library, "sd_bus_message_unref");
    sd.emit_signal = (int (*)(sd_bus *, const char *, const char *, const char *, const char *, ...))symbol(
        library, "sd_bus_emit_signal");
    sd.process = (int (*)(sd_bus *, sd_bus_message **))symbol(library, "sd_bus_process");
    sd.get_fd = (int (*)(sd_bus *))symbol(library, "sd_bus_get_fd");
    sd.get_events = (int (*)(sd_bus *))symbol(library, "sd_bus_get_events");
    sd.get_timeout = (int (*)(sd_bus *, uint64_t *))symbol(library, "sd_bus_get_timeout");
    sd.flush = (int (*)(sd_bus *))symbol(library, "sd_bus_flush");
    sd.flush_close_unref = (sd_bus * (*)(sd_bus *)) symbol(library, "sd_bus_flush_close_unref");
}

const char *fp_dbus_load_error(void) {
    pthread_once(&once, load);
    return loaded.failure;
}

static char *copy(const char *text) {
    if (text == NULL) return NULL;
    size_t length = strlen(text);
    char *result = malloc(length + 1);
    if (result != NULL) memcpy(result, text, length + 1);
    return result;
}

/// An answer or a signal waiting for the bus thread to send it.
typedef struct Outgoing {
    struct Outgoing *next;
    sd_bus_message *call; // NULL for a signal
    char *first;          // the reply's value, the error's name, the signal's member
    char *second;         // the error's message, the signal's first string
    char *third;          // the signal's second string
    int isError;
} Outgoing;

struct FPDBus {
    sd_bus *bus;
    sd_bus_slot *slot;
    char *path;
    char *interface;
    char *introspection;
    fp_dbus_handler handler;
    void *context;
    int wake; // an eventfd: written when something is queued or on stop
    // Lock order: only this lock; sd-bus is called under it only once fp_dbus_run returned.
    pthread_mutex_t lock;
    Outgoing *head, *tail;
    int stopping;
    int finished;
};

static void freeOutgoing(Outgoing *item) {
    free(item->first);
    free(item->second);
    free(item->third);
    free(item);
}

static int onMessage(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)ret_error;
    FPDBus *bus = userdata;
    if (sd.is_method_call(m, "org.freedesktop.DBus.Introspectable", "Introspect") > 0) {
        sd.reply_return(m, "s", bus->introspection);
        return 1;
    }
    const char *interface = sd.get_interface(m);
    const char *member = sd.get_member(m);
    if (member == NULL || sd.is_method_call(m, NULL, NULL) <= 0) return 0;
    if (interface != NULL && strcmp(interface, bus->interface) != 0) return 0;
    const char *argument = NULL;
    int flag = -1;
    const char *signature = sd.get_signature(m, 1);
    if (signature != NULL && strcmp(signature, "s") == 0 && sd.read(m, "s", &argument) < 0) argument = NULL;
    if (signature != NULL && strcmp(signature, "sb") == 0 && sd.read(m, "sb", &argument, &flag) < 0) {
        argument = NULL;
        flag = -1;
    }
    sd.message_ref(m);
    if (bus->handler(bus->context, m, member, argument, flag) == 0) {
        sd.message_unref(m);
        return 0;
    }
    return 1;
}

FPDBus *fp_dbus_open(
    const char *name, const char *path, const char *interface, const char *introspection, fp_dbus_handler handler,
    void *context, char **error) {
    *error = NULL;
    if (fp_dbus_load_error() != NULL) {
        *error = copy(loaded.failure);
        return NULL;
    }
    FPDBus *bus = calloc(1, sizeof *bus);
    if (bus == NULL) {
        *error = copy("out of memory");
        return NULL;
    }
    bus->wake = -1;
    pthread_mutex_init(&bus->lock, NULL);
    bus->path = copy(path);
    bus->interface = copy(interface);
    bus->introspection = copy(introspection);
    bus->handler = handler;
    bus->context = context;
    char message[512];
    int r = sd.open_user(&bus->bus);
    if (r < 0) {
        snprintf(message, sizeof message, "cannot connect to the session bus: %s", strerror(-r));
        goto failed;
    }
    r = sd.request_name(bus->bus, name, 0);
    if (r < 0) {
        if (r == -EEXIST || r == -EALREADY) {
            snprintf(message, sizeof message, "the name %s is owned by another connection (another serve?)", name);
        } else {
            snprintf(message, sizeof message, "cannot claim the name %s on the session bus: %s", name, strerror(-r));
        }
        goto failed;
    }
    r = sd.add_object(bus->bus, &bus->slot, path, onMessage, bus);
    if (r < 0) {
        snprintf(message, sizeof message, "cannot serve the object %s: %s", path, strerror(-r));
        goto failed;
    }
    bus->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (bus->wake < 0) {
        snprintf(message, sizeof message, "eventfd: %s", strerror(errno));
        goto failed;
    }
    return bus;
failed:
    *error = copy(message);
    bus->finished = 1;
    fp_dbus_free(bus);
    return NULL;
}

/// Takes everything queued (under the lock).
static Outgoing *takeQueue(FPDBus *bus, int *stopping) {
    pthread_mutex_lock(&bus->lock);
    Outgoing *items = bus->head;
    bus->head = bus->tail = NULL;
    *stopping = bus->stopping;
    pthread_mutex_unlock(&bus->lock);
    return items;
}

static void sendOutgoing(FPDBus *bus, Outgoing *item) {
    if (item->call == NULL) {
        sd.emit_signal(bus->bus, bus->path, bus->interface, item->first, "ss", item->second, item->third);
    } else if (item->isError) {
        sd.reply_errorf(item->call, item->first, "%s", item->second);
    } else {
        sd.reply_return(item->call, "s", item->first);
    }
    if (item->call != NULL) sd.message_unref(item->call);
}

int fp_dbus_run(FPDBus *bus) {
    int result = 0;
    for (;;) {
        int stopping = 0;
        Outgoing *items = takeQueue(bus, &stopping);
        while (items != NULL) {
            Outgoing *next = items->next;
            sendOutgoing(bus, items);
            freeOutgoing(items);
            items = next;
        }
        if (stopping) break;
        int r = sd.process(bus->bus, NULL);
        if (r < 0) {
            result = r;
            break;
        }
        if (r > 0) continue;
        int fd = sd.get_fd(bus->bus);
        int events = sd.get_events(bus->bus);
        if (fd < 0 || events < 0) {
            result = fd < 0 ? fd : events;
            break;
        }
        struct pollfd fds[2] = {
            {.fd = fd, .events = (short)events},
            {.fd = bus->wake, .events = POLLIN},
        };
        int timeout = -1;
        uint64_t until = UINT64_MAX;
        if (sd.get_timeout(bus->bus, &until) > 0 && until != UINT64_MAX) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            uint64_t current = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
            timeout = until <= current ? 0 : (int)((until - current + 999) / 1000);
        }
        if (poll(fds, 2, timeout) < 0 && errno != EINTR) {
            result = -errno;
            break;
        }
        if (fds[1].revents & POLLIN) {
            uint64_t count;
            (void)!read(bus->wake, &count, sizeof count);
        }
    }
    sd.flush(bus->bus);
    pthread_mutex_lock(&bus->lock);
    bus->finished = 1;
    pthread_mutex_unlock(&bus->lock);
    return result;
}

static void wake(FPDBus *bus) {
    uint64_t one = 1;
    (void)!write(bus->wake, &one, sizeof one);
}

void fp_dbus_stop(FPDBus *bus) {
    pthread_mutex_lock(&bus->lock);
    bus->stopping = 1;
    pthread_mutex_unlock(&bus->lock);
    wake(bus);
}

static void enqueue(FPDBus *bus, Outgoing *item) {
    pthread_mutex_lock(&bus->lock);
    if (bus->finished) {
        // The bus thread is gone: nothing is sent any more. (Queued while it stops: freed by
        // fp_dbus_free.)
        if (item->call != NULL) sd.message_unref(item->call);
        pthread_mutex_unlock(&bus->lock);
        freeOutgoing(item);
        return;
    }
    if (bus->tail != NULL) bus->tail->next = item; else bus->head = item;
    bus->tail = item;
    pthread_mutex_unlock(&bus->lock);
    wake(bus);
}

void fp_dbus_reply(FPDBus *bus, void *call, const char *value) {
    Outgoing *item = calloc(1, sizeof *item);
    if (item == NULL) return;
    item->call = call;
    item->first = copy(value);
    enqueue(bus, item);
}

void fp_dbus_reply_error(FPDBus *bus, void *call, const char *name, const char *message) {
    Outgoing *item = calloc(1, sizeof *item);
    if (item == NULL) return;
    item->call = call;
    item->isError = 1;
    item->first = copy(name);
    item->second = copy(message);
    enqueue(bus, item);
}

void fp_dbus_emit(FPDBus *bus, const char *member, const char *first, const char *second) {
    Outgoing *item = calloc(1, sizeof *item);
    if (item == NULL) return;
    item->first = copy(member);
    item->second = copy(first);
    item->third = copy(second);
    enqueue(bus, item);
}

void fp_dbus_free(FPDBus *bus) {
    if (bus == NULL) return;
    Outgoing *items = bus->head;
    while (items != NULL) {
        Outgoing *next = items->next;
        if (items->call != NULL) sd.message_unref(items->call);
        freeOutgoing(items);
        items = next;
    }
    if (bus->slot != NULL) sd.slot_unref(bus->slot);
    if (bus->bus != NULL) sd.flush_close_unref(bus->bus);
    if (bus->wake >= 0) close(bus->wake);
    pthread_mutex_destroy(&bus->lock);
    free(bus->path);
    free(bus->interface);
    free(bus->introspection);
    free(bus);
}
