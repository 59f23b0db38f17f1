import Foundation
import Logging
import ProviderCore
import ProviderStore

/// What the parts of one domain share: the domain, its store (the backend), its replica folder,
/// the shared database and the executor that runs blocking work. One per ``DomainController``,
/// made when the controller is; sync up's components (``SyncUp``, ``Uploader``,
/// ``ConflictResolver``, ``MoveRecorder``, ``OperationJournal``) each hold it.
///
/// A value of references only: copies share the same backend, replica, database and executor.
struct DomainContext: Sendable {
    let domain: DomainRecord
    let domainID: Int64
    /// The domain's store, wrapped in ``CheckedBackend``: every item from it passed `ItemBounds`.
    let backend: any Backend
    /// Where the engine reads and writes the domain's files (blocking: run on ``executor``).
    let replica: Replica
    let store: MetadataStore
    /// The engine's threads for blocking work (files, SQLite scans); never the cooperative pool.
    let executor: BlockingExecutor
    /// Told of the dataless folders a sync makes (``NewDatalessFolders``).
    let newDatalessFolders: NewDatalessFolders
    /// Records a recursive operation reads from the database at once
    /// (``RecordReader/forEachSubtreePage(below:deepestFirst:_:)``; tests make it small).
    let subtreePage = Mutex(4_096)
    /// The engine's logger: a line per item transferred at `debug` level (``logTransfer(_:_:)``).
    var logger = Logger(label: "fileprovider.engine")

    /// A context of `domain` (its id `domainID`), whose replica gets the database's notes of
    /// the domain's downloads (``DownloadNotes``).
    init(
        domain: DomainRecord, domainID: Int64, backend: any Backend, replica: Replica, store: MetadataStore,
        executor: BlockingExecutor, newDatalessFolders: NewDatalessFolders, logger: Logger = Logger(label: "fileprovider.engine")
    ) {
        self.domain = domain
        self.domainID = domainID
        self.backend = backend
        self.replica = replica.noting(downloadsOf: domainID, in: store)
        self.store = store
        self.executor = executor
        self.newDatalessFolders = newDatalessFolders
        self.logger = logger
    }

    /// Logs what was done to one item, at `debug` level (`-v`): `photos:/a.jpg: downloaded`.
    func logTransfer(_ path: String, _ what: @autoclosure () -> String) {
        guard logger.logLevel <= .debug else { return }
        logger.debug("\(display(path)): \(what())")
    }

    /// Runs a short blocking step (database reads and writes, replica checks) on ``executor``,
    /// never on the cooperative pool; it runs also when the task is cancelled, as the same step
    /// run inline would (use `executor.run` for work a cancellation should not start).
    /// - Throws: what `body` throws.
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await executor.runEvenIfCancelled { () throws -> T in try body() }
    }

    /// `DOMAIN:/path` of a relative path, exactly: for outcomes, JSON and keys.
    func location(_ path: String) -> String { "\(domain.name):/\(path)" }

    /// The relative path of a `DOMAIN:/path` of this domain (``location(_:)``); another text as
    /// it is.
    func relativePath(of location: String) -> String {
        let prefix = "\(domain.name):/"
        return location.hasPrefix(prefix) ? String(location.dropFirst(prefix.count)) : location
    }

    /// `DOMAIN:/path` of a relative path for messages and logs: quoted when the name holds
    /// characters that must not reach a terminal (``TerminalText/quoted(_:)``).
    func display(_ path: String) -> String { TerminalText.quoted(location(path)) }

    /// The domain's content policies as they are now (see ``PolicyResolver``): the folders'
    /// (a file's own is in its record). Blocking.
    /// - Throws: `localIOFailure` when the database fails.
    func policies() throws(FileProviderError) -> PolicyResolver {
        try PolicyResolver.read(from: store, domainID: domainID)
    }

    /// The content policies as they are now of the folders that hold `path` only: a resolver
    /// that answers for that one item (with its record) in a few indexed reads. Blocking.
    /// - Throws: `localIOFailure` when the database fails.
    func policies(along path: String) throws(FileProviderError) -> PolicyResolver {
        try PolicyResolver.read(from: store, domainID: domainID, along: path)
    }

    /// Makes the next sync down list the whole store: what the database just forgot (or marked
    /// gone) comes back, or goes, with a listing, and a change feed would not name it.
    /// - Throws: `localIOFailure` when the database cannot be written.
    func relistNextSync() throws(FileProviderError) {
        try store.setSyncAnchor(nil, domainID: domainID, container: .workingSet)
    }

    /// Whether the store still has an item (`false` only for `noSuchItem`).
    /// - Throws: what the backend's `item(for:)` throws, except `noSuchItem`.
    func storeStillHas(_ identifier: ItemIdentifier) async throws(FileProviderError) -> Bool {
        do {
            _ = try await backend.item(for: identifier)
            return true
        } catch  where error.code == .noSuchItem {
            return false
        }
    }
}
