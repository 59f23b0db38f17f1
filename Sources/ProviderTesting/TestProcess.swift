import Foundation
import ProviderCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A program a test starts and watches, in place of Foundation's `Process`: the same properties
/// and calls, started with `posix_spawn` (``ProgramLaunch``) and reaped by a thread of its own.
///
/// Foundation's `Process.run()` on Linux lists `/proc/self/fd` to close this process's
/// descriptors in the child, and copies each directory entry's whole 256-byte name field: an
/// entry at the end of glibc's buffer reads past it, and when the next page is not mapped the
/// whole test bundle dies with a bad pointer dereference in `memcpy`
/// (swift-corelibs-foundation PR 5472, not in Swift 6.3.1). Its `terminationStatus` also traps
/// while the program runs. This one closes the descriptors with glibc's closefrom action, and
/// reading the status of a running program gives -1.
public final class TestProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String]?
    /// The program's environment; this process's when `nil`.
    public var environment: [String: String]?
    /// Each a `FileHandle` or a `Pipe`; `nil` is this process's own descriptor.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?
    /// Called once, on the reaping thread, when the program has ended (after ``isRunning``
    /// turned false).
    public var terminationHandler: (@Sendable (TestProcess) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    private struct State {
        var pid: pid_t = 0
        var running = false
        var status: Int32 = -1
        var reason = Process.TerminationReason.exit
        var handler: (@Sendable (TestProcess) -> Void)?
    }
    private let state = Mutex(State())
    private let ended = NSCondition()

    public init() {}

    public var processIdentifier: Int32 { state.withLock { $0.pid } }
    public var isRunning: Bool { state.withLock { $0.running } }
    /// The exit status, or the signal that ended it; -1 while it runs or before it started.
    public var terminationStatus: Int32 { state.withLock { $0.running ? -1 : $0.status } }
    public var terminationReason: Process.TerminationReason { state.withLock { $0.reason } }

    /// Starts the program in a process group of its own, with the descriptors given and no
    /// other of this process's, every signal unblocked and at its default action.
    /// - Throws: `CocoaError.executableLoad` when it cannot be started, or was started before.
    public func run() throws {
        guard let path = executableURL?.path, processIdentifier == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "no program, or started already"])
        }
        var launch = ProgramLaunch(path: path, arguments: arguments ?? [])
        launch.environment = environment
        launch.ownSession = false
        launch.ownProcessGroup = true
        var parentCopies: [FileHandle] = []
        func stream(_ value: Any?, _ own: Int32, reading: Bool) -> ProgramLaunch.Stream {
            switch value {
            case let pipe as Pipe:
                // The child's end: closed here once the child has its copy.
                let child = reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                parentCopies.append(child)
                return .descriptor(child.fileDescriptor)
            case let handle as FileHandle: return .descriptor(handle.fileDescriptor)
            default: return .descriptor(own)
            }
        }
        launch.standardInput = stream(standardInput, 0, reading: true)
        launch.standardOutput = stream(standardOutput, 1, reading: false)
        launch.standardError = stream(standardError, 2, reading: false)
        let pid: pid_t
        switch launch.start() {
        case .success(let started): pid = started
        case .failure(let failure):
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "cannot start \(path): \(failure)"])
        }
        // The child's ends of pipes are the child's now (its reader sees the end when it exits).
        for handle in parentCopies { try? handle.close() }
        state.withLock {
            $0.pid = pid
            $0.running = true
        }
        Thread.detachNewThread { [self] in reap(pid) }
    }

    private func reap(_ pid: pid_t) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7f
        let handler = state.withLock { state -> (@Sendable (TestProcess) -> Void)? in
            if signal != 0 && signal != 0x7f {
                (state.status, state.reason) = (signal, .uncaughtSignal)
            } else {
                (state.status, state.reason) = ((status >> 8) & 0xff, .exit)
            }
            state.running = false
            defer { state.handler = nil }
            return state.handler
        }
        ended.lock()
        ended.broadcast()
        ended.unlock()
        handler?(self)
    }

    /// Blocks the calling thread until the program ended: call it off Swift's cooperative pool.
    public func waitUntilExit() {
        ended.lock()
        while isRunning { ended.wait() }
        ended.unlock()
    }
}
