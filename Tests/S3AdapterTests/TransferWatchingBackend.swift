import Foundation
import ProviderCore

@testable import S3Adapter

/// An S3 backend that counts the transfers that finish, and runs an action once when the
/// count of one kind reaches a number: the moment a test stops a server in the middle of a
/// sync, seen happen rather than slept for. A download is a `fetchContents` that returned an
/// item; an upload a `createItem` or `modifyItem` with contents that returned one. Everything
/// else goes to the S3 backend as it is.
struct TransferWatchingBackend: Backend {
    /// What is counted.
    enum Kind: Sendable { case download, upload }

    /// The counts, shared by every backend the engine makes of a domain, and the action.
    final class Watch: @unchecked Sendable {
        let kind: Kind
        let after: Int
        let action: @Sendable () -> Void
        private let lock = NSLock()
        private var counts: [Kind: Int] = [:]
        private var fired = false

        /// Runs `action` once, on the task whose transfer of kind `kind` is the `after`-th to
        /// finish (the transfers running beside it go on).
        init(kind: Kind, after: Int, action: @escaping @Sendable () -> Void) {
            self.kind = kind
            self.after = after
            self.action = action
        }

        /// How many transfers of a kind finished.
        func count(_ kind: Kind) -> Int { lock.withLock { counts[kind, default: 0] } }

        /// Whether the action ran.
        var hasFired: Bool { lock.withLock { fired } }

        func finished(_ kind: Kind) {
            let fire = lock.withLock { () -> Bool in
                counts[kind, default: 0] += 1
                guard kind == self.kind, !fired, counts[kind, default: 0] >= after else { return false }
                fired = true
                return true
            }
            if fire { action() }
        }
    }

    let forwardee: S3Backend
    let watch: Watch

    var capabilities: BackendCapabilities { forwardee.capabilities }

    func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        try await forwardee.item(for: identifier)
    }

    func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        try await forwardee.enumerateItems(in: container, startingAt: page)
    }

    func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        let item = try await forwardee.fetchContents(for: identifier, version: version, to: destination, offset: offset, progress: progress)
        watch.finished(.download)
        return item
    }

    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        try await forwardee.fetchPartialContents(for: identifier, version: version, range: range, into: destination)
    }

    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let result = try await forwardee.createItem(basedOn: template, fields: fields, contents: contents, options: options)
        if contents != nil && template.kind == .file { watch.finished(.upload) }
        return result
    }

    func modifyItem(_ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let result = try await forwardee.modifyItem(
            item, baseVersion: baseVersion, changedFields: changedFields, contents: contents, options: options)
        if contents != nil && changedFields.contains(.contents) { watch.finished(.upload) }
        return result
    }

    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions) async throws(FileProviderError) {
        try await forwardee.deleteItem(identifier: identifier, baseVersion: baseVersion, options: options)
    }

    func close() async { await forwardee.close() }
}
