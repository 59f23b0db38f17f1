import Foundation

/// Who is told when a sync makes a dataless folder in a replica, and when it populates one it
/// made: `serve`'s ``DatalessWatcher``, which marks the folder at once and unmarks it once it is
/// populated. A folder made by a sync down was otherwise marked only after the whole sync, and a
/// program that opened it meanwhile (a long first sync of a large store, a new folder of 600
/// items) saw it empty and unfilled.
///
/// One per ``ProviderManager``; without `serve` nobody listens. Any thread; the listener runs on
/// the thread that tells it (an engine thread: it makes kernel calls) and must not block.
package final class NewDatalessFolders: Sendable {
    /// Told the domain's name, the folders' relative paths, and whether they are dataless
    /// (just made) or populated (made dataless earlier in the same sync).
    package typealias Listener = @Sendable (_ domain: String, _ paths: [String], _ dataless: Bool) -> Void

    private let listener = Mutex<Listener?>(nil)

    /// Sets (or, with `nil`, removes) the listener.
    package func listen(_ body: Listener?) { listener.withLock { $0 = body } }

    /// Whether anyone listens (a caller may then skip a hop to an engine thread).
    var isListening: Bool { listener.withLock { $0 != nil } }

    /// Says that `paths` of `domain` were just made as dataless folders. Blocking (briefly).
    func made(domain: String, paths: [String]) { tell(domain, paths, dataless: true) }

    /// Says that `paths` of `domain`, made dataless earlier in the same sync, are populated now.
    /// Blocking (briefly).
    package func filled(domain: String, paths: [String]) { tell(domain, paths, dataless: false) }

    private func tell(_ domain: String, _ paths: [String], dataless: Bool) {
        guard !paths.isEmpty, let body = listener.withLock({ $0 }) else { return }
        body(domain, paths, dataless)
    }
}
