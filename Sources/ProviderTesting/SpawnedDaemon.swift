import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A daemon or server a test started in a process group (and maybe a temporary folder) of its
/// own: ``stop()`` kills the group, reaps its leader and removes the folder, once however many
/// callers; the group is killed when the test process exits too (``ProcessGroupsAtExit``).
final class SpawnedDaemon: @unchecked Sendable {
    /// The daemon's folder (its socket, address file, logs), removed when it stops; `nil` for
    /// none.
    let folder: URL?
    /// The process group's leader.
    let pid: pid_t
    private let lock = NSLock()
    private var stopped = false

    /// Takes charge of the process group `pid`, started with its own session, and `folder`.
    init(pid: pid_t, folder: URL?) {
        self.pid = pid
        self.folder = folder
        ProcessGroupsAtExit.register(pid)
    }

    deinit { stop() }

    /// Kills the daemon's process group, reaps it and removes its folder; only the first call
    /// does anything. Blocks.
    func stop() {
        let first: Bool = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        ProcessGroupsAtExit.stop(pid)
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    /// The text of the daemon's file `name` in its folder (a log), at most its last 2,000
    /// characters, or "".
    func tail(of name: String) -> String {
        guard let folder else { return "" }
        return String(((try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)) ?? "").suffix(2000))
    }
}
