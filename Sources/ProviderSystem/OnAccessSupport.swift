import CSystemShims
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Whether this system can fetch a dataless domain's files when programs access them: fanotify
/// pre-content events (`FAN_PRE_ACCESS`, Linux 6.14) on a mount of the backing folder, which
/// needs CAP_SYS_ADMIN and a file system that accepts the mark.
///
/// A quick check from what the process and the file system say, made before a dataless domain
/// is added; it does not open a fanotify group.
public enum OnAccessSupport {
    /// The first Linux release with fanotify pre-content events.
    public static let minimumKernel = (major: 6, minor: 14)

    /// The file systems that accept a pre-content mark, by `statfs` `f_type`.
    static let acceptedFileSystems: [Int64: String] = [
        0xEF53: "ext4", 0x5846_5342: "xfs", 0x9123_683E: "btrfs", 0xCA45_1A4E: "bcachefs",
    ]

    /// Names of other common file systems, for the refusal's message.
    static let otherFileSystems: [Int64: String] = [
        0x0102_1994: "tmpfs", 0x794C_7630: "overlayfs", 0x8584_58F6: "ramfs", 0x6969: "NFS", 0xFF53_4D42: "CIFS",
        0xFE53_4D42: "SMB", 0x6573_5546: "FUSE", 0x4D44: "FAT", 0x2011_BAB0: "exFAT", 0x5346_544E: "NTFS",
        0x7366_746E: "NTFS", 0x2FC1_2FC1: "ZFS", 0x00C3_6400: "Ceph", 0x7371_7368: "squashfs", 0x9660: "ISO 9660",
        0x0027_E0EB: "cgroup", 0x6265_6572: "sysfs", 0x9FA0: "proc",
    ]

    /// CAP_SYS_ADMIN's bit in the capability sets of `/proc/<pid>/status`.
    static let systemAdministrationBit = 21

    /// What to do instead, ending every reason.
    package static let instead = "use --mode placeholder-files, which works anywhere without root"

    /// Why dataless files cannot work with a backing folder at `backing` (which need not exist
    /// yet: its nearest existing parent folder is checked), or `nil` when nothing is known to stop
    /// them. Checks, in order: CAP_SYS_ADMIN among the process's effective capabilities, the
    /// kernel's release (6.14 or later), and the backing folder's file system (ext4, xfs, btrfs or
    /// bcachefs). Each reason says what to do instead. Blocking (reads `/proc` and calls `statfs`).
    public static func problem(forBacking backing: URL) -> String? {
        let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        if let problem = capabilityProblem(status: status, effectiveUser: geteuid()) { return problem }
        if let problem = kernelProblem(release: kernelRelease()) { return problem }
        return fileSystemProblem(backing)
    }

    /// Checks everything the mode needs by trying it, without marking anything a program can
    /// reach: opens a pre-content group and marks a detached copy of the backing folder's mount.
    /// Stronger than ``problem(forBacking:)`` (which only reads what the process and the file
    /// system say); `serve` runs it before it mounts anything.
    /// - Throws: `notSupported` naming the kernel release when it is older than 6.14, or the
    ///   file system when it refuses the marks; `permissionDenied` without `CAP_SYS_ADMIN`;
    ///   `noSuchItem` when `backing` is not a folder. Each message says what to do instead.
    public static func check(backing: String) throws(FileProviderError) {
        if let problem = kernelProblem(release: kernelRelease()) { throw FileProviderError(.notSupported, problem) }
        let group: PreContentGroup
        do { group = try PreContentGroup() } catch {
            if error.code == .permissionDenied {
                throw FileProviderError(
                    .permissionDenied, capabilityProblem(status: nil, effectiveUser: 1) ?? error.message)
            }
            throw FileProviderError(error.code, "on-access files cannot work here: \(error.message); \(instead)")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: backing, isDirectory: &isFolder), isFolder.boolValue else {
            throw FileProviderError(.noSuchItem, "the folder \(backing) is missing; create it first")
        }
        let tree = fp_open_tree_clone(backing)
        if tree < 0 {
            let code = errno
            if code == EPERM {
                throw FileProviderError(
                    .permissionDenied, capabilityProblem(status: nil, effectiveUser: 1) ?? "cannot copy the mount of \(backing)")
            }
            throw POSIXError.error("cannot copy the mount of", path: backing, errno: code)
        }
        defer { Glibc.close(tree) }
        do { try group.markMount(tree: tree, describedAs: backing) } catch {
            if error.code == .notSupported {
                let type = fp_file_system_type(backing)
                throw FileProviderError(
                    .notSupported,
                    fileSystemProblem(type: Int64(type), backing: backing)
                        ?? "the file system of \(backing) refuses fanotify pre-content marks; \(instead)")
            }
            throw error
        }
    }

    /// Whether the `CapEff` line of a `/proc/<pid>/status` text has CAP_SYS_ADMIN; `nil` when
    /// there is no such line or it is not hexadecimal.
    static func hasSystemAdministration(status: String) -> Bool? {
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            let hex = line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces)
            guard !hex.isEmpty, hex.utf8.count <= 16, let mask = UInt64(hex, radix: 16) else { return nil }
            return mask & (1 << UInt64(systemAdministrationBit)) != 0
        }
        return nil
    }

    /// The refusal when the process lacks CAP_SYS_ADMIN, from its `/proc/self/status` text;
    /// where that cannot be read, from whether the effective user is root.
    static func capabilityProblem(status: String?, effectiveUser: uid_t) -> String? {
        let allowed = status.flatMap(hasSystemAdministration) ?? (effectiveUser == 0)
        if allowed { return nil }
        return
            "dataless mode needs CAP_SYS_ADMIN (root) to see programs' accesses through fanotify, and this process does not have it; run as root, or \(instead)"
    }

    /// The running kernel's release (`uname -r`), or "" when unknown.
    static func kernelRelease() -> String {
        var names = utsname()
        guard uname(&names) == 0 else { return "" }
        return withUnsafeBytes(of: &names.release) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// The major and minor version at the start of a kernel release (`6.18.44-fc-v669` is 6, 18),
    /// or `nil` when it does not start with them.
    static func kernelVersion(release: String) -> (major: Int, minor: Int)? {
        let parts = release.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, let major = Int(parts[0]) else { return nil }
        let minorDigits = parts[1].prefix { $0.isASCII && $0.isNumber }
        guard !minorDigits.isEmpty, let minor = Int(minorDigits) else { return nil }
        return (major, minor)
    }

    /// The refusal when a kernel release is older than ``minimumKernel`` or cannot be read.
    static func kernelProblem(release: String) -> String? {
        let needed = "dataless mode needs Linux \(minimumKernel.major).\(minimumKernel.minor) or later (fanotify pre-content events)"
        guard let version = kernelVersion(release: release) else {
            return "\(needed), and the kernel's release '\(release)' does not say its version; \(instead)"
        }
        if (version.major, version.minor) >= (minimumKernel.major, minimumKernel.minor) { return nil }
        return "\(needed); this kernel is \(release): upgrade it, or \(instead)"
    }

    /// The refusal when the file system a backing folder would be on does not accept
    /// pre-content marks; `nil` for ext4, xfs, btrfs or bcachefs.
    static func fileSystemProblem(_ backing: URL) -> String? {
        var folder = backing.path
        var type = fp_file_system_type(folder)
        while type < 0 {
            let code = errno
            let parent = (folder as NSString).deletingLastPathComponent
            if code != ENOENT || parent == folder || parent.isEmpty {
                return "cannot tell the file system of the backing folder \(backing.path): \(String(cString: strerror(code))); \(instead)"
            }
            folder = parent
            type = fp_file_system_type(folder)
        }
        return fileSystemProblem(type: Int64(type), backing: backing.path)
    }

    /// The refusal for a backing folder on a file system of `statfs` type `type`.
    static func fileSystemProblem(type: Int64, backing: String) -> String? {
        if acceptedFileSystems[type] != nil { return nil }
        let name = otherFileSystems[type].map { "a \($0)" } ?? "a file system of type 0x\(String(type, radix: 16))"
        return
            "the backing folder \(backing) (in the state folder) is on \(name) file system; on-access files need ext4, xfs, btrfs or bcachefs: put the state folder (--home) on one of them, or \(instead)"
    }
}
