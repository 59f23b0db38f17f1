import CFUSE
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// What a FUSE mount needs, checked before mounting so that a failure says what to do: libfuse,
/// the kernel's FUSE device, `fusermount3`, and an empty folder that is not a mount already.
/// libfuse's own message (in ``FUSESession/mount(_:at:options:)``'s error) says less.
public enum FUSEMountCheck {
    /// The places libfuse looks for `fusermount3` before `PATH` (its `FUSERMOUNT_DIR`).
    static let fusermountFolders = ["/usr/bin", "/bin", "/usr/local/bin"]

    /// Checks everything ``FUSESession`` needs to mount at `mountPoint`.
    /// - Throws: `notSupported` when libfuse, `/dev/fuse` or `fusermount3` is missing;
    ///   `permissionDenied` when `/dev/fuse` is not readable and writable by this user;
    ///   `noSuchItem` when `mountPoint` does not exist; `invalidArgument` when it is not a
    ///   folder, is not empty, or is a mount point already (a live one, or a dead one that is
    ///   not a FUSE mount of this subtype: a dead one of ours, whose process died before
    ///   `fusermount3` removed it, is detached).
    /// A `fusermount3` left by a mount of the folder whose process died is waited for first
    /// (``LeftoverUnmounter``): it would take the new mount away.
    static func check(_ mountPoint: String, options: FUSEMountOptions, device: String = "/dev/fuse") throws(FileProviderError) {
        try checkSystem(autoUnmount: options.autoUnmount, device: device)
        if !isLiveMount(mountPoint) { _ = LeftoverUnmounter.waitUntilGone(mountPoint) }
        try checkMountPoint(mountPoint, options: options)
    }

    /// Whether a file system answers at `mountPoint`, a mount point (a live mount, whose own
    /// `fusermount3` is not a leftover).
    static func isLiveMount(_ mountPoint: String) -> Bool {
        isMountPoint(mountPoint) && openingError(ofFolder: mountPoint) == 0
    }

    /// The error of opening the folder at `path` (`errno`: `ENOTCONN` for a FUSE mount whose
    /// process died), or 0 when it opens. Opening always asks the file system, where `lstat`
    /// may be answered from the kernel's cache of a dead mount's root (as `fusermount3` checks).
    static func openingError(ofFolder path: String) -> Int32 {
        let probe = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard probe >= 0 else { return errno }
        close(probe)
        return 0
    }

    /// Checks what any FUSE mount by this process needs, whatever the folder: libfuse 3, a
    /// usable `/dev/fuse`, and `fusermount3` (for an ordinary user, or for `autoUnmount`).
    /// Blocking (loads libfuse).
    /// - Throws: as ``check(_:options:device:)``, for these.
    public static func checkSystem(autoUnmount: Bool = true, device: String = "/dev/fuse") throws(FileProviderError) {
        if let reason = fp_fuse_load().map({ String(cString: $0) }) {
            throw FileProviderError(
                .notSupported,
                "cannot load libfuse 3 for a FUSE mount (\(reason)): install it (Debian/Ubuntu: apt install fuse3; Fedora: dnf install fuse3)"
            )
        }
        try checkDevice(device)
        if geteuid() != 0 || autoUnmount, fusermount() == nil {
            throw FileProviderError(
                .notSupported,
                "fusermount3 is not installed (looked in \(fusermountFolders.joined(separator: ", ")) and PATH): a FUSE mount by an ordinary user, or one unmounted when its process dies, goes through it; install it (Debian/Ubuntu: apt install fuse3)"
            )
        }
    }

    /// - Throws: as ``check(_:options:device:)`` for the device.
    static func checkDevice(_ device: String) throws(FileProviderError) {
        var status = stat()
        guard stat(device, &status) == 0 else {
            throw FileProviderError(
                .notSupported,
                "\(device) does not exist: the kernel's FUSE module is not loaded (run `modprobe fuse` as root), or this container was started without the device (docker/podman: --device /dev/fuse)"
            )
        }
        guard access(device, R_OK | W_OK) == 0 else {
            let mode = String(status.st_mode & 0o777, radix: 8)
            throw FileProviderError(
                .permissionDenied,
                "\(device) (mode \(mode)) cannot be opened for reading and writing by this user (uid \(getuid())): distributions ship it as mode 0666; as root, run `chmod 0666 \(device)` (or mount as root)"
            )
        }
    }

    /// - Throws: as ``check(_:options:device:)`` for the mount point. `looks`: how many more
    /// times a dead mount is looked at after a detach.
    static func checkMountPoint(_ mountPoint: String, options: FUSEMountOptions, looks: Int = 2) throws(FileProviderError) {
        var status = stat()
        var code: Int32 = 0
        if lstat(mountPoint, &status) != 0 {
            code = errno
        } else if isMountPoint(mountPoint), openingError(ofFolder: mountPoint) == ENOTCONN {
            code = ENOTCONN
        }
        if code != 0 {
            if code == ENOTCONN {
                // A mount of ours whose process died before fusermount3 removed it (its
                // auto_unmount can lose the race with the process's end): detach it and go on.
                // The dead process's fusermount3 may remove it meanwhile (then the detach
                // fails, or the mount is no longer listed): look again either way.
                if let line = mountInfo(for: mountPoint), line.contains(" fuse.\(options.subtype) ") {
                    _ = detachDeadMount(mountPoint)
                }
                if looks > 0 { return try checkMountPoint(mountPoint, options: options, looks: looks - 1) }
                throw FileProviderError(
                    .invalidArgument,
                    "\(mountPoint) is a FUSE mount whose file system ended without unmounting (\(String(cString: strerror(code)))): run `fusermount3 -u \(mountPoint)` (or `umount \(mountPoint)` as root), then mount again"
                )
            }
            if code == ENOENT {
                throw FileProviderError(.noSuchItem, "the folder to mount on, \(mountPoint), does not exist: create it first")
            }
            throw FileProviderError(
                .localIOFailure, "cannot look at the folder to mount on, \(mountPoint): \(String(cString: strerror(code)))")
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw FileProviderError(.invalidArgument, "\(mountPoint) is not a folder: a FUSE file system mounts on an empty folder")
        }
        if isMountPoint(mountPoint) {
            throw FileProviderError(
                .invalidArgument,
                "\(mountPoint) is a mount point already (another serve, or a mount left behind): stop what mounted it, or run `fusermount3 -u \(mountPoint)` (`umount \(mountPoint)` as root)"
            )
        }
        guard let folder = opendir(mountPoint) else {
            throw FileProviderError(
                .permissionDenied, "cannot list the folder to mount on, \(mountPoint): \(String(cString: strerror(errno)))")
        }
        defer { closedir(folder) }
        while let entry = readdir(folder) {
            let name = String(decoding: DirectoryEntry.nameBytes(of: entry), as: UTF8.self)
            if name != "." && name != ".." {
                throw FileProviderError(
                    .invalidArgument,
                    "\(mountPoint) is not empty (it holds \(name)): a mount would hide its files; move them out or mount on an empty folder"
                )
            }
        }
    }

    /// Detaches a FUSE mount of `subtype` at `path` whose process died before `fusermount3`
    /// removed it (every access that reaches it fails with `ENOTCONN`); returns whether it
    /// detached one. A live mount, a dead mount of another subtype and a plain folder are left
    /// alone. Blocking (may run `fusermount3`).
    public static func detachDeadMount(at path: String, subtype: String) -> Bool {
        let failure = openingError(ofFolder: path)
        guard failure == ENOTCONN || failure == ECONNABORTED, let line = mountInfo(for: path), line.contains(" fuse.\(subtype) ")
        else { return false }
        return detachDeadMount(path)
    }

    /// Detaches the dead FUSE mount at `path` (`umount2(MNT_DETACH)` as root, `fusermount3 -u -z`
    /// otherwise); returns whether it is gone.
    static func detachDeadMount(_ path: String) -> Bool {
        if geteuid() == 0 && umount2(path, Int32(MNT_DETACH)) == 0 { return true }
        guard let fusermount = fusermount() else { return false }
        var launch = ProgramLaunch(path: fusermount, arguments: ["-u", "-z", "-q", path])
        launch.ownSession = false
        guard case .success(let pid) = launch.start() else { return false }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return status == 0
    }

    /// Whether `path` is the root of a mount (`statx`'s `STATX_ATTR_MOUNT_ROOT`); false when it
    /// cannot be looked at (a FUSE mount whose process died: `ENOTCONN`).
    static func isMountPoint(_ path: String) -> Bool {
        ReplicaMount.isMountPoint(path)
    }

    /// The line of `/proc/self/mountinfo` whose mount point is `path` (the last one: the mount
    /// on top), or nil. Reads the whole table (`String(contentsOfFile:)` stops after the first
    /// 4 KiB of a `/proc` file, where the newest mounts are missing).
    static func mountInfo(for path: String) -> String? {
        let canonical =
            realpath(path, nil).map { resolved in
                defer { free(resolved) }
                return String(cString: resolved)
            } ?? (path as NSString).standardizingPath
        guard let text = readWhole("/proc/self/mountinfo") else { return nil }
        return text.split(separator: "\n").last { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && unescapeMountField(String(fields[4])) == canonical
        }.map(String.init)
    }

    /// The whole text of the file at `path`, read until its end, or nil.
    private static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A field of `mountinfo` with its octal escapes (`\040` for a space) undone.
    static func unescapeMountField(_ field: String) -> String {
        var bytes: [UInt8] = []
        let source = Array(field.utf8)
        var index = 0
        while index < source.count {
            if source[index] == UInt8(ascii: "\\"), index + 3 < source.count,
                let value = UInt8(String(decoding: source[index + 1...index + 3], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(source[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The `fusermount3` libfuse will run, or nil.
    static func fusermount() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let folders = fusermountFolders + path.split(separator: ":").map(String.init)
        return folders.map { $0 + "/fusermount3" }.first { access($0, X_OK) == 0 }
    }
}
