import Foundation
import ProviderCore
import ProviderEngine
import ProviderSystem

/// The thread that reads a ``FolderOpenGroup``'s events and hands each to `handle`, until
/// ``stop()``: then the events already queued are handled, and the group is closed on the
/// thread (off the cooperative pool; programs a permission event held go on).
final class FolderOpenEvents: Sendable {
    private let group: FolderOpenGroup
    private let name: String
    private let handle: @Sendable (FolderOpenGroup.Event) -> Void
    private let stopRequested = Mutex(false)
    private let finished = Latch()

    /// - Parameter name: the thread's name (as `ps -T` shows it).
    init(group: FolderOpenGroup, threadName name: String, handle: @escaping @Sendable (FolderOpenGroup.Event) -> Void) {
        self.group = group
        self.name = name
        self.handle = handle
    }

    /// Starts the thread.
    func start() {
        let thread = Thread { [self] in
            ThreadName.setCurrent(name)
            loop()
            group.close()
            finished.open()
        }
        thread.name = name
        thread.start()
    }

    /// Stops the thread; returns once it ended and the group is closed.
    func stop() async {
        stopRequested.withLock { $0 = true }
        group.wake()
        await finished.wait()
    }

    private func loop() {
        while true {
            let stopping = stopRequested.withLock { $0 }
            let (events, woken) = group.nextEvents(waiting: !stopping)
            if !events.isEmpty {
                for event in events { handle(event) }
                continue
            }
            if stopping || woken { return }
        }
    }
}
