import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Process groups the test support started and has not stopped yet: each gets SIGKILL when the
/// test process exits, so no server outlives a test run that ended early.
enum ProcessGroupsAtExit {
    nonisolated(unsafe) private static var running = Set<pid_t>()
    private static let runningLock = NSLock()
    private static let exitHook: Void = {
        atexit {
            ProcessGroupsAtExit.runningLock.lock()
            let groups = ProcessGroupsAtExit.running
            ProcessGroupsAtExit.runningLock.unlock()
            for group in groups { _ = kill(-group, SIGKILL) }
        }
    }()

    /// Kills `group` at exit unless ``unregister(_:)`` comes first.
    static func register(_ group: pid_t) {
        _ = exitHook
        runningLock.withLock { _ = running.insert(group) }
    }

    /// Forgets `group` (it was stopped).
    static func unregister(_ group: pid_t) {
        runningLock.withLock { _ = running.remove(group) }
    }

    /// Sends `SIGKILL` to `group`, reaps its leader (at once: the signal cannot be ignored) and
    /// forgets it. Blocks.
    static func stop(_ group: pid_t) {
        _ = kill(-group, SIGKILL)
        var status: Int32 = 0
        while waitpid(group, &status, 0) == -1 && errno == EINTR {}
        unregister(group)
    }
}
