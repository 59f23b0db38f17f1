import CSystemShims
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Whether on-access files (the `dataless` replica mode) can work on this machine for a backing
/// folder, and if not, why: they need Linux 6.14 or later (fanotify pre-content events),
/// `CAP_SYS_ADMIN` (pre-content groups and mounts), and a file system that accepts pre-content
/// marks (ext4, xfs, btrfs, bcachefs; not tmpfs or overlayfs).
public enum OnAccessSupport {
    /// The first kernel with fanotify pre-content events.
    public static let minimumKernel = (major: 6, minor: 14)

    /// Checks everything the mode needs, without marking anything a program can reach: the
    /// probe marks a detached copy of the backing folder's mount.
    /// - Throws: `notSupported` naming the kernel release when it is older than 6.14, or the
    ///   file system when it refuses the marks; `permissionDenied` without `CAP_SYS_ADMIN`;
    ///   `noSuchItem` when `backing` is not a folder. Each message says what to do instead.
    public static func check(backing: String) throws(FileProviderError) {
        let release = kernelRelease()
        if let version = parseRelease(release), version < minimumKernel {
            throw FileProviderError(
                .notSupported,
                "on-access files need Linux \(minimumKernel.major).\(minimumKernel.minor) or later (fanotify pre-content events); this is Linux \(release): use the placeholder-files mode"
            )
        }
        let group: PreContentGroup
        do { group = try PreContentGroup() } catch {
            if error.code == .permissionDenied {
                throw FileProviderError(
                    .permissionDenied, "on-access files need CAP_SYS_ADMIN (run serve as root); use the placeholder-files mode without it")
            }
            throw FileProviderError(error.code, "on-access files cannot work here: \(error.message)")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: backing, isDirectory: &isFolder), isFolder.boolValue else {
            throw FileProviderError(.noSuchItem, "the folder \(backing) is missing; create it first")
        }
        let tree = fp_open_tree_clone(backing)
        if tree < 0 {
            let code = errno
            if code == EPERM {
                throw FileProviderError(.permissionDenied, "on-access files need CAP_SYS_ADMIN to mount (run serve as root)")
            }
            throw POSIXError.error("cannot copy the mount of", path: backing, errno: code)
        }
        defer { Glibc.close(tree) }
        do { try group.markMount(tree: tree, describedAs: backing) } catch {
            if error.code == .notSupported {
                let type = fileSystemType(of: backing)
                throw FileProviderError(
                    .notSupported,
                    "the file system of \(backing) (\(type)) refuses fanotify pre-content marks; keep on-access replicas on ext4, xfs, btrfs or bcachefs, or use the placeholder-files mode"
                )
            }
            throw error
        }
    }

    /// `uname -r`.
    static func kernelRelease() -> String {
        var names = utsname()
        uname(&names)
        return withUnsafeBytes(of: names.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }

    /// (major, minor) of a release such as `6.18.44-generic`.
    static func parseRelease(_ release: String) -> (major: Int, minor: Int)? {
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2 else { return nil }
        return (numbers[0], numbers[1])
    }

    /// The file system type of a path as `/proc/self/mountinfo` names it (`ext4`, `tmpfs`), else
    /// its magic number.
    static func fileSystemType(of path: String) -> String {
        var id: UInt64 = 0
        var root: Int32 = 0
        if fp_mount_identity(path, 0, &id, &root) == 0,
            let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        {
            for line in table.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.first.flatMap({ UInt64($0) }) == id, let dash = fields.firstIndex(of: "-"),
                    dash + 1 < fields.count
                else { continue }
                return String(fields[dash + 1])
            }
        }
        return "type 0x" + String(UInt(bitPattern: fp_filesystem_type(path)), radix: 16)
    }
}
