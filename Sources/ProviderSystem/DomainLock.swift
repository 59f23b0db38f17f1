import Foundation
import ProviderCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An `flock(2)` lock on a domain with the holder's process id written in the file. The kernel
/// drops it when the process ends, even after `kill -9`.
///
/// Two locks per domain:
/// - the **serve** lock, `<home>/locks/<domain>.lock`, held by a `serve` process for as long as
///   it runs the domain, so two processes never serve one domain and `fileproviderctl signal`
///   can tell whether anyone is listening;
/// - the **sync** lock, `<home>/locks/sync/<domain>.lock`, held for the length of one
///   `DomainController.sync(…)` by whoever runs it (`serve` for each pass, `fileproviderctl
///   sync`, any program linking the engine), so two syncs of one domain never run at once: a
///   second one waits for the first.
///
/// Lock order (Docs/Architecture.md, "Locks and their order"): a domain's sync lock, then its
/// controller's tree lock, then any `Mutex`, which is never held across an `await`. A process
/// that takes the sync locks of several domains (`evict --to-budget`) takes them all first, in
/// name order, so two such processes cannot deadlock.
public final class DomainLock: Sendable {
    public let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit {
        Self.heldHere.withLock { _ = $0.remove(path) }
        Glibc.close(fd)
    }

    /// The lock files this process holds, so that a refusal can tell a lock of ours from a
    /// copy of our descriptor in a child process that has not reached `exec` yet.
    private static let heldHere = Mutex<Set<String>>([])

    /// The serve lock file of a domain.
    public static func path(home: URL, domain: String) -> String {
        home.appendingPathComponent("locks/\(domain).lock").path
    }

    /// The sync lock file of a domain.
    public static func syncPath(home: URL, domain: String) -> String {
        home.appendingPathComponent("locks/sync/\(domain).lock").path
    }

    /// Takes the serve lock of a domain without waiting.
    /// - Throws: `cannotSynchronize` naming the process that holds it; `localIOFailure` when the
    ///   lock file cannot be created.
    public static func acquire(home: URL, domain: String) throws(FileProviderError) -> DomainLock {
        let path = path(home: home, domain: domain)
        guard let lock = try attempt(path) else {
            let who = holder(path: path).map { "process \($0)" } ?? "another process"
            throw FileProviderError(.cannotSynchronize, "domain '\(domain)' is already served by \(who)")
        }
        return lock
    }

    /// Takes the lock at `path` without waiting; `nil` when another holder has it.
    /// - Throws: `localIOFailure` (or the code of the error) when the lock file cannot be
    ///   created or locked.
    package static func attempt(_ path: String) throws(FileProviderError) -> DomainLock? {
        do throws(FileProviderError) {
            try PrivateFolder.make(atPath: (path as NSString).deletingLastPathComponent)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot create the locks folder for \(path): \(error.message)")
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { throw POSIXError.error("cannot open the lock file", path: path) }
        // A child process this one has just started holds a copy of every descriptor, this
        // lock's too, until its `exec` closes them: a lock file that names this process as
        // holder while this process does not hold it is free again within moments.
        var childCopyRetries = 100
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let code = errno
            if code == EWOULDBLOCK, childCopyRetries > 0, readPID(fd) == getpid(), !heldHere.withLock({ $0.contains(path) }) {
                childCopyRetries -= 1
                usleep(2000)
                continue
            }
            Glibc.close(fd)
            if code == EWOULDBLOCK { return nil }
            throw POSIXError.error("cannot lock", path: path, errno: code)
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        heldHere.withLock { _ = $0.insert(path) }
        return DomainLock(path: path, fd: fd)
    }

    /// The process id of the `serve` process holding a domain's lock, or `nil` when none does.
    public static func holder(home: URL, domain: String) -> Int32? {
        holder(path: path(home: home, domain: domain))
    }

    /// The process id of the holder of the lock at `path` (0 when it has not written it yet), or
    /// `nil` when nobody holds it.
    package static func holder(path: String) -> Int32? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { return nil }
        defer { Glibc.close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        return readPID(fd) ?? 0
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
