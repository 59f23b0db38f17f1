import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// SIGINT (Ctrl-C) and SIGTERM, handled the same way for every command.
///
/// Installed first thing in `main`: the signals are ignored and watched with dispatch signal
/// sources instead, so the process never dies of them. The first signal cancels the command's
/// task (Swift task cancellation): the engine starts no new work, ends what runs, records what
/// was done; the command prints what was done and what was not and exits with 128 + the
/// signal's number (130 for SIGINT, 143 for SIGTERM). A second signal stops the process at once
/// with the same status: everything the engine writes survives that (as it survives `kill -9`),
/// the next run finishes the work. `serve` takes the signals over with ``takeOver(_:)``.
final class Interruption: @unchecked Sendable {
    static let shared = Interruption()

    private let lock = NSLock()
    /// The signals received, in order.
    private var received: [Int32] = []
    private var task: Task<Void, any Error>?
    private var handler: (@Sendable (_ signal: Int32, _ count: Int) -> Void)?
    private var sources: [any DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "fileprovider.signals")

    /// Starts watching SIGINT and SIGTERM.
    func install() {
        lock.withLock {
            for number in [SIGINT, SIGTERM] {
                Glibc.signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                // Signals that came close together arrive as one event with their count.
                source.setEventHandler { [self, source] in
                    for _ in 0..<max(1, source.data) { receive(number) }
                }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// The first signal received, unless a handler took the signals over.
    var signal: Int32? {
        lock.withLock { handler == nil ? received.first : nil }
    }

    /// The exit status after an interruption: 128 + the first signal's number; `nil` when no
    /// signal came (or a handler took them over).
    var exitStatus: Int32? { signal.map { 128 + $0 } }

    /// Runs the command in a task the first signal cancels.
    func run(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let task = Task { try await body() }
        let cancelNow = lock.withLock { () -> Bool in
            self.task = task
            return handler == nil && !received.isEmpty
        }
        if cancelNow { task.cancel() }
        try await task.value
    }

    /// Hands the signals to `handler` instead (called on a queue of its own with the signal and
    /// how many came so far); signals that came before are handed over at once. The exit status
    /// is then the command's own.
    func takeOver(_ handler: @escaping @Sendable (_ signal: Int32, _ count: Int) -> Void) {
        let earlier = lock.withLock { () -> [Int32] in
            self.handler = handler
            return received
        }
        for (index, number) in earlier.enumerated() { handler(number, index + 1) }
    }

    private func receive(_ number: Int32) {
        let (count, first, handler, task) = lock.withLock { () -> (Int, Int32, (@Sendable (Int32, Int) -> Void)?, Task<Void, any Error>?) in
            received.append(number)
            return (received.count, received[0], self.handler, self.task)
        }
        if let handler {
            handler(number, count)
            return
        }
        if count == 1 {
            ProgressBar.eraseLine()
            let again = number == SIGINT ? "press Ctrl-C again" : "send the signal again"
            FileHandle.standardError.write(Data("interrupting: letting running work end; \(again) to stop at once\n".utf8))
            task?.cancel()
            return
        }
        // A second signal: stop at once, as a kill would, but with the line erased and a word.
        ProgressBar.eraseLine()
        FileHandle.standardError.write(
            Data("interrupted again: stopped at once; what was done is recorded, run the same command again to finish\n".utf8))
        _exit(128 + first)
    }
}

/// A command stopped by SIGINT or SIGTERM after printing what it did and did not do.
struct CommandInterrupted: Error {}
