import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What a ``ReplicaFileSystem`` asks of the engine, from the FUSE session's threads: the bytes
/// of a dataless file a program reads (the progressive hydrator, or a whole-file fill, the
/// same fill path as fanotify's ``OnAccessHandler``), a whole file before a program changes it,
/// and the items of a dataless folder before a program lists it (the engine's population).
///
/// It feeds the folder read-ahead both on-access layouts share (``FolderReadAhead``): each open
/// is an open, each fetch for a program an access, which may start a read-ahead of the file's
/// folder; a program whose file a read-ahead batch is filling waits for that batch, and no file
/// is filled twice at once.
///
/// Each method blocks its thread (a FUSE worker, never Swift's cooperative pool) until the
/// engine's work, which runs as a task, is done. Inodes, names and attributes never come from
/// here: the file system answers those from the backing folder and the database.
final class ReplicaFetcher: Sendable {
    let manager: ProviderManager
    let domain: String
    let domainID: Int64
    /// ``Hydration/progressive`` only where the store has ranged reads.
    let hydration: Hydration
    let hydrator: ProgressiveHydrator
    let logger: Logger
    /// Fetches the small files of a folder that programs read file after file.
    let readAhead: FolderReadAhead
    /// The files (relative paths) being fetched now: their writes are the engine's.
    private let filling = Mutex<[String: Int]>([:])
    /// Whole-file fills under way, by file: how far each has written, for the reads that come
    /// while it runs, and its end as this fetcher follows it (recorded and logged).
    private let streaming = Mutex<[ProgressiveHydrator.FileKey: (watermark: FillWatermark, ended: Task<ItemRecord, any Error>)]>(
        [:])
    /// The longest a listing waits for its folder to be populated (then it lists what is on
    /// disk), as ``DatalessWatcher/holdLimit``.
    static let populateLimit = 30.0

    init(manager: ProviderManager, domain: String, domainID: Int64, hydration: Hydration, logger: Logger) {
        self.manager = manager
        self.domain = domain
        self.domainID = domainID
        self.hydration = hydration
        self.hydrator = ProgressiveHydrator(logger: logger)
        self.logger = logger
        readAhead = FolderReadAhead(engine: OnAccessContents(manager: manager, logger: logger), logger: logger)
    }

    /// A program opened the file at `path` (relative): the programs reading its folder are
    /// still at it (a read-ahead there keeps its lead ahead of their opens).
    func opened(_ path: String) { readAhead.opened(domainID: domainID, path: path) }

    /// Whether bytes `range` of the dataless file open as `descriptor` are known present (the
    /// progressive hydrator's ranges; a dataless file's data blocks are not: its first block
    /// holds zeros). What a program that may not fetch may read. No fetch.
    func holds(descriptor: Int32, range: Range<Int64>) -> Bool {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        let key = ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        return hydrator.holds(key, range: range, changeTime: ProgressiveHydrator.changeTime(status))
    }

    /// Returns once bytes `range` of the dataless file open as `descriptor`, at `path` (relative
    /// to the backing folder), are present: at once when they are, else after the batch of a
    /// folder read-ahead that is filling it, else after fetching them for the process
    /// `program` (an access, which may start a read-ahead of the folder).
    ///
    /// With `answer` (a program's read, which `answer` answers from `descriptor`), a read that
    /// a whole-file fill covers (`--hydration full`, a store without ranged reads) and that ends
    /// before the end of the file does not wait for the whole file: `answer` runs as soon as the
    /// fill has written the read's bytes, while they cannot be given back (``FillWatermark``),
    /// and the fill goes on. A read of the end of the file waits for the fill to end, as every
    /// read did before (a small file's first read is a read of its end). Otherwise the caller
    /// answers once this returns.
    /// - Throws: `noSuchItem` when the database knows no item at `path` for this file (moved
    ///   since the last sync); what the fetch throws (`serverUnreachable`, ...).
    func provide(
        _ path: String, descriptor: Int32, range: Range<Int64>, program: Int32, answer: (() -> Void)? = nil
    ) throws(FileProviderError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw FileProviderError(.localIOFailure, "cannot read the state of \(path)") }
        let key = ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        let changeTime = ProgressiveHydrator.changeTime(status)
        if hydrator.isPresent(key, range: range, changeTime: changeTime) { return }
        // The bytes a read needs: up to the end of the file (none past it).
        let needed = min(range.upperBound, Int64(status.st_size))
        let streams = needed > range.lowerBound && needed < Int64(status.st_size)
        if let answer, streams, let watermark = streaming.withLock({ $0[key]?.watermark }), watermark.answer(through: needed, answer) {
            return
        }
        guard Replica.datalessKey(ofDescriptor: descriptor) != nil else { return }
        let record = try item(path, descriptor: descriptor)
        let (manager, hydrator, hydration, domain, domainID) = (self.manager, self.hydrator, self.hydration, self.domain, self.domainID)
        let readAhead = self.readAhead
        let started = Date()
        startFilling(path)
        defer { stopFilling(path) }
        let fetched = try Self.wait { () async throws(FileProviderError) -> Fetched in
            // Filled meanwhile by a read-ahead of its folder; else counted towards one.
            if await readAhead.accessed(domain: domain, domainID: domainID, path: path, program: program) { return .readAhead }
            let controller = try await manager.controller(for: domain)
            if hydration == .progressive {
                do throws(FileProviderError) {
                    _ = try await hydrator.provide(
                        record, key: key, changeTime: changeTime, range: range, downloader: controller.downloader)
                    return .range
                } catch  where error.code == .notSupported {
                    // The store turned out to have no ranged reads: the whole file.
                }
            }
            let (task, watermark) = controller.downloader.startFill(record)
            return .filling(task, watermark)
        }
        manager.useRecorder.used(domainID: domainID, path: path)
        switch fetched {
        case .readAhead: return
        case .range: manager.requestEviction()
        case .filling(let task, let watermark):
            let ended = follow(task, watermark, key: key, path: path, size: record.size, started: started)
            if let answer, streams, watermark.answer(through: needed, answer) { return }
            // The end of the file, or bytes the fill has not written by its end (it failed, or
            // staged the file): its outcome, once recorded, logged and eviction asked for.
            _ = try Self.wait { () async throws(FileProviderError) -> ItemRecord in
                do { return try await ended.value } catch { throw FileProviderError.wrap(error) }
            }
        }
    }

    /// How ``provide(_:descriptor:range:program:answer:)`` got the bytes.
    private enum Fetched: Sendable {
        /// A read-ahead batch filled the file.
        case readAhead
        /// The progressive hydrator fetched the range (the file may be whole now).
        case range
        /// A whole-file fill is under way (started or joined), with how far it has written.
        case filling(Task<ItemRecord, any Error>, FillWatermark)
    }

    /// Makes the whole-file fill of the file `key` at `path` known to the reads that come while
    /// it runs, once (the first reader that joins it): until it ends, the file counts as being
    /// filled (``isFilling(_:)``) and reads are answered from its watermark. Returns the fill's
    /// end as followed here: its outcome once it is forgotten here and, done, logged.
    private func follow(
        _ task: Task<ItemRecord, any Error>, _ watermark: FillWatermark, key: ProgressiveHydrator.FileKey, path: String, size: Int64,
        started: Date
    ) -> Task<ItemRecord, any Error> {
        streaming.withLock { fills in
            if let known = fills[key], known.watermark === watermark { return known.ended }
            startFilling(path)
            let (domain, logger, manager) = (self.domain, self.logger, self.manager)
            let ended = Task { [self] () async throws -> ItemRecord in
                let outcome = await task.result
                streaming.withLock { fills in
                    if fills[key]?.watermark === watermark { fills[key] = nil }
                }
                stopFilling(path)
                if case .success = outcome {
                    logger.info(
                        "\(domain): \(TerminalText.quoted(path)): fetched on access (\(size) bytes in \(String(format: "%.2f", Date().timeIntervalSince(started))) s)"
                    )
                    manager.requestEviction()
                }
                return try outcome.get()
            }
            fills[key] = (watermark, ended)
            return ended
        }
    }

    /// Whether the file at `path` (relative) is being fetched now: what `serve`'s watcher sees
    /// written there is the engine's, not a program's. Any thread.
    func isFilling(_ path: String) -> Bool {
        filling.withLock { $0[path] != nil } || hydrator.isFetching(domain: domain, path: path)
            || readAhead.isFilling(domain: domain, path: path)
    }

    private func startFilling(_ path: String) { filling.withLock { $0[path, default: 0] += 1 } }

    private func stopFilling(_ path: String) {
        filling.withLock { filling in
            let count = (filling[path] ?? 1) - 1
            filling[path] = count > 0 ? count : nil
        }
    }

    /// Makes the dataless file at `path` whole before the process `program` changes it (opens it
    /// for writing, truncates it, writes through a map). Nothing when it is complete already.
    /// - Throws: as ``provide(_:descriptor:range:program:)``.
    func complete(_ path: String, absolute: String, program: Int32) throws(FileProviderError) {
        let descriptor = open(absolute, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, Replica.datalessKey(ofDescriptor: descriptor) != nil else { return }
        try provide(path, descriptor: descriptor, range: 0..<Int64(status.st_size), program: program)
        guard Replica.datalessKey(ofDescriptor: descriptor) != nil else { return }
        // Every byte is there but the file could not be completed (another program has it open
        // for writing): completed as a local edit, as fanotify's handler does for a write.
        let record = try item(path, descriptor: descriptor)
        let key = ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        let (manager, hydrator, domain) = (self.manager, self.hydrator, self.domain)
        let changeTime = ProgressiveHydrator.changeTime(status)
        startFilling(path)
        defer { stopFilling(path) }
        try Self.wait { () async throws(FileProviderError) in
            let controller = try await manager.controller(for: domain)
            try await hydrator.modified(record, key: key, changeTime: changeTime, downloader: controller.downloader)
        }
    }

    /// The program emptied the dataless file open as `descriptor` (`O_TRUNC`, a truncate to 0):
    /// nothing to fetch; without its mark it is an ordinary file at the item's path, which the
    /// next sync sends as an edit of the item.
    /// - Throws: `localIOFailure` when the mark cannot be removed.
    func emptied(_ path: String, descriptor: Int32) throws(FileProviderError) {
        guard ExtendedAttribute.remove(Replica.datalessAttribute, of: descriptor) == 0 || errno == ENODATA else {
            throw FileProviderError(.localIOFailure, "\(path): cannot clear the dataless mark: \(String(cString: strerror(errno)))")
        }
        hydrator.forget { $0.path == path }
        logger.info("\(domain): \(TerminalText.quoted(path)) emptied through the mount; no download needed")
    }

    /// Records why a fetch of the item at `path` failed, as its last error (`why` shows it).
    func recordFailure(_ error: FileProviderError, path: String) {
        let store = manager.store
        guard var record = try? store.item(domainID: domainID, path: path) else { return }
        record.lastError = "fetch on access failed: \(error.message)"
        _ = try? store.apply(domainID: domainID, upserts: [record], deletions: [])
    }

    /// Writes the items of the folder at `path` to the backing folder when the database says it
    /// is dataless; returns whether its items are on disk now (false: the population failed or
    /// took longer than ``populateLimit``, and the folder lists what is there).
    func populateIfDataless(_ path: String) -> Bool {
        let found: ItemRecord?
        do { found = try manager.store.item(domainID: domainID, path: path) } catch { return false }
        // Not in the database (made through the mount, not synced yet), or not dataless.
        guard let record = found, record.kind == .folder, record.isDataless else { return true }
        let (manager, domain, logger) = (self.manager, self.domain, self.logger)
        let populated = try? Self.wait(limit: Self.populateLimit) { () async throws(FileProviderError) -> Bool in
            let controller = try await manager.controller(for: domain)
            var worked = true
            for outcome in await controller.populate(paths: [path], recursive: false) {
                if let error = outcome.error {
                    logger.warning("\(domain): \(TerminalText.quoted(outcome.path)): not populated: \(error.message)")
                    worked = false
                }
            }
            return worked
        }
        return populated ?? false
    }

    /// The item the database knows at `path`, whose identifier matches the mark of the dataless
    /// file open as `descriptor`. When none does, the file was moved or renamed since the last
    /// sync: a sync records the move first (as fanotify's handler does), then the item is at
    /// `path` (and the file may carry the item's new identifier, where the store names items by
    /// path).
    /// - Throws: `noSuchItem` when there is none even then; `localIOFailure` when the database
    ///   cannot be read.
    private func item(_ path: String, descriptor: Int32) throws(FileProviderError) -> ItemRecord {
        if let record = try recorded(path, descriptor: descriptor) { return record }
        logger.info("\(domain): \(TerminalText.quoted(path)): moved since the last sync; syncing before fetching it")
        let (manager, domain) = (self.manager, self.domain)
        try? Self.wait { () async throws(FileProviderError) in
            _ = try await manager.controller(for: domain).sync(upload: true)
        }
        guard let record = try recorded(path, descriptor: descriptor) else {
            throw FileProviderError(
                .noSuchItem, "no item is recorded at \(path) for this file (moved since the last sync?); it is fetched once sync records it"
            )
        }
        return record
    }

    /// The item at `path` if its identifier matches the mark of the file open as `descriptor`.
    private func recorded(_ path: String, descriptor: Int32) throws(FileProviderError) -> ItemRecord? {
        guard let record = try manager.store.item(domainID: domainID, path: path),
            PlaceholderOwner.key(record.identifier.rawValue) == Replica.datalessKey(ofDescriptor: descriptor)
        else { return nil }
        return record
    }

    /// Runs `body` as a task and blocks this thread (never one of the cooperative pool's) until
    /// it is done, or until `limit` seconds passed.
    /// - Throws: what `body` throws; `cancelled`-like `serverUnreachable` when `limit` passed.
    static func wait<T: Sendable>(
        limit: Double? = nil, _ body: @escaping @Sendable () async throws(FileProviderError) -> T
    ) throws(FileProviderError) -> T {
        let result = Mutex<Result<T, FileProviderError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            do throws(FileProviderError) {
                let value = try await body()
                result.withLock { $0 = .success(value) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        if let limit {
            if done.wait(timeout: .now() + limit) == .timedOut {
                task.cancel()
                throw FileProviderError(.serverUnreachable, "not done within \(Int(limit)) s")
            }
        } else {
            done.wait()
        }
        guard let outcome = result.withLock({ $0 }) else { throw FileProviderError(.localIOFailure, "no result") }
        return try outcome.get()
    }
}
