import Foundation
import ProviderCore
import ProviderEngine
import ProviderSystem

/// The thread that reads a ``FolderOpenGroup``'s events and hands each to a handler, from
/// ``start(handle:)`` until ``stop()``: then the events already queued are handled, the group
/// is closed on the thread (off the cooperative pool; programs a permission event held go on),
/// and the handler is let go (it usually holds the reader's owner: forgetting it breaks the
/// cycle). The ``DatalessWatcher`` and the ``FolderOpenNotifier`` each own one.
final class FolderOpenEvents: Sendable {
    private let group: FolderOpenGroup
    private let name: String
    /// The handler while the thread runs (`nil` before ``start(handle:)`` and after ``stop()``).
    private let handler = Mutex<(@Sendable (FolderOpenGroup.Event) -> Void)?>(nil)
    private let stopRequested = Mutex(false)
    private let finished = Latch()

    /// - Parameter name: the thread's name (as `ps -T` shows it).
    init(group: FolderOpenGroup, threadName name: String) {
        self.group = group
        self.name = name
    }

    /// Starts the thread, which hands each event to `handle`. Once only.
    func start(handle: @escaping @Sendable (FolderOpenGroup.Event) -> Void) {
        handler.withLock { $0 = handle }
        let thread = Thread { [self] in
            ThreadName.setCurrent(name)
            loop(handle)
            group.close()
            finished.open()
        }
        thread.name = name
        thread.start()
    }

    /// Stops the thread; returns once it ended and the group is closed. Nothing to do when it
    /// was not started (or was stopped already).
    func stop() async {
        guard
            handler.withLock({ handler in
                defer { handler = nil }
                return handler != nil
            })
        else { return }
        stopRequested.withLock { $0 = true }
        group.wake()
        await finished.wait()
    }

    private func loop(_ handle: @Sendable (FolderOpenGroup.Event) -> Void) {
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
