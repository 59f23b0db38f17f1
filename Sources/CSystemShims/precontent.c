// fanotify pre-content events, the mounts of on-access replicas and the guardian's channel.
// Declared in CSystemShims.h with plain C types only: the system headers this file needs stay
// out of the module Swift imports (see the note on lsetxattr there).
#include "CSystemShims.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <dirent.h>
#include <stdlib.h>

int fp_precontent_init(int writable) {
    return fanotify_init(FAN_CLASS_PRE_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK | FAN_UNLIMITED_QUEUE | FAN_UNLIMITED_MARKS,
                         (writable ? O_RDWR : O_RDONLY) | O_LARGEFILE | O_CLOEXEC);
}

// Besides the pre-content events, a mount mark asks for notifications of writes (a program
// wrote into a partially present file) and of opens (when a file was last used): neither waits.
// Opens also wait (FAN_OPEN_PERM, files only): a small file is filled before its open returns,
// so the change time a program sees first is the one it keeps (tar compares them).
#define FP_MOUNT_EVENTS (FAN_PRE_ACCESS | FAN_OPEN_PERM | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_OPEN)
// What an ignore mark stops for a complete file: everything but the opens' notifications.
#define FP_IGNORED_EVENTS (FAN_PRE_ACCESS | FAN_OPEN_PERM | FAN_MODIFY | FAN_CLOSE_WRITE)

int fp_precontent_mark_mount(int group, int dirfd, const char *path, int add) {
    return fanotify_mark(group, (add ? FAN_MARK_ADD : FAN_MARK_REMOVE) | FAN_MARK_MOUNT, FP_MOUNT_EVENTS, dirfd, path);
}

int fp_precontent_mark_inode(int group, int dirfd, const char *path, int add) {
    return fanotify_mark(group, add ? FAN_MARK_ADD : FAN_MARK_REMOVE, FAN_PRE_ACCESS, dirfd, path);
}

int fp_precontent_ignore(int group, int dirfd, const char *path, int add, int evictable) {
    unsigned int flags = add ? FAN_MARK_ADD | FAN_MARK_IGNORE_SURV | (evictable ? FAN_MARK_EVICTABLE : 0)
                             : FAN_MARK_REMOVE | FAN_MARK_IGNORE;
    return fanotify_mark(group, flags, FP_IGNORED_EVENTS, dirfd, path);
}

int fp_precontent_read(int group, fp_precontent_event *events, int capacity) {
    if (capacity <= 0) {
        errno = EINVAL;
        return -1;
    }
    // Every event is at least FAN_EVENT_METADATA_LEN long and the kernel returns only whole
    // events, so a buffer of `capacity` times that never holds more events than fit.
    size_t size = (size_t)capacity * FAN_EVENT_METADATA_LEN;
    if (size > 64 * 1024) size = 64 * 1024;
    char buffer[64 * 1024] __attribute__((aligned(8)));
    ssize_t length = read(group, buffer, size);
    if (length < 0) return errno == EAGAIN ? 0 : -1;
    int count = 0;
    struct fanotify_event_metadata *event = (struct fanotify_event_metadata *)buffer;
    while (FAN_EVENT_OK(event, length) && count < capacity) {
        fp_precontent_event *out = &events[count++];
        out->fd = event->fd;
        out->pid = event->pid;
        out->mask = event->mask;
        out->offset = 0;
        out->count = 0;
        out->hasRange = 0;
        // Info records follow the metadata up to event_len; take the range, skip the others.
        size_t position = event->metadata_len;
        while (position + sizeof(struct fanotify_event_info_header) <= event->event_len) {
            struct fanotify_event_info_header *header = (struct fanotify_event_info_header *)((char *)event + position);
            if (header->len < sizeof *header || position + header->len > event->event_len) break;
            if (header->info_type == FAN_EVENT_INFO_TYPE_RANGE && header->len >= sizeof *header + 4 + 16) {
                unsigned long long range[2];
                memcpy(range, (char *)header + sizeof *header + 4, sizeof range);
                out->offset = range[0];
                out->count = range[1];
                out->hasRange = 1;
            }
            position += header->len;
        }
        event = FAN_EVENT_NEXT(event, length);
    }
    return count;
}

int fp_precontent_respond(int group, int eventFD, int denyErrno) {
    struct fanotify_response response = {
        .fd = eventFD,
        .response = denyErrno == 0 ? FAN_ALLOW : FAN_DENY_ERRNO(denyErrno),
    };
    return write(group, &response, sizeof response) == sizeof response ? 0 : -1;
}

int fp_is_fanotify(int fd) {
    char path[40], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(path, target, sizeof target - 1);
    if (length < 0) return 0;
    target[length] = 0;
    return strcmp(target, "anon_inode:[fanotify]") == 0;
}

// MARK: mounts

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

int fp_open_tree_clone(const char *path) {
    return (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | O_CLOEXEC);
}

int fp_mount_set_unbindable(int treeFD) {
    struct mount_attr attributes = {.propagation = MS_UNBINDABLE};
    return mount_setattr(treeFD, "", AT_EMPTY_PATH, &attributes, sizeof attributes);
}

int fp_mount_private_anchor(const char *path) {
    if (mount(path, path, NULL, MS_BIND, NULL) != 0) return -1;
    if (mount(NULL, path, NULL, MS_PRIVATE, NULL) != 0) {
        int code = errno;
        umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
        errno = code;
        return -1;
    }
    return 0;
}

int fp_move_mount(int treeFD, const char *path) {
    return (int)syscall(SYS_move_mount, treeFD, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
}

int fp_detach_mount(const char *path) { return umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW); }

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

int fp_mount_identity(const char *path, int unique, unsigned long long *mountID, int *isMountRoot) {
    struct statx status;
    unsigned int wanted = unique ? STATX_MNT_ID_UNIQUE : STATX_MNT_ID;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, wanted, &status) != 0) return -1;
    if (!(status.stx_mask & wanted) || !(status.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) {
        errno = ENOTSUP;
        return -1;
    }
    *mountID = status.stx_mnt_id;
    *isMountRoot = (status.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
    return 0;
}

// MARK: the guardian

int fp_spawn_guardian(const char *executable, char *const argv[], int groupFD, int channelFD, int *pid) {
    // Copies above the target numbers first, so dup2 onto 3 and 4 never clobbers a source.
    int group = fcntl(groupFD, F_DUPFD_CLOEXEC, 10);
    if (group < 0) return errno;
    int channel = fcntl(channelFD, F_DUPFD_CLOEXEC, 10);
    if (channel < 0) {
        int code = errno;
        close(group);
        return code;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, group, 3);
    posix_spawn_file_actions_adddup2(&actions, channel, 4);
    posix_spawn_file_actions_addclosefrom_np(&actions, 5);
    // A session of its own: a Ctrl-C or hang-up of the owner's terminal does not reach it.
    // Signals start at their defaults, whatever the owner blocked or ignored.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    extern char **environ;
    int result = posix_spawn(pid, executable, &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(group);
    close(channel);
    return result;
}

int fp_channel_pair(int ends[2]) { return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends); }

static int fp_channel_address(const char *path, struct sockaddr_un *address) {
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(address->sun_path, path);
    return 0;
}

int fp_channel_connect(const char *path) {
    struct sockaddr_un address;
    if (fp_channel_address(path, &address) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int code = errno;
        close(fd);
        errno = code;
        return -1;
    }
    return fd;
}

int fp_channel_listen(const char *path) {
    struct sockaddr_un address;
    if (fp_channel_address(path, &address) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    unlink(path);
    mode_t previous = umask(077);
    int bound = bind(fd, (struct sockaddr *)&address, sizeof address);
    umask(previous);
    if (bound != 0 || listen(fd, 4) != 0) {
        int code = errno;
        close(fd);
        errno = code;
        return -1;
    }
    return fd;
}

int fp_channel_send(int socket, const void *bytes, unsigned long length, int fd) {
    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof control.buffer;
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &fd, sizeof(int));
    }
    ssize_t sent;
    do sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    return sent == (ssize_t)length ? 0 : -1;
}

long fp_channel_receive(int socket, void *buffer, unsigned long capacity, int *fd, int timeoutMilliseconds) {
    *fd = -1;
    struct pollfd wait = {.fd = socket, .events = POLLIN};
    int ready;
    do ready = poll(&wait, 1, timeoutMilliseconds);
    while (ready < 0 && errno == EINTR);
    if (ready < 0) return -1;
    if (ready == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    struct iovec vector = {.iov_base = buffer, .iov_len = capacity};
    union {
        char buffer[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    struct msghdr message = {
        .msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.buffer, .msg_controllen = sizeof control.buffer};
    ssize_t length;
    do length = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    while (length < 0 && errno == EINTR);
    if (length < 0) return -1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t index = 0; index < count; index++) {
            int received;
            memcpy(&received, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
            // Keep the first; a sender that attached more gets them closed, not leaked.
            if (*fd < 0) *fd = received;
            else close(received);
        }
    }
    return (long)length;
}

long fp_channel_peer_uid(int socket) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    return (long)credentials.uid;
}

// MARK: whether a live group guards a mount

/// Whether the fdinfo of a fanotify descriptor at `path` lists a mark with events on mount `id`.
static int fp_fdinfo_marks_mount(const char *path, unsigned long long id) {
    FILE *file = fopen(path, "re");
    if (!file) return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, file)) {
        if (strncmp(line, "fanotify ", 9) != 0) continue;
        unsigned long long mask = 0, mount = 0;
        int hasMount = 0;
        char *save = NULL;
        for (char *token = strtok_r(line + 9, " \n", &save); token; token = strtok_r(NULL, " \n", &save)) {
            if (strncmp(token, "mask:", 5) == 0) mask = strtoull(token + 5, NULL, 16);
            else if (strncmp(token, "mnt_id:", 7) == 0) {
                mount = strtoull(token + 7, NULL, 16);
                hasMount = 1;
            }
        }
        found = hasMount && mask != 0 && mount == id;
    }
    fclose(file);
    return found;
}

int fp_mount_is_guarded(unsigned long long mountID) {
    DIR *processes = opendir("/proc");
    if (!processes) return -1;
    int guarded = 0, unreadable = 0;
    struct dirent *process;
    while (!guarded && (process = readdir(processes))) {
        if (process->d_name[0] < '1' || process->d_name[0] > '9') continue;
        char folder[64];
        snprintf(folder, sizeof folder, "/proc/%s/fd", process->d_name);
        DIR *descriptors = opendir(folder);
        if (!descriptors) {
            // A process that ended meanwhile is no holder; one we may not look into could be.
            if (errno == EACCES || errno == EPERM) unreadable = 1;
            continue;
        }
        struct dirent *descriptor;
        while (!guarded && (descriptor = readdir(descriptors))) {
            if (descriptor->d_name[0] < '0' || descriptor->d_name[0] > '9') continue;
            char path[128], target[64];
            snprintf(path, sizeof path, "/proc/%s/fd/%s", process->d_name, descriptor->d_name);
            ssize_t length = readlink(path, target, sizeof target - 1);
            if (length <= 0) continue;
            target[length] = 0;
            if (strcmp(target, "anon_inode:[fanotify]") != 0) continue;
            snprintf(path, sizeof path, "/proc/%s/fdinfo/%s", process->d_name, descriptor->d_name);
            guarded = fp_fdinfo_marks_mount(path, mountID);
        }
        closedir(descriptors);
    }
    closedir(processes);
    if (guarded) return 1;
    if (unreadable) {
        errno = EACCES;
        return -1;
    }
    return 0;
}
