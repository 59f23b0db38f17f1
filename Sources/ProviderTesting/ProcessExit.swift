import Foundation

/// Waits for a child process to exit without `TestProcess.waitUntilExit()`, which on Linux can miss
/// its wake-up when many processes run at once and then waits forever for a child that is gone.
///
/// Create it before `run()`: it installs the process's `terminationHandler`.
///
/// Once the process has ended, the files it was given as standard output and error are closed
/// here: Foundation never releases a `TestProcess` that has a termination handler, so they stayed
/// open, two descriptors per program run, and past 1,024 Foundation no longer reaped children
/// and the test bundle hung. Those handles are its own from then on: close their descriptors
/// nowhere else (it closes them even when made with `closeOnDealloc: false`, and a second
/// `close` of a number closes whatever another thread has opened under it since).
public final class ProcessExit: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var exited = false
    private let process: TestProcess

    /// Installs the termination handler on `process` (which must not be running yet).
    public init(_ process: TestProcess) {
        self.process = process
        process.terminationHandler = { [self] ended in
            Self.closeOutputFiles(of: ended)
            lock.lock()
            exited = true
            lock.unlock()
            semaphore.signal()
        }
    }

    /// Closes this process's copies of the child's standard output and error when they are
    /// files or devices of its own (never this process's own standard streams, nor the shared
    /// null device).
    private static func closeOutputFiles(of process: TestProcess) {
        let shared = [FileHandle.standardInput, FileHandle.standardOutput, FileHandle.standardError, FileHandle.nullDevice]
        var closed: [ObjectIdentifier] = []
        for case let handle as FileHandle in [process.standardOutput, process.standardError] {
            let id = ObjectIdentifier(handle)
            guard !closed.contains(id), !shared.contains(where: { $0 === handle }), handle.fileDescriptor > 2 else { continue }
            closed.append(id)
            try? handle.close()
        }
    }

    /// Blocks the calling thread until the process exited. Call it off Swift's cooperative pool
    /// when other tasks must go on meanwhile.
    public func wait() {
        lock.lock()
        let done = exited
        lock.unlock()
        if !done {
            semaphore.wait()
            semaphore.signal()
        }
        settle()
    }

    /// Foundation may call the termination handler before it records the exit status: wait (a
    /// bounded spin) until `isRunning` says so too, so `terminationStatus` can be read.
    private func settle() {
        var spins = 0
        while process.isRunning && spins < 100_000 {
            sched_yield()
            spins += 1
        }
    }

    /// How the process ended (its exit status, or the signal that ended it), or `nil` while it
    /// runs. Foundation's `terminationStatus` and `terminationReason` trap (a precondition)
    /// when read before the end: a test that gave up waiting reads this instead.
    public var termination: (status: Int32, signaled: Bool)? {
        lock.lock()
        let done = exited
        lock.unlock()
        guard done else { return nil }
        settle()
        guard !process.isRunning else { return nil }
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    /// Waits at most `seconds`; returns whether the process exited.
    public func wait(seconds: Double) -> Bool {
        lock.lock()
        let done = exited
        lock.unlock()
        if !done {
            if semaphore.wait(timeout: .now() + seconds) == .timedOut { return false }
            semaphore.signal()
        }
        settle()
        return true
    }
}
