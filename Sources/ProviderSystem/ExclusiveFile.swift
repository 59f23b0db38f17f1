import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A file of the replica held open while no program has it open, for as long as an eviction
/// takes: the check that nothing reads the contents about to go, made at the moment of
/// eviction.
///
/// The check is a write lease (`fcntl(F_SETLEASE, F_WRLCK)`): the kernel grants it only while
/// no other open file of the inode exists, in any process, a mapping (`mmap`) included even after
/// its descriptor was closed (checked on Linux 6.18). While it is held, a program that opens
/// the file waits in `open` until ``release()``, so nothing can open the file between the check
/// and the eviction. Where leases are not available (`fs.leases-enable = 0`, a file system
/// without them, a file of another owner without `CAP_LEASE`), the fallback is a scan of every
/// process's open files and mappings (`/proc/*/fd`, `/proc/*/maps`): it sees only the processes
/// this one may inspect, and a program opening the file just after the scan is not stopped.
///
/// All methods block: run them on the engine's executor.
package final class ExclusiveFile {
    /// How the check is made.
    package enum Method: Sendable {
        /// A write lease, else the process scan.
        case lease
        /// Only the process scan (tests of the fallback).
        case processScan
    }

    /// What ``open(_:writable:method:)`` found.
    package enum Outcome {
        /// Nothing else has the file open; it is held until ``release()``.
        case held(ExclusiveFile)
        /// A program has the file open (or mapped): a reason to show.
        case inUse(String)
        /// No regular file is at the path.
        case missing
    }

    /// The pauses, in microseconds, between attempts at the lease while something has the file
    /// open (about 0.15 s in all; the last entry is not waited). Opens that last a moment go
    /// away meanwhile: `serve`'s on-access thread holds each file a program opened or read until
    /// it handled the kernel's event, a file manager or an indexer reads a file just written,
    /// and a download's descriptor is closed a moment after it returned. Without the retry an
    /// eviction right after a program read the file failed now and then under load.
    static let leaseRetryPauses: [UInt32] = [10_000, 20_000, 40_000, 80_000, 0]

    package let fd: Int32
    package let path: String
    private let leased: Bool
    private var released = false

    private init(fd: Int32, path: String, leased: Bool) {
        self.fd = fd
        self.path = path
        self.leased = leased
    }

    deinit { release() }

    /// Opens the regular file at `path` (not following a final symlink; for writing with
    /// `writable`) and checks that nothing else has it open.
    /// - Throws: `localIOFailure` (or the code of `errno`) when the file cannot be opened for
    ///   another reason than being missing or leased by another process.
    package static func open(_ path: String, writable: Bool, method: Method = .lease) throws(FileProviderError) -> Outcome {
        // Non-blocking: a file another process holds a lease on fails with EWOULDBLOCK instead
        // of waiting for it.
        let flags = (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK
        let fd = Glibc.open(path, flags)
        if fd < 0 {
            switch errno {
            case ENOENT, ENOTDIR, ELOOP: return .missing
            case EWOULDBLOCK: return .inUse("another process is evicting or holding it")
            case ETXTBSY: return .inUse("a program runs it")
            default: throw POSIXError.error("cannot open", path: path)
            }
        }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(fd)
            return .missing
        }
        if method == .lease {
            for (attempt, pause) in leaseRetryPauses.enumerated() {
                if SystemCalls.takeWriteLease(fd) == 0 { return .held(ExclusiveFile(fd: fd, path: path, leased: true)) }
                guard errno == EAGAIN || errno == EWOULDBLOCK else { break }
                if attempt == leaseRetryPauses.count - 1 {
                    Glibc.close(fd)
                    return .inUse("a program has it open")
                }
                usleep(pause)
            }
        }
        if let holder = ProcessScan.holder(device: UInt64(status.st_dev), inode: UInt64(status.st_ino), except: fd) {
            Glibc.close(fd)
            return .inUse("process \(holder.pid)\(holder.name.map { " (\($0))" } ?? "") has it \(holder.mapped ? "mapped" : "open")")
        }
        return .held(ExclusiveFile(fd: fd, path: path, leased: false))
    }

    /// Whether the lease guards the file (else the process scan did, once).
    package var isLeased: Bool { leased }

    /// The held file's status.
    package func status() -> stat? {
        var status = stat()
        return fstat(fd, &status) == 0 ? status : nil
    }

    /// Releases the lease (a program waiting to open the file goes on) and closes the file.
    /// Calling it again does nothing.
    package func release() {
        guard !released else { return }
        released = true
        if leased { _ = SystemCalls.releaseLease(fd) }
        Glibc.close(fd)
    }
}

/// Finds processes that have a file open or mapped, from `/proc`: the fallback of
/// ``ExclusiveFile`` where leases are not available. Sees the processes this one may inspect
/// (its own user's, or all as root). Blocking.
package enum ProcessScan {
    package struct Holder: Sendable, Hashable {
        package var pid: Int32
        package var name: String?
        /// Mapped (`mmap`) rather than open.
        package var mapped: Bool
    }

    /// A process that has the inode open or mapped, leaving out this process's descriptor
    /// `except`; `nil` when none is found.
    package static func holder(device: UInt64, inode: UInt64, except: Int32) -> Holder? {
        let own = getpid()
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for entry in entries {
            guard let pid = Int32(entry), pid > 0 else { continue }
            let folder = "/proc/\(pid)/fd"
            if let fds = try? FileManager.default.contentsOfDirectory(atPath: folder) {
                for name in fds {
                    if pid == own, Int32(name) == except { continue }
                    var status = stat()
                    guard stat(folder + "/" + name, &status) == 0 else { continue }
                    if UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode {
                        return Holder(pid: pid, name: processName(pid), mapped: false)
                    }
                }
            }
            if maps(pid: pid, contain: device, inode) { return Holder(pid: pid, name: processName(pid), mapped: true) }
        }
        return nil
    }

    /// Whether `/proc/PID/maps` lists a mapping of the inode (its lines name the device as
    /// `major:minor` in hex and the inode in decimal).
    package static func maps(pid: Int32, contain device: UInt64, _ inode: UInt64) -> Bool {
        guard let data = contents(of: "/proc/\(pid)/maps") else { return false }
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let wanted = String(inode)
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[4] == wanted else { continue }
            let parts = fields[3].split(separator: ":")
            guard parts.count == 2, let lineMajor = UInt64(parts[0], radix: 16), let lineMinor = UInt64(parts[1], radix: 16) else {
                continue
            }
            if lineMajor == major && lineMinor == minor { return true }
        }
        return false
    }

    /// The whole of a `/proc` file (they report a size of 0, and reading stops only at the end),
    /// or `nil` when it cannot be read.
    package static func contents(of path: String) -> [UInt8]? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { return nil }
        defer { Glibc.close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { return result }
            result += chunk[..<count]
        }
    }

    /// The name of the process `pid` (`/proc/PID/comm`, at most 15 bytes), or `nil` when it
    /// is gone or cannot be read.
    package static func processName(_ pid: Int32) -> String? {
        guard let data = contents(of: "/proc/\(pid)/comm") else { return nil }
        let name = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return name.isEmpty ? nil : name
    }
}
