import Foundation

/// The multipart uploads this process is sending, by upload id: never resumed or aborted as
/// abandoned by another upload of the same backend (a store's `Initiated` date may lie: moto
/// gives one from 2010).
final class ActiveUploads: @unchecked Sendable {
    private let lock = NSLock()
    private var ids = Set<String>()

    func insert(_ id: String) { _ = lock.withLock { ids.insert(id) } }
    func remove(_ id: String) { _ = lock.withLock { ids.remove(id) } }
    func contains(_ id: String) -> Bool { lock.withLock { ids.contains(id) } }
}
