import Foundation

/// Reports transfer progress: bytes done so far and the total when known.
public typealias ProgressHandler = @Sendable (_ completed: Int64, _ total: Int64?) -> Void

/// Reports the progress of one file of a batch (``Backend/fetchContents(_:progress:)``): its
/// index in the batch, bytes done so far and the total when known.
public typealias BatchProgressHandler = @Sendable (_ index: Int, _ completed: Int64, _ total: Int64?) -> Void

/// One file of a batch download (``Backend/fetchContents(_:progress:)``), with the arguments
/// of ``Backend/fetchContents(for:version:to:offset:progress:)``.
public struct ContentRequest: Sendable {
    public var identifier: ItemIdentifier
    public var version: ItemVersion?
    /// The file the engine has created for the contents.
    public var destination: URL
    /// How many bytes of the contents are already in `destination` (a resumed transfer).
    public var offset: Int64

    public init(identifier: ItemIdentifier, version: ItemVersion? = nil, destination: URL, offset: Int64 = 0) {
        self.identifier = identifier
        self.version = version
        self.destination = destination
        self.offset = offset
    }
}

/// A remote store, as seen by the engine: the part of Apple's `NSFileProviderReplicatedExtension`
/// that talks to the store.
///
/// Every method is `async` and may be called concurrently from several tasks. A backend that
/// wraps blocking C calls runs them on threads of its own, never on Swift's cooperative pool.
/// Every method throws only ``FileProviderError``; besides the codes named on each method, any
/// of them may throw `serverUnreachable` (the store cannot be reached), `notAuthenticated`
/// (credentials refused), `permissionDenied` (the store denied access to a path) and `cancelled`
/// (the calling task was cancelled).
///
/// The conformance suite (`BackendConformance` in ProviderConformance) checks this contract;
/// Docs/WritingAnAdapter.md walks through writing a backend.
public protocol Backend: Sendable {
    /// What this backend can do; the engine and the conformance suite read it instead of
    /// calling methods that would throw `notSupported`.
    var capabilities: BackendCapabilities { get }

    /// Returns the current metadata of one item.
    ///
    /// - Throws: `noSuchItem` when no item has that identifier; `corruptData` when the store
    ///   describes it with an impossible value (see ``ItemBounds``).
    func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item

    /// Returns one page of the items directly inside a folder.
    ///
    /// Start with `Page.initialPageSortedByName`; pass each returned `nextPage` back until it is
    /// `nil`. Items whose names are unsafe (see ``Filename/validate(_:)``) are never returned.
    /// An entry with an impossible value (a size or date outside ``ItemBounds``) goes into the
    /// page's `refused` instead of its items.
    /// - Throws: `noSuchItem` when the folder does not exist; `pageExpired` when `page` is no
    ///   longer valid (the engine starts the listing again); `invalidArgument` when the
    ///   identifier is not a folder.
    func enumerateItems(in container: ItemIdentifier, startingAt page: Page)
        async throws(FileProviderError) -> ItemPage

    /// Returns the anchor that marks "now" in the change feed of a folder (or of
    /// `.workingSet` for the whole domain).
    ///
    /// - Throws: `notSupported` when `capabilities.hasChangeFeed` is false; `noSuchItem` when
    ///   the folder does not exist.
    func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor

    /// Returns what changed in a folder (or in the whole domain for `.workingSet`) since an
    /// anchor.
    ///
    /// - Throws: `notSupported` when `capabilities.hasChangeFeed` is false; `syncAnchorExpired`
    ///   when the feed no longer knows the anchor (the engine then enumerates from scratch).
    func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor)
        async throws(FileProviderError) -> ChangeSet

    /// Streams the contents of a file into `destination`, which the engine has created (unless
    /// the backend declares ``BackendCapabilities/createsFetchDestinations``: then, for a
    /// transfer from offset 0, the backend creates it; its folder exists).
    ///
    /// With `offset` greater than 0 the backend resumes an interrupted transfer: the first
    /// `offset` bytes are already in `destination`, and the backend appends the rest. A backend
    /// without `supportsRangedReads` ignores `offset`, truncates the file and writes it all.
    /// (To read a part of a file without truncating, see
    /// ``fetchPartialContents(for:version:range:into:)``.)
    /// Calls `progress` with the bytes written so far and the total when known. Hands every
    /// piece written to the engine's ``ContentSink`` for `destination`, if there is one
    /// (``ContentSink/for(_:)``), so that the download is hashed as it is written. Returns the
    /// item whose contents were written (its version is the one downloaded).
    /// - Throws: `noSuchItem` when the item is gone; `versionNoLongerAvailable` when `version`
    ///   is given and the store no longer has it; `invalidArgument` for a folder;
    ///   `localIOFailure` when `destination` cannot be written (disk full).
    func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64,
        progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item

    /// Streams the contents of several files, each into its own destination, as
    /// ``fetchContents(for:version:to:offset:progress:)`` does for one, and returns each
    /// file's outcome in the order of `requests`: the item whose contents were written, or the
    /// error that method would have thrown for it. One file's failure does not stop the others.
    ///
    /// The engine sends small files in batches. A backend that can fetch them more cheaply
    /// together implements this (the local backend copies a whole batch in one job on its own
    /// threads, with no hand-off between threads per file); the default fetches them one after
    /// another with ``fetchContents(for:version:to:offset:progress:)``. Once the calling task
    /// is cancelled, the files not started get `cancelled`.
    func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>]

    /// Writes bytes `range` of a file's contents, of exactly `version`'s contents, into
    /// `destination` at the same offsets: Apple's `fetchPartialContents(for:version:request:
    /// minimalRange:aligningTo:options:completionHandler:)`, without the alignment.
    ///
    /// `destination` exists (the engine made it, for example a sparse file of the item's size);
    /// the backend writes with positioned writes, never truncates or extends it beyond what it
    /// writes, and never writes outside `range`. The range written is `range` clamped to the
    /// item's size (`range.clamped(to: 0..<item.size)`): shorter when it crosses the end, empty
    /// (`size..<size`) when it starts at or past the end. Returns the item (its content version is
    /// `version.content`) and that range. After an error the bytes inside `range` are
    /// unspecified (a transfer may have stopped halfway); those outside it are untouched.
    /// Hands every piece written to the engine's ``ContentSink`` for `destination`, if there is
    /// one (the engine installs one when it fills a whole file this way, to hash it).
    /// - Throws: `notSupported` without `capabilities.supportsRangedReads` (the default
    ///   implementation); `invalidArgument` for a folder or a symlink, or a range that is empty
    ///   or starts below 0; `noSuchItem` when the item is gone; `versionNoLongerAvailable` when
    ///   the store's content version is not `version.content`, or the file changed while it was
    ///   read; `corruptData` when the store sent fewer bytes than the clamped range, more than
    ///   asked, or otherwise lied; `fileWriteOutOfSpace` when the disk holding `destination` is
    ///   full, `localIOFailure` when it cannot be written for another reason.
    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents

    /// Creates an item in the store from a template.
    ///
    /// Like ``modifyItem(_:baseVersion:changedFields:contents:options:)`` and
    /// ``deleteItem(identifier:baseVersion:options:)``, it changes nothing when it throws a
    /// refusal (``FileProviderError/Code/isRefusal``): the engine then sends the operation
    /// afresh next time. After any other error it replays it with `mayAlreadyExist`, which
    /// may replace what it finds at the name.
    ///
    /// The template's identifier is a temporary one chosen by the engine; the returned item
    /// carries the store's identifier, and the template's kind and name (the engine refuses any
    /// other item as `corruptData`, and records nothing). `contents` is a file to upload for a file, `nil` for a
    /// folder or a symlink (whose target is `template.symlinkTargetPath`); every piece read from
    /// it goes to the engine's ``ContentSink`` for it, if there is one (the upload is hashed as
    /// it is read), as for ``modifyItem(_:baseVersion:changedFields:contents:options:)``.
    /// - Throws: `filenameCollision` when an item with that name exists and `options` does not
    ///   contain `mayAlreadyExist` (with it, the existing item is returned when it is of the same
    ///   kind — a replay never creates a duplicate); `noSuchItem` when the parent does not
    ///   exist; `invalidFilename` for an unsafe name; `insufficientQuota` when the store is full;
    ///   `notSupported` for a kind the store cannot hold.
    func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult

    /// Changes an item: its contents, its name, its parent (a move) or its dates.
    ///
    /// `baseVersion` is the version the change was made against; the store must still have it.
    /// `item` carries the new values of the fields named in `changedFields`. A rename or move
    /// in a path-addressed store returns an item with a new identifier; any other change
    /// returns the same identifier, and every change the kind and the name asked for (the
    /// engine refuses another item as `corruptData`). The ``ItemResult`` names in
    /// `stillPendingFields` the fields to send again later, and sets `shouldFetchContent` when
    /// the store rewrote the bytes (the engine then downloads them).
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when the store's version
    ///   is not `baseVersion` (nothing is changed); `filenameCollision` when the new name is
    ///   taken; `invalidFilename` for an unsafe name; `insufficientQuota` when the store is full;
    ///   `notSupported` for a change the store cannot make (see capabilities).
    func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?,
        options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult

    /// Deletes an item.
    ///
    /// `baseVersion` is the version the deletion was decided against, or `nil` to delete
    /// whatever is there.
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when the store's
    ///   version is not `baseVersion`; `directoryNotEmpty` for a non-empty folder without
    ///   `recursive`; `deletionRejected` when the store refuses.
    func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)

    /// Returns a JPEG thumbnail of at most `size`×`size` pixels.
    ///
    /// - Throws: `notSupported` when `capabilities.supportsThumbnails` is false or the item is
    ///   not an image; `noSuchItem` when the item is gone.
    func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data

    /// Closes connections and releases resources. The backend is not used afterwards.
    func close() async
}

extension Backend {
    public func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError)
        -> SyncAnchor
    {
        throw FileProviderError(.notSupported, "this store has no change feed")
    }

    public func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor)
        async throws(FileProviderError) -> ChangeSet
    {
        throw FileProviderError(.notSupported, "this store has no change feed")
    }

    public func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError)
        -> Data
    {
        throw FileProviderError(.notSupported, "this store has no thumbnails")
    }

    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        throw FileProviderError(.notSupported, "this store has no ranged reads")
    }

    public func close() async {}

    /// Fetches the files one after another with ``fetchContents(for:version:to:offset:progress:)``.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        var results: [Result<Item, FileProviderError>] = []
        results.reserveCapacity(requests.count)
        for (index, request) in requests.enumerated() {
            if Task.isCancelled {
                results.append(.failure(FileProviderError(.cancelled, "cancelled")))
                continue
            }
            var fileProgress: ProgressHandler?
            if let progress { fileProgress = { completed, total in progress(index, completed, total) } }
            do throws(FileProviderError) {
                let item = try await fetchContents(
                    for: request.identifier, version: request.version, to: request.destination, offset: request.offset,
                    progress: fileProgress)
                results.append(.success(item))
            } catch {
                results.append(.failure(error))
            }
        }
        return results
    }

    /// Lists every item directly inside a folder, following pages.
    ///
    /// - Throws: what ``enumerateItems(in:startingAt:)`` throws; after a `pageExpired` the
    ///   listing starts again once.
    public func enumerateAllItems(in container: ItemIdentifier) async throws(FileProviderError) -> [Item] {
        try await listAllItems(in: container).items
    }

    /// Lists every item directly inside a folder, following pages, with the entries the pages
    /// left out because a value of theirs is impossible.
    ///
    /// - Throws: what ``enumerateItems(in:startingAt:)`` throws; after a `pageExpired` the
    ///   listing starts again once.
    public func listAllItems(in container: ItemIdentifier) async throws(FileProviderError) -> ItemListing {
        var restarted = false
        while true {
            var listing = ItemListing(items: [])
            var page: Page? = .initialPageSortedByName
            do throws(FileProviderError) {
                while let current = page {
                    let result = try await enumerateItems(in: container, startingAt: current)
                    // The first page's items are taken as they are (not copied one by one).
                    if listing.items.isEmpty {
                        listing.items = result.items
                    } else {
                        listing.items.append(contentsOf: result.items)
                    }
                    listing.refused.append(contentsOf: result.refused)
                    if listing.items.count + listing.refused.count > ItemBounds.maximumEntriesPerFolder {
                        throw ItemBounds.tooManyEntries(in: container.rawValue)
                    }
                    page = result.nextPage
                }
                return listing
            } catch where error.code == .pageExpired && !restarted {
                restarted = true
            }
        }
    }
}
