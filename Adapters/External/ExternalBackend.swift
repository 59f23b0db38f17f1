import Foundation
import ProviderCore

/// A backend that is a program of its own, `fileprovider-backend-NAME`, spoken to over its
/// standard input and output with the line protocol of Docs/ExternalBackends.md.
///
/// One program runs per backend (per domain). Several requests are in flight at once, each
/// with its id. When the program dies, every pending request fails at once with
/// `serverUnreachable` naming the program, how it ended and the tail of its error output; the
/// next call starts it again. Contents never travel through the pipe: the program reads and
/// writes the files whose paths it is given. Everything the program sends is checked where it
/// is decoded (names, identifiers, sizes, dates, versions, tokens): a malformed line is
/// `corruptData`.
public final class ExternalBackend: Backend, @unchecked Sendable {
    /// The kind name (`NAME` of `fileprovider-backend-NAME`).
    public let kind: String
    /// The program's path.
    public let programPath: String
    public let capabilities: BackendCapabilities
    private let options: [String: String]
    private let displayName: String
    /// How long the program may stay silent while requests wait (``defaultSilenceLimit``).
    private let silenceLimit: Double
    /// How long a program whose input was closed has to exit (``defaultStopGrace``).
    private let stopGrace: Double

    /// How long, in seconds, a program may send nothing at all (no reply, no progress) while
    /// requests wait for it before it is stopped: a program that hangs fails its requests with
    /// `serverUnreachable` instead of holding a sync for ever. Long work sends progress.
    public static let defaultSilenceLimit: Double = 120

    /// How long, in seconds, a program has to exit once its input is closed before it gets
    /// `SIGTERM`, and then `SIGKILL` after as long again: a program that ignores the end of its
    /// input is not left running after a command.
    public static let defaultStopGrace: Double = 2

    private let lock = NSLock()
    private var program: BackendProgram?
    private var starting: Task<BackendProgram, any Error>?
    private var isClosed = false

    private init(
        kind: String, programPath: String, options: [String: String], silenceLimit: Double, stopGrace: Double,
        program: BackendProgram, capabilities: BackendCapabilities
    ) {
        self.kind = kind
        self.silenceLimit = silenceLimit
        self.stopGrace = stopGrace
        self.programPath = programPath
        self.options = options
        self.program = program
        self.capabilities = capabilities
        displayName = program.displayName
    }

    deinit { program?.stop() }

    /// Starts the program, says hello and opens the store with `options`.
    ///
    /// - Throws: `serverUnreachable` when the program cannot be started or dies;
    ///   `notSupported` when it speaks no protocol version this side speaks; `corruptData` for
    ///   a malformed reply; what the program answers to `open` (typically `invalidArgument`).
    ///
    /// `silenceLimit`: how long, in seconds, the program may send no reply and no progress
    /// that advances while requests wait for it before it is stopped and they fail with
    /// `serverUnreachable` (120 by default). `stopGrace`: how long, in seconds, it has to exit
    /// once its input is closed before it gets `SIGTERM`, then `SIGKILL` (2 by default).
    public static func start(
        kind: String, programPath: String, options: [String: String], silenceLimit: Double = ExternalBackend.defaultSilenceLimit,
        stopGrace: Double = ExternalBackend.defaultStopGrace
    ) async throws(FileProviderError)
        -> ExternalBackend
    {
        let (program, capabilities) = try await launch(
            kind: kind, path: programPath, options: options, silenceLimit: silenceLimit, stopGrace: stopGrace)
        return ExternalBackend(
            kind: kind, programPath: programPath, options: options, silenceLimit: silenceLimit, stopGrace: stopGrace, program: program,
            capabilities: capabilities)
    }

    /// How long a program has to answer `hello` and `open`, in seconds.
    static let handshakeTimeout: Double = 30

    static func displayName(kind: String) -> String { ExternalBackends.programPrefix + kind }

    /// Starts the program (or takes the one started to describe it, ``ParkedPrograms``), says
    /// hello when it has not and opens the store.
    private static func launch(
        kind: String, path: String, options: [String: String], silenceLimit: Double, stopGrace: Double
    ) async throws(FileProviderError) -> (BackendProgram, BackendCapabilities) {
        let parked = ParkedPrograms.shared.take(path: path, silenceLimit: silenceLimit, stopGrace: stopGrace)
        let program: BackendProgram
        if let parked {
            program = parked.program
        } else {
            program = try BackendProgram(
                path: path, displayName: displayName(kind: kind), silenceLimit: silenceLimit, stopGrace: stopGrace)
        }
        // A program that never answers must not hold up the domain for ever.
        let watchdog = Task {
            try? await Task.sleep(for: .seconds(handshakeTimeout))
            if !Task.isCancelled {
                program.stop(kill: true, reason: "did not answer hello and open within \(Int(handshakeTimeout)) s")
            }
        }
        defer { watchdog.cancel() }
        do {
            let hello: HelloResult
            if let parked { hello = parked.hello } else { hello = try await Self.hello(program) }
            let opened = try await call(program, "open", OpenParams(options: options), OpenResult.self)
            let capabilities = try (opened.capabilities ?? hello.capabilities ?? WireCapabilities())
                .capabilities(program: program.displayName)
            program.watchForSilence()
            return (program, capabilities)
        } catch {
            program.stop(kill: true)
            throw error
        }
    }

    static func hello(_ program: BackendProgram) async throws(FileProviderError) -> HelloResult {
        let hello = try await call(program, "hello", HelloParams(versions: WireCoding.versions), HelloResult.self)
        guard WireCoding.versions.contains(hello.version) else {
            throw FileProviderError(
                .notSupported,
                "\(program.displayName) speaks protocol version \(hello.version); this fileproviderctl speaks \(WireCoding.versions.map(String.init).joined(separator: ", "))"
            )
        }
        return hello
    }

    /// The running program, started again when it has ended.
    private func connection() async throws(FileProviderError) -> BackendProgram {
        enum Next {
            case closed
            case running(BackendProgram)
            case waiting(Task<BackendProgram, any Error>)
        }
        let next: Next = lock.withLock {
            if isClosed { return .closed }
            if starting == nil, let program, !program.hasEnded { return .running(program) }
            if let starting { return .waiting(starting) }
            let kind = kind
            let path = programPath
            let (options, silenceLimit, stopGrace) = (options, silenceLimit, stopGrace)
            let task = Task<BackendProgram, any Error> {
                try await Self.launch(kind: kind, path: path, options: options, silenceLimit: silenceLimit, stopGrace: stopGrace).0
            }
            starting = task
            return .waiting(task)
        }
        let task: Task<BackendProgram, any Error>
        switch next {
        case .closed: throw FileProviderError(.cancelled, "the \(kind) backend is closed")
        case .running(let program): return program
        case .waiting(let waiting): task = waiting
        }
        do {
            let program = try await task.value
            lock.withLock {
                if starting == task {
                    starting = nil
                    self.program = program
                }
            }
            return program
        } catch {
            lock.withLock { if starting == task { starting = nil } }
            throw FileProviderError.wrap(error, as: .serverUnreachable)
        }
    }

    private func call<R: Decodable>(_ method: String, _ params: some Encodable, _ type: R.Type, progress: ProgressHandler? = nil)
        async throws(FileProviderError) -> R
    {
        let program = try await connection()
        return try await Self.call(program, method, params, type, progress: progress)
    }

    /// Sends one request and waits for its reply; cancelling the task cancels the request.
    static func call<R: Decodable>(
        _ program: BackendProgram, _ method: String, _ params: some Encodable, _ type: R.Type, progress: ProgressHandler? = nil
    ) async throws(FileProviderError) -> R {
        if Task.isCancelled { throw FileProviderError(.cancelled, "cancelled") }
        let request = RequestHandle()
        let outcome: Result<Data, FileProviderError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let id = program.send(method: method, params: params, progress: progress) { continuation.resume(returning: $0) }
                if request.started(id) { program.cancel(id) }
            }
        } onCancel: {
            if let id = request.cancel() { program.cancel(id) }
        }
        let line = try outcome.get()
        return try WireCoding.result(type, from: line, program: program.displayName, method: method)
    }

    // MARK: Backend

    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        let reply = try await call("item", IdentifierParams(identifier: identifier.rawValue), ItemReply.self)
        return try answering(identifier, try reply.item.checkedItem(program: displayName))
    }

    /// `item` when it is the one asked for.
    /// - Throws: `corruptData` when the program answered with another item.
    private func answering(_ identifier: ItemIdentifier, _ item: Item) throws(FileProviderError) -> Item {
        guard item.identifier == identifier else {
            throw FileProviderError(
                .corruptData, "\(displayName) answered a request for \(identifier.rawValue) with the item \(item.identifier.rawValue)")
        }
        return item
    }

    public func enumerateItems(in container: ItemIdentifier, startingAt page: Page) async throws(FileProviderError) -> ItemPage {
        let reply = try await call(
            "enumerate", EnumerateParams(container: container.rawValue, page: WireBytes(page.rawValue)), EnumerateResult.self)
        var sorter = ListingSorter(capacity: reply.items.count)
        for wire in reply.items {
            sorter.add(wire.item(program: displayName)) { item in
                item.parentIdentifier == container ? nil : "it is listed in \(container.rawValue) but names another parent"
            }
        }
        var next: Page?
        if let token = reply.nextPage {
            guard token.data.count <= Page.maximumLength else {
                throw FileProviderError(.corruptData, "\(displayName) sent a page token over \(Page.maximumLength) bytes")
            }
            next = Page(token.data)
        }
        return ItemPage(items: sorter.items, nextPage: next, refused: sorter.refused)
    }

    public func currentSyncAnchor(for container: ItemIdentifier) async throws(FileProviderError) -> SyncAnchor {
        guard capabilities.hasChangeFeed else { throw FileProviderError(.notSupported, "this store has no change feed") }
        let reply = try await call("anchor", ContainerParams(container: container.rawValue), AnchorResult.self)
        return try anchor(reply.anchor)
    }

    public func enumerateChanges(in container: ItemIdentifier, from anchor: SyncAnchor) async throws(FileProviderError) -> ChangeSet {
        guard capabilities.hasChangeFeed else { throw FileProviderError(.notSupported, "this store has no change feed") }
        let reply = try await call(
            "changes", ChangesParams(container: container.rawValue, anchor: WireBytes(anchor.rawValue)), ChangesResult.self)
        var sorter = ListingSorter(capacity: reply.updated.count, refusesRepeats: false)
        for wire in reply.updated { sorter.add(wire.item(program: displayName)) }
        var deleted: [ItemIdentifier] = []
        for raw in reply.deleted { deleted.append(try checkedIdentifier(raw, program: displayName)) }
        return ChangeSet(
            updatedItems: sorter.items, deletedIdentifiers: deleted, newAnchor: try self.anchor(reply.anchor),
            moreComing: reply.moreComing ?? false, refused: sorter.refused)
    }

    private func anchor(_ token: WireBytes) throws(FileProviderError) -> SyncAnchor {
        guard token.data.count <= SyncAnchor.maximumLength else {
            throw FileProviderError(.corruptData, "\(displayName) sent a sync anchor over \(SyncAnchor.maximumLength) bytes")
        }
        return SyncAnchor(token.data)
    }

    public func fetchContents(
        for identifier: ItemIdentifier, version: ItemVersion?, to destination: URL, offset: Int64, progress: ProgressHandler?
    ) async throws(FileProviderError) -> Item {
        guard offset >= 0 else { throw FileProviderError(.invalidArgument, "a fetch offset cannot be negative") }
        let params = FetchParams(
            identifier: identifier.rawValue, version: version.map(WireVersion.init), path: destination.path,
            offset: capabilities.supportsRangedReads ? offset : 0, length: nil)
        let reply = try await call("fetch", params, FetchResult.self, progress: progress)
        let item = try answering(identifier, try reply.item.checkedItem(program: displayName))
        guard item.kind != .folder else {
            throw FileProviderError(.corruptData, "\(displayName) fetched the contents of a folder")
        }
        if let version, item.version.content != version.content {
            throw FileProviderError(
                .versionNoLongerAvailable,
                "\(displayName) was asked for one version of \(identifier.rawValue) and wrote another (a program answers versionNoLongerAvailable when the version asked for is gone); the contents were not kept, the item is listed again at the next sync"
            )
        }
        return item
    }

    /// Fetches the files of a batch with up to 16 requests in flight.
    public func fetchContents(_ requests: [ContentRequest], progress: BatchProgressHandler?) async -> [Result<Item, FileProviderError>] {
        var results = [Result<Item, FileProviderError>](
            repeating: .failure(FileProviderError(.cancelled, "cancelled")), count: requests.count)
        await withTaskGroup(of: (Int, Result<Item, FileProviderError>).self) { group in
            var next = 0
            func add() {
                let index = next
                let request = requests[index]
                next += 1
                group.addTask {
                    var fileProgress: ProgressHandler?
                    if let progress { fileProgress = { completed, total in progress(index, completed, total) } }
                    do throws(FileProviderError) {
                        let item = try await self.fetchContents(
                            for: request.identifier, version: request.version, to: request.destination, offset: request.offset,
                            progress: fileProgress)
                        return (index, .success(item))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            while next < requests.count && next < 16 { add() }
            for await (index, result) in group {
                results[index] = result
                if next < requests.count { add() }
            }
        }
        return results
    }

    public func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        guard capabilities.supportsRangedReads else { throw FileProviderError(.notSupported, "this store has no ranged reads") }
        try PartialContents.validate(range)
        let params = FetchParams(
            identifier: identifier.rawValue, version: WireVersion(version), path: destination.path, offset: range.lowerBound,
            length: Int64(range.count))
        let reply = try await call("fetch", params, FetchResult.self)
        let item = try answering(identifier, try reply.item.checkedItem(program: displayName))
        let expected = PartialContents.clamp(range, toSize: item.size)
        guard reply.offset == expected.lowerBound, reply.length == Int64(expected.count) else {
            throw FileProviderError(
                .corruptData,
                "\(displayName) says it wrote \(reply.offset.map(String.init) ?? "?")+\(reply.length.map(String.init) ?? "?") for a read of \(expected.lowerBound)..<\(expected.upperBound)"
            )
        }
        guard item.version.content == version.content else {
            throw FileProviderError(.versionNoLongerAvailable, "\(identifier.rawValue) changed while it was read")
        }
        return PartialContents(item: item, range: expected)
    }

    private static func createOptionNames(_ options: CreateOptions) -> [String] {
        (options.contains(.mayAlreadyExist) ? ["mayAlreadyExist"] : [])
            + (options.contains(.deletionConflicted) ? ["deletionConflicted"] : [])
    }

    private func itemResult(_ reply: ItemResultReply) throws(FileProviderError) -> ItemResult {
        ItemResult(
            item: try reply.item.checkedItem(program: displayName),
            stillPendingFields: try WireFields.decode(reply.stillPendingFields ?? [], program: displayName),
            shouldFetchContent: reply.shouldFetchContent ?? false)
    }

    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let params = CreateParams(
            template: WireItem(template), fields: WireFields.encode(fields), contents: contents?.path,
            options: Self.createOptionNames(options))
        return try itemResult(try await call("create", params, ItemResultReply.self))
    }

    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let params = ModifyParams(
            item: WireItem(item), baseVersion: WireVersion(baseVersion), changedFields: WireFields.encode(changedFields),
            contents: contents?.path, options: options.contains(.mayAlreadyExist) ? ["mayAlreadyExist"] : [])
        return try itemResult(try await call("modify", params, ItemResultReply.self))
    }

    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions) async throws(FileProviderError) {
        let params = DeleteParams(
            identifier: identifier.rawValue, baseVersion: baseVersion.map(WireVersion.init),
            options: options.contains(.recursive) ? ["recursive"] : [])
        _ = try await call("delete", params, EmptyResult.self)
    }

    /// The largest thumbnail read back from the program's file: 16 MiB.
    static let maximumThumbnailSize = 16 << 20

    public func fetchThumbnail(for identifier: ItemIdentifier, size: Int) async throws(FileProviderError) -> Data {
        guard capabilities.supportsThumbnails else { throw FileProviderError(.notSupported, "this store has no thumbnails") }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-thumbnail-\(UUID().uuidString).jpg")
        guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw FileProviderError(.localIOFailure, "cannot create \(url.path)")
        }
        defer { try? FileManager.default.removeItem(at: url) }
        _ = try await call("thumbnail", ThumbnailParams(identifier: identifier.rawValue, size: size, path: url.path), EmptyResult.self)
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw FileProviderError(.localIOFailure, "cannot read \(url.path)")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: Self.maximumThumbnailSize + 1)) ?? Data()
        guard data.count <= Self.maximumThumbnailSize else {
            throw FileProviderError(.corruptData, "\(displayName) wrote a thumbnail over \(Self.maximumThumbnailSize) bytes")
        }
        guard !data.isEmpty else { throw FileProviderError(.corruptData, "\(displayName) wrote an empty thumbnail") }
        return data
    }

    /// Closes the program's input and returns once it has exited: a program exits when its
    /// input ends; one still running after ``defaultStopGrace`` (the `stopGrace` of
    /// ``start(kind:programPath:options:silenceLimit:stopGrace:)``) gets `SIGTERM`, then
    /// `SIGKILL` after as long again.
    public func close() async {
        let current = lock.withLock {
            isClosed = true
            starting?.cancel()
            return program
        }
        guard let current else { return }
        current.stop()
        await current.waitUntilEnded()
    }
}

/// The id of a request and whether its task was cancelled, whichever comes first.
private final class RequestHandle: @unchecked Sendable {
    private let lock = NSLock()
    private var id: Int?
    private var isCancelled = false

    /// Records the id; `true` when the task was cancelled already (cancel the request).
    func started(_ id: Int) -> Bool {
        lock.withLock {
            self.id = id
            return isCancelled
        }
    }

    /// Records the cancellation; the id when the request was sent already.
    func cancel() -> Int? {
        lock.withLock {
            isCancelled = true
            return id
        }
    }
}
