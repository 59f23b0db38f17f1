import Foundation

/// Who is told when a sync makes a dataless folder in a replica: `serve`'s ``DatalessWatcher``,
/// which marks it at once. A folder made by a sync down is otherwise marked only after the whole
/// sync, and a program that opened it meanwhile (a long first sync of a large store, a new
/// folder of 600 items) saw it empty and unfilled.
///
/// One per ``ProviderManager``; without `serve` nobody listens. Any thread; the listener runs on
/// the thread that made the folders (an engine thread) and must not block.
final class NewDatalessFolders: Sendable {
    /// Told the domain's name and the folders' relative paths.
    typealias Listener = @Sendable (_ domain: String, _ paths: [String]) -> Void

    private let listener = Mutex<Listener?>(nil)

    /// Sets (or, with `nil`, removes) the listener.
    func listen(_ body: Listener?) { listener.withLock { $0 = body } }

    /// Says that `paths` of `domain` were just made as dataless folders.
    func made(domain: String, paths: [String]) {
        guard !paths.isEmpty, let body = listener.withLock({ $0 }) else { return }
        body(domain, paths)
    }
}
