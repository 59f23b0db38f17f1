// fileprovider-guard: keeps a fanotify pre-content group from failing open when its owner dies.
//
// When the last holder of a pre-content group closes it, the kernel allows every pending and
// later access, and a program reading a file whose contents were never fetched gets zeros. The
// owner (`serve`) starts this process with a duplicate of the group, so the group outlives the
// owner. While the owner lives, this process only waits (and answers "busy" on its takeover
// socket, <run folder>/guard-<pid>.sock, which it listens on from the start). When the owner is
// gone (its end of the channel closes: exit, crash or kill -9), it
//   1. answers FAN_DENY_ERRNO(EIO) to every event the owner had read and not answered (it
//      writes a response for every descriptor number the owner could have had: the kernel
//      matches responses by the event's descriptor number and refuses the others with ENOENT),
//   2. detaches every mount the group marks (and the private anchor under it), so no program
//      can open anything there any more,
//   3. denies what the owner may have read under descriptor numbers up to the system's limit
//      (in case the owner raised its limit without saying so),
//   4. keeps answering FAN_DENY_ERRNO(EIO) to every new event (programs that had opened a file
//      before the detach), and hands the group to a new owner that asks on the socket,
//   5. exits when a new owner took the group, or when the group marks nothing any more (the
//      detached mounts' last users are gone, so no event can come).
//
// Started as: fileprovider-guard RUN_FOLDER FD_LIMIT, with the group as descriptor 3 and one
// end of a SOCK_SEQPACKET socket pair (the channel) as descriptor 4. FD_LIMIT is the owner's
// RLIMIT_NOFILE: every event descriptor the owner read is below it. Messages on the channel
// (the owner's side, one per packet):
//   guardian -> owner  "ready <pid>"   once it is set up
//   owner -> guardian  "limit <n>"     the owner's descriptor limit changed
// Takeover, on the listening socket (the caller must have this process's user id):
//   new owner -> guardian  "take <fd-limit>"
//   guardian -> new owner  "busy" while its owner lives, or
//                          "group", with the group's descriptor attached (SCM_RIGHTS)
//   new owner -> guardian  "done", once the new owner's own guardian holds the group; the old
//                          guardian exits. If the connection closes without "done", the new
//                          owner died: its unanswered events are denied as in 1 and the old
//                          guardian goes on guarding.
// The log is <run folder>/guard.log. SIGINT, SIGTERM, SIGHUP and SIGQUIT are ignored: stopping
// this process while it guards is what lets programs read zeros. For the same reason it sets its
// oom_score_adj to -1000 and, on a unified cgroup v2 hierarchy, moves into a cgroup of its own
// (standApart), so that only a kill of it by its own pid takes it down with its owner.
#include "CSystemShims.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

enum { GROUP = 3, CHANNEL = 4, MAX_MOUNTS = 256 };

static int logFD = -1;
static char socketPath[PATH_MAX];

static void say(const char *format, ...) {
    if (logFD < 0) return;
    char line[1024];
    time_t now = time(NULL);
    struct tm parts;
    gmtime_r(&now, &parts);
    int length = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ", &parts);
    length += snprintf(line + length, sizeof line - length, " fileprovider-guard[%d]: ", (int)getpid());
    va_list arguments;
    va_start(arguments, format);
    length += vsnprintf(line + length, sizeof line - length, format, arguments);
    va_end(arguments);
    if (length > (int)sizeof line - 2) length = (int)sizeof line - 2;
    line[length++] = '\n';
    ssize_t ignored = write(logFD, line, length);
    (void)ignored;
}

/// Denies every pending event the owner may have read: one response per descriptor number
/// from `from` to below `limit` (more than one per number when the owner reused a number).
/// Returns how many events it denied. 1,048,576 numbers take about 0.45 s.
static long denyOwnersEvents(long from, long limit) {
    long denied = 0;
    for (long fd = from; fd < limit; fd++) {
        for (int again = 0; again < 64 && fp_precontent_respond(GROUP, (int)fd, EIO) == 0; again++) denied++;
    }
    return denied;
}

/// Reads and denies everything queued; returns how many events.
static long denyQueued(void) {
    fp_precontent_event events[64];
    long denied = 0;
    for (;;) {
        int count = fp_precontent_read(GROUP, events, 64);
        if (count <= 0) return denied;
        for (int index = 0; index < count; index++) {
            if (events[index].fd < 0) continue;
            fp_precontent_respond(GROUP, events[index].fd, EIO);
            close(events[index].fd);
            denied++;
        }
    }
}

/// The ids of the mounts the group marks with events (not ignore-only marks) into `ids`;
/// their count, or -1 when the group's marks cannot be read. `*other` counts inode and file
/// system marks with events.
static int markedMounts(unsigned long long *ids, int capacity, int *other) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", GROUP);
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    char line[1024];
    int count = 0;
    *other = 0;
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, "fanotify ", 9) != 0) continue;
        unsigned long long mask = 0, id = 0;
        int hasMount = 0;
        for (char *token = strtok(line + 9, " \n"); token; token = strtok(NULL, " \n")) {
            if (strncmp(token, "mask:", 5) == 0) mask = strtoull(token + 5, NULL, 16);
            else if (strncmp(token, "mnt_id:", 7) == 0) {
                id = strtoull(token + 7, NULL, 16);
                hasMount = 1;
            }
        }
        if (mask == 0) continue;
        if (!hasMount) (*other)++;
        else if (count < capacity) ids[count++] = id;
    }
    fclose(file);
    return count;
}

/// Decodes mountinfo's octal escapes (\040 for a space) in place.
static void unescape(char *text) {
    char *out = text;
    for (char *in = text; *in; in++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '7' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 3;
        } else {
            *out++ = *in;
        }
    }
    *out = 0;
}

/// Detaches the mount with id `id` at `path` if it is still the topmost mount there.
static int detachIfTop(unsigned long long id, const char *path) {
    unsigned long long top = 0;
    int isRoot = 0;
    if (fp_mount_identity(path, 0, &top, &isRoot) != 0 || !isRoot || top != id) return 0;
    if (fp_detach_mount(path) != 0) {
        say("cannot detach %s: %s", path, strerror(errno));
        return 0;
    }
    return 1;
}

/// Detaches every attached mount the group marks, and the private anchor right under each
/// (the bind of the replica folder onto itself that on-access replicas mount on); returns how
/// many mounts it detached.
static int detachMarkedMounts(void) {
    unsigned long long ids[MAX_MOUNTS];
    int other = 0;
    int count = markedMounts(ids, MAX_MOUNTS, &other);
    if (count <= 0) return 0;
    FILE *file = fopen("/proc/self/mountinfo", "re");
    if (!file) return 0;
    // mountinfo: id parent major:minor root mount-point options ...
    struct entry {
        unsigned long long id, parent;
        char *point;
    } *entries = NULL;
    int total = 0, capacity = 0;
    char *line = NULL;
    size_t lineCapacity = 0;
    while (getline(&line, &lineCapacity, file) > 0) {
        unsigned long long id, parent;
        int pointStart = 0, pointEnd = 0;
        if (sscanf(line, "%llu %llu %*s %*s %n%*s%n", &id, &parent, &pointStart, &pointEnd) != 2 || pointEnd <= pointStart) continue;
        if (total == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            struct entry *grown = realloc(entries, capacity * sizeof *entries);
            if (!grown) break;
            entries = grown;
        }
        line[pointEnd] = 0;
        char *point = strdup(line + pointStart);
        if (!point) break;
        unescape(point);
        entries[total++] = (struct entry){.id = id, .parent = parent, .point = point};
    }
    free(line);
    fclose(file);
    // The kernel gives a freed mount's id to the next new mount: a detached mount of ours whose
    // last user left while mountinfo was read may have passed its id on. A mark still there
    // after the read means the mount was alive all along, so the mountinfo entry is ours
    // (nothing attached that only its dead owner could detach is freed meanwhile).
    unsigned long long again[MAX_MOUNTS];
    int confirmed = markedMounts(again, MAX_MOUNTS, &other);
    int kept = 0;
    for (int mark = 0; mark < count; mark++) {
        for (int index = 0; index < confirmed; index++) {
            if (again[index] == ids[mark]) {
                ids[kept++] = ids[mark];
                break;
            }
        }
    }
    count = kept;
    int detached = 0;
    for (int index = 0; index < total; index++) {
        int marked = 0;
        for (int mark = 0; mark < count; mark++) marked |= ids[mark] == entries[index].id;
        if (!marked) continue;
        const char *point = entries[index].point;
        if (!detachIfTop(entries[index].id, point)) continue;
        detached++;
        say("detached %s (mount %llu)", point, entries[index].id);
        for (int under = 0; under < total; under++) {
            if (entries[under].id == entries[index].parent && strcmp(entries[under].point, point) == 0
                && detachIfTop(entries[under].id, point)) {
                detached++;
                say("detached the anchor under %s (mount %llu)", point, entries[under].id);
            }
        }
    }
    for (int index = 0; index < total; index++) free(entries[index].point);
    free(entries);
    return detached;
}

/// Whether the group still marks anything that can raise an event.
static int stillMarked(void) {
    unsigned long long ids[MAX_MOUNTS];
    int other = 0;
    int count = markedMounts(ids, MAX_MOUNTS, &other);
    return count != 0 || other != 0;  // -1 (unreadable) counts as marked
}

/// Serves one connection on the takeover socket. Returns 1 when the group was handed over.
static int handOver(int connection, long *limit) {
    long uid = fp_channel_peer_uid(connection);
    if (uid < 0 || uid != (long)geteuid()) {
        say("refused a takeover by user %ld", uid);
        return 0;
    }
    char message[64] = {0};
    int ignoredFD = -1;
    long length = fp_channel_receive(connection, message, sizeof message - 1, &ignoredFD, 5000);
    if (ignoredFD >= 0) close(ignoredFD);
    if (length <= 5 || strncmp(message, "take ", 5) != 0) return 0;
    long newLimit = strtol(message + 5, NULL, 10);
    if (newLimit <= 0 || newLimit > 1 << 24) newLimit = 1 << 20;
    if (fp_channel_send(connection, "group", 5, GROUP) != 0) return 0;
    length = fp_channel_receive(connection, message, sizeof message - 1, &ignoredFD, -1);
    if (ignoredFD >= 0) close(ignoredFD);
    if (length == 4 && strncmp(message, "done", 4) == 0) return 1;
    // The new owner went away before its guardian held the group: what it read is ours to deny.
    *limit = newLimit;
    long denied = denyOwnersEvents(0, newLimit);
    int detached = detachMarkedMounts();
    say("the new owner went away during the takeover; denied %ld of its events, detached %d mounts", denied, detached);
    return 0;
}

/// Answers a takeover request while the owner lives: "busy".
static void refuse(int connection) {
    char message[64] = {0};
    int ignoredFD = -1;
    fp_channel_receive(connection, message, sizeof message - 1, &ignoredFD, 1000);
    if (ignoredFD >= 0) close(ignoredFD);
    fp_channel_send(connection, "busy", 4, -1);
}

/// The urgent work once the owner is gone, then the slow part of it.
static void defend(long limit) {
    long denied = denyOwnersEvents(0, limit);
    int detached = detachMarkedMounts();
    denied += denyQueued();
    say("owner gone: denied %ld events, detached %d mounts", denied, detached);
    // An owner that raised its descriptor limit without saying so may have read events with
    // higher numbers: up to the system's limit (at most 2^20), after the urgent work. A new
    // owner asking for the group meanwhile waits in the listening socket's queue.
    long systemLimit = 0;
    FILE *limits = fopen("/proc/sys/fs/nr_open", "re");
    if (limits) {
        if (fscanf(limits, "%ld", &systemLimit) != 1) systemLimit = 0;
        fclose(limits);
    }
    if (systemLimit > 1 << 20) systemLimit = 1 << 20;
    if (systemLimit > limit) {
        long late = denyOwnersEvents(limit, systemLimit);
        if (late > 0) say("denied %ld events with descriptors at or above the owner's limit %ld", late, limit);
    }
}

/// Makes this process hard to take down with its owner, for one kill of both is what lets
/// programs read zeros: the OOM killer never picks it (oom_score_adj -1000; it holds a few
/// kilobytes), and on a unified cgroup v2 hierarchy it leaves its owner's cgroup for
/// /sys/fs/cgroup/fileprovider-guard, so a kill of the owner's whole cgroup (`systemctl kill`
/// of the unit, an OOM kill of a cgroup with memory.oom.group, the end of a login session)
/// misses it. Where cgroups are not unified (cgroup v1 or hybrid, as in many containers) it
/// stays where it is. Failures are logged, never fatal.
static void standApart(void) {
    int adjust = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adjust < 0 || write(adjust, "-1000", 5) != 5) say("cannot set oom_score_adj to -1000: %s", strerror(errno));
    if (adjust >= 0) close(adjust);
    struct statfs system;
    if (statfs("/sys/fs/cgroup", &system) != 0 || system.f_type != 0x63677270 /* CGROUP2_SUPER_MAGIC */) return;
    const char *own = "/sys/fs/cgroup/fileprovider-guard";
    if (mkdir(own, 0755) != 0 && errno != EEXIST) {
        say("cannot make the cgroup %s (%s): a kill of the owner's cgroup takes this process too", own, strerror(errno));
        return;
    }
    char path[PATH_MAX], pid[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", own);
    int length = snprintf(pid, sizeof pid, "%d", (int)getpid());
    int procs = open(path, O_WRONLY | O_CLOEXEC);
    if (procs < 0 || write(procs, pid, length) != length) {
        say("cannot move into the cgroup %s (%s): a kill of the owner's cgroup takes this process too", own, strerror(errno));
    }
    if (procs >= 0) close(procs);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fileprovider-guard RUN_FOLDER FD_LIMIT (group on fd 3, channel on fd 4)\n");
        return 2;
    }
    const int ignoredSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
    for (unsigned index = 0; index < sizeof ignoredSignals / sizeof ignoredSignals[0]; index++) {
        signal(ignoredSignals[index], SIG_IGN);
    }
    const char *runFolder = argv[1];
    long limit = strtol(argv[2], NULL, 10);
    if (limit <= 0 || limit > 1 << 24) limit = 1 << 20;
    char logPath[PATH_MAX];
    snprintf(logPath, sizeof logPath, "%s/guard.log", runFolder);
    logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (!fp_is_fanotify(GROUP)) {
        say("descriptor %d is not a fanotify group; exiting", GROUP);
        return 2;
    }
    standApart();
    // Listening from the start: a new owner that comes while this process still works for
    // the old one waits in the queue instead of finding no guardian and starting a new group.
    snprintf(socketPath, sizeof socketPath, "%s/guard-%d.sock", runFolder, (int)getpid());
    int listener = fp_channel_listen(socketPath);
    if (listener < 0) say("cannot listen on %s (%s): no takeover possible", socketPath, strerror(errno));
    char ready[32];
    int readyLength = snprintf(ready, sizeof ready, "ready %d", (int)getpid());
    if (fp_channel_send(CHANNEL, ready, readyLength, -1) != 0) {
        say("cannot reach the owner (%s); exiting", strerror(errno));
        // Nobody read an event of ours yet: closing the group is what the owner's death does too.
        if (listener >= 0) unlink(socketPath);
        return 2;
    }

    // The owner lives: wait for the channel to close; answer takeover requests "busy".
    for (;;) {
        struct pollfd waits[2] = {{.fd = CHANNEL, .events = POLLIN}, {.fd = listener, .events = POLLIN}};
        if (poll(waits, listener >= 0 ? 2 : 1, -1) < 0) continue;
        if (waits[0].revents) {
            char message[64] = {0};
            int ignoredFD = -1;
            long length = fp_channel_receive(CHANNEL, message, sizeof message - 1, &ignoredFD, 0);
            if (ignoredFD >= 0) close(ignoredFD);
            if (length <= 0 && !(length < 0 && (errno == EINTR || errno == EAGAIN || errno == ETIMEDOUT))) break;
            if (length > 6 && strncmp(message, "limit ", 6) == 0) {
                long value = strtol(message + 6, NULL, 10);
                if (value > 0 && value <= 1 << 24) limit = value;
            }
            continue;
        }
        if (listener >= 0 && (waits[1].revents & POLLIN)) {
            int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
            if (connection >= 0) {
                refuse(connection);
                close(connection);
            }
        }
    }
    close(CHANNEL);

    // The owner is gone.
    defend(limit);
    struct timespec lastCheck;
    clock_gettime(CLOCK_MONOTONIC, &lastCheck);
    for (;;) {
        struct pollfd waits[2] = {{.fd = GROUP, .events = POLLIN}, {.fd = listener, .events = POLLIN}};
        int ready = poll(waits, listener >= 0 ? 2 : 1, 1000);
        if (ready < 0) {
            // Never give up guarding (exiting would release the group): wait and go on.
            struct timespec pause = {.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        if (ready > 0 && (waits[0].revents & POLLIN)) denyQueued();
        if (ready > 0 && listener >= 0 && (waits[1].revents & POLLIN)) {
            int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
            if (connection >= 0) {
                int handed = handOver(connection, &limit);
                close(connection);
                if (handed) {
                    say("handed the group over to a new owner");
                    unlink(socketPath);
                    return 0;
                }
            }
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long elapsed = (now.tv_sec - lastCheck.tv_sec) * 1000LL + (now.tv_nsec - lastCheck.tv_nsec) / 1000000;
        if (elapsed >= 1000) {
            lastCheck = now;
            detachMarkedMounts();
            if (!stillMarked()) {
                denyQueued();
                say("nothing is marked any more: exiting");
                break;
            }
        }
    }
    if (listener >= 0) unlink(socketPath);
    return 0;
}
