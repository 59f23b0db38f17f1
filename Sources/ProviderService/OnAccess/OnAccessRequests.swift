import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderSystem

/// What the on-access path decides and does for a program's access of a served file, without
/// the kernel: which served domain and item the file is, whether the bytes the access needs
/// are there, fetching them through the engine (``OnAccessResolving``), what is recorded, and
/// how the access is answered. ``OnAccessHandler`` reads the kernel's events, asks this type,
/// and gives the kernel its answers; tests drive it with a fake engine and fake files.
///
/// - A file that is not dataless (complete) is allowed and no longer watched.
/// - A dataless file is filled where it stands (one download per item however many programs
///   wait; with progressive hydration, the bytes the access needs), then allowed.
/// - A dataless file a program emptied while opening it (`O_TRUNC`, `> file`) needs no
///   download: it loses its dataless mark and becomes an ordinary local edit.
/// - A failure (store unreachable, item gone, disk full) denies the access with EIO (ENOSPC
///   for a full disk), recorded as the item's last error (`why`); the next access tries again.
///
/// Any thread; its work runs in tasks. Blocking work goes through the engine's side and the
/// ``AccessedDescriptor``, never on Swift's cooperative pool.
package final class OnAccessRequests: Sendable {
    /// A domain whose replica path is served.
    package struct Served: Sendable, Equatable {
        package let name: String
        package let domainID: Int64
        /// The replica path as this process's `/proc/self/fd` links show it, with a final `/`.
        package let prefix: String
        /// How its files are fetched: ``Hydration/progressive`` only where the backend has
        /// ranged reads.
        package let hydration: Hydration

        package init(name: String, domainID: Int64, prefix: String, hydration: Hydration) {
            self.name = name
            self.domainID = domainID
            self.prefix = prefix
            self.hydration = hydration
        }
    }

    /// The file an access is about: its identity, change time and the bytes the access needs.
    package struct Access: Sendable, Equatable {
        package let key: ProgressiveHydrator.FileKey
        package let changeTime: Int64
        package let range: Range<Int64>

        /// The access of `count` bytes at `offset` of a file of `size` bytes; a `count` of 0
        /// (the kernel sent no range: an open, a truncate, an exec) needs the whole file. A range
        /// past `Int64.max` ends there.
        package init(device: UInt64, inode: UInt64, changeTime: Int64, size: Int64, offset: UInt64, count: UInt64) {
            key = ProgressiveHydrator.FileKey(device: device, inode: inode)
            self.changeTime = changeTime
            let start = Int64(clamping: offset)
            let (end, overflow) = start.addingReportingOverflow(Int64(clamping: count))
            range = count == 0 ? 0..<max(0, size) : start..<(overflow ? Int64.max : end)
        }
    }

    /// What an accessed file turned out to be.
    package enum Resolution: Sendable, Equatable {
        /// Contents complete (or not ours): let the access go on and stop watching the file.
        case complete
        /// Emptied by the program opening it: no download needed.
        case emptied(served: Served, path: String, access: Access)
        /// Dataless: fill it first (or, with progressive hydration, the bytes the access needs).
        /// `key` is the item key of the file's dataless mark.
        case dataless(served: Served, path: String, key: UInt64, access: Access)
        /// Partially present and the bytes the access needs are there: let it go on, keep
        /// watching the file.
        case present
        /// Cannot be served: fail the access.
        case refused(String)
    }

    /// How to answer an access.
    package enum Answer: Sendable, Equatable {
        /// The access goes on; with `ignore`, the file is complete and no longer watched.
        case allow(ignore: Bool)
        /// The access fails with this error.
        case deny(PreContentGroup.DenyReason)
    }

    /// Runs a sync of a domain (upload included) that compares at least the folder of the file
    /// at `path` (relative), so that a local move or edit there is recorded or sent.
    package typealias Synchronize = @Sendable (_ domain: String, _ path: String) async -> Void

    /// Files up to this size are filled whole before a program's open of them returns (with
    /// progressive hydration; with full hydration every file is): the program's first `fstat`
    /// then sees the change time the file keeps. `tar` compares the change time after its open
    /// with the one after reading and says "file changed as we read it" (exit 1) when a fill
    /// ran in between. Larger files are fetched as they are read, so an open does not wait
    /// for gigabytes, except by the programs of ``wholeFileReaders``.
    static let fillOnOpenLimit: Int64 = 16 << 20

    /// Programs (their `comm`, as `/proc/PID/comm` names them) whose open of a dataless file
    /// waits until it is whole, whatever its size: archivers read every byte anyway, and a fill
    /// while they read changes the change time they compare after reading (`tar`: "file
    /// changed as we read it", exit 1) and leaves holes that `tar --sparse` maps (`SEEK_DATA`)
    /// and archives as zeros.
    static let wholeFileReaders: Set<String> = ["tar", "gtar", "bsdtar"]

    let engine: any OnAccessResolving
    let logger: Logger
    /// Asked for when a dataless file is not where the database has it (moved or renamed
    /// locally since the last sync), and after a program's write into a partly present file
    /// made it whole.
    let synchronize: Synchronize?
    /// Fetches the small files of a folder that programs read file after file.
    let readAhead: FolderReadAhead
    private let served = Mutex<[Served]>([])
    /// The files being filled, as `domain/relative path`: their writes are the engine's.
    private let filling = Mutex<Set<String>>([])
    /// Work in flight, for ``finish()``.
    private let running = Mutex<[UUID: Task<Void, Never>]>([:])

    init(engine: any OnAccessResolving, logger: Logger, synchronize: Synchronize?, readAhead: FolderReadAhead? = nil) {
        self.engine = engine
        self.logger = logger
        self.synchronize = synchronize
        self.readAhead = readAhead ?? FolderReadAhead(engine: engine, logger: logger)
    }

    // MARK: Domains

    /// Serves `domain` from now on.
    package func add(_ domain: Served) { served.withLock { $0.append(domain) } }

    /// The domains served, in the order they were added.
    package var domains: [Served] { served.withLock { $0 } }

    /// The served domain whose replica path holds `path` (the deepest, when one is inside
    /// another), or `nil`.
    package func servedDomain(containing path: String) -> Served? {
        served.withLock { $0 }.filter { path.hasPrefix($0.prefix) }.max { $0.prefix.count < $1.prefix.count }
    }

    /// Whether the file at `path` (relative) of `domain` is being filled now.
    package func isFilling(domain: String, path: String) -> Bool {
        filling.withLock { $0.contains(domain + "/" + path) } || engine.isFetching(domain: domain, path: path)
            || readAhead.isFilling(domain: domain, path: path)
    }

    // MARK: Deciding

    /// Whether an open of a dataless file of `size` bytes by the process `program` waits until
    /// it is filled whole. `programName` (the process's `comm`) is asked only for a large file
    /// of a progressive domain.
    static func fillsOnOpen(_ hydration: Hydration, size: Int64, program: Int32, programName: (Int32) -> String?) -> Bool {
        if hydration == .full || size <= fillOnOpenLimit { return true }
        return programName(program).map(wholeFileReaders.contains) ?? false
    }

    /// What the accessed file is. `size` is its size now; `mark` reads its dataless mark (the
    /// item key, and whether a fill is under way), `nil` for a complete file; `path` its path
    /// as `/proc/self/fd` shows it, `nil` when it cannot be read. Both are asked only when
    /// needed: most accesses of a partially present file (a sequential reader's) are of bytes
    /// known present, answered with no system call.
    package func resolve(
        _ access: Access, size: Int64, program: Int32, mark: () -> (key: UInt64, filling: Bool)?, path: () -> String?
    ) -> Resolution {
        // An allow is right whether or not the file is still dataless.
        if engine.isPresent(access.key, range: access.range, changeTime: access.changeTime) { return .present }
        guard let (key, filling) = mark() else { return .complete }
        guard let path = path() else { return .refused("cannot tell which file process \(program) accessed") }
        if path.hasSuffix(" (deleted)") {
            return .refused("\(path): a dataless file was deleted while process \(program) had it open")
        }
        guard let entry = servedDomain(containing: path) else {
            return .refused("\(path) is in no served replica")
        }
        let relative = String(path.dropFirst(entry.prefix.count))
        // Empty but not from a fill (a fill truncates first, and one cut short by a crash
        // leaves its mark): the program opening it emptied it.
        if !filling, size == 0 {
            return .emptied(served: entry, path: relative, access: access)
        }
        return .dataless(served: entry, path: relative, key: key, access: access)
    }

    // MARK: Providing

    /// Fills a dataless file, or turns an emptied one into an ordinary file, and says how to
    /// answer the access of process `program`. Never throws: a failure is logged, recorded on
    /// the item and denies the access.
    package func provide(_ resolution: Resolution, program: Int32, file: some AccessedDescriptor) async -> Answer {
        switch resolution {
        case .emptied(let entry, let path, let access):
            // An empty item's file is empty anyway: filled (recorded as downloaded) as others.
            if let key = try? await file.datalessKey(),
                let record = try? await engine.item(domainID: entry.domainID, path: path), record.size == 0
            {
                return await provide(.dataless(served: entry, path: path, key: key, access: access), program: program, file: file)
            }
            // Nothing to fetch: the program replaces the contents. Without the mark the file is
            // an ordinary file at the item's path, which sync sends as an edit of the item.
            if let failure = await file.clearDatalessMark() {
                logger.warning(
                    "\(entry.name): \(TerminalText.quoted(path)): cannot clear the dataless mark: \(String(cString: strerror(failure)))")
                return .deny(.ioError)
            }
            logger.info("\(entry.name): \(TerminalText.quoted(path)) emptied by process \(program); no download needed")
            return .allow(ignore: true)
        case .dataless(let entry, let path, let key, let access):
            // Filled meanwhile by a read-ahead of its folder; else counted towards one.
            if await readAhead.accessed(domain: entry.name, domainID: entry.domainID, path: path, program: program) {
                engine.used(domainID: entry.domainID, path: path)
                return .allow(ignore: true)
            }
            do {
                let answer: Answer
                if entry.hydration == .progressive {
                    let complete: Bool
                    do {
                        complete = try await fetch(entry, path: path, key: key, access: access, file: file)
                    } catch where error.code == .notSupported {
                        // The store turned out to have no ranged reads: the whole file.
                        try await fill(entry, path: path, key: key, file: file)
                        complete = true
                    }
                    answer = .allow(ignore: complete)
                } else {
                    try await fill(entry, path: path, key: key, file: file)
                    answer = .allow(ignore: true)
                }
                engine.used(domainID: entry.domainID, path: path)
                // The replica grew: a budget may be exceeded now.
                engine.requestEviction()
                return answer
            } catch {
                // Filled meanwhile by another event's download: nothing left to do.
                let stillDataless: Bool
                do { stillDataless = try await file.datalessKey() != nil } catch { stillDataless = true }
                if !stillDataless { return .allow(ignore: true) }
                logger.error("\(entry.name): \(TerminalText.quoted(path)): not fetched for process \(program): \(error.message)")
                await engine.recordFailure("fetch on access failed: \(error.message)", domainID: entry.domainID, path: path)
                return .deny(error.code == .fileWriteOutOfSpace ? .noSpace : .ioError)
            }
        case .complete:
            return .allow(ignore: true)
        case .present:
            return .allow(ignore: false)
        case .refused:
            return .deny(.ioError)
        }
    }

    /// Downloads the item at `path` of a served domain into its dataless file.
    /// - Throws: as ``item(_:path:key:file:)``; what ``OnAccessResolving/fill(_:domain:)`` throws.
    private func fill(_ entry: Served, path: String, key: UInt64, file: (any AccessedDescriptor)?) async throws(FileProviderError) {
        let record = try await item(entry, path: path, key: key, file: file)
        let started = Date()
        let fillKey = entry.name + "/" + path
        filling.withLock { _ = $0.insert(fillKey) }
        defer { filling.withLock { _ = $0.remove(fillKey) } }
        try await engine.fill(record, domain: entry.name)
        logger.info(
            "\(entry.name): \(TerminalText.quoted(path)): fetched on access (\(record.size) bytes in \(String(format: "%.2f", Date().timeIntervalSince(started))) s)"
        )
    }

    /// Fetches the bytes an access needs of the item at `path` (progressive hydration).
    /// Returns `true` when the file is complete now.
    /// - Throws: as ``item(_:path:key:file:)``; what ``OnAccessResolving/fetch(_:domain:file:changeTime:range:)`` throws.
    private func fetch(_ entry: Served, path: String, key: UInt64, access: Access, file: (any AccessedDescriptor)?)
        async throws(FileProviderError) -> Bool
    {
        let record = try await item(entry, path: path, key: key, file: file)
        logger.trace("\(entry.name): \(TerminalText.quoted(path)): access of bytes \(access.range.lowerBound)..<\(access.range.upperBound)")
        let fillKey = entry.name + "/" + path
        filling.withLock { _ = $0.insert(fillKey) }
        defer { filling.withLock { _ = $0.remove(fillKey) } }
        return try await engine.fetch(record, domain: entry.name, file: access.key, changeTime: access.changeTime, range: access.range)
    }

    /// The item whose dataless file (marked with the item key `key`) is at `path` of a served
    /// domain, syncing first when the file was moved since the last sync.
    /// - Throws: `noSuchItem` when the database knows no item at `path` whose identifier matches
    ///   the file's mark (a file moved since the last sync: the next sync records the move);
    ///   `localIOFailure` when the database cannot be read.
    func item(_ entry: Served, path: String, key: UInt64, file: (any AccessedDescriptor)?) async throws(FileProviderError) -> ItemRecord {
        var record = try await engine.item(domainID: entry.domainID, path: path)
        var key = key
        if record.map({ PlaceholderOwner.key($0.identifier.rawValue) }) != key, let synchronize {
            // Moved or renamed since the last sync: a sync records the move, then the item is
            // at this path (and the file may carry the item's new identifier, where the store
            // names items by path).
            logger.info("\(entry.name): \(TerminalText.quoted(path)): moved since the last sync; syncing before fetching it")
            await synchronize(entry.name, path)
            record = try await engine.item(domainID: entry.domainID, path: path)
            if let file, let current = try? await file.datalessKey() { key = current }
        }
        guard let record, PlaceholderOwner.key(record.identifier.rawValue) == key else {
            throw FileProviderError(
                .noSuchItem, "no item is recorded at \(path) for this file (moved since the last sync?); it is fetched once sync records it"
            )
        }
        return record
    }

    // MARK: Writes and opens

    /// A program (process `program`) wrote into the file at `path` (as `/proc/self/fd` shows it)
    /// whose dataless mark carries the item key `key`, or closed it after opening it for
    /// writing: a partially present file of a progressive domain is fetched whole around what
    /// the program wrote and becomes a local edit. Returns at once; the work runs in a task
    /// (``finish()`` waits for it). Returns the task, or `nil` when there is nothing to do.
    @discardableResult
    package func written(path: String, key: UInt64, access: Access, program: Int32) -> Task<Void, Never>? {
        guard let entry = servedDomain(containing: path), entry.hydration == .progressive else { return nil }
        let relative = String(path.dropFirst(entry.prefix.count))
        return track("on-access write") { [self] in
            do throws(FileProviderError) {
                let record = try await item(entry, path: relative, key: key, file: nil)
                try await engine.complete(written: record, domain: entry.name, file: access.key, changeTime: access.changeTime)
                // Whole now, with the program's bytes: send the edit (the watcher ignored the
                // file's writes while it was being fetched).
                await synchronize?(entry.name, relative)
            } catch {
                logger.error(
                    "\(entry.name): \(TerminalText.quoted(relative)): written by process \(program) while partly fetched; not completed: \(error.message)"
                )
                await engine.recordFailure("fetch on access failed: \(error.message)", domainID: entry.domainID, path: relative)
            }
        }
    }

    /// A program opened a file: `file` is its identity (`nil` when unknown), `path` its path as
    /// `/proc/self/fd` shows it. A file of a served domain is remembered as used (eviction takes
    /// the least recently used files first), and counts towards a read-ahead of its folder.
    package func opened(_ file: ProgressiveHydrator.FileKey?, path: String?) {
        if let file { engine.opened(file) }
        guard let path, let entry = servedDomain(containing: path) else { return }
        let relative = String(path.dropFirst(entry.prefix.count))
        engine.used(domainID: entry.domainID, path: relative)
        readAhead.opened(domainID: entry.domainID, path: relative)
    }

    // MARK: Tasks

    /// Runs `body` in a task that ``finish()`` waits for.
    @discardableResult
    package func track(_ label: String, _ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let id = UUID()
        // Made under the lock, so the task's own removal comes after its insertion.
        return running.withLock { running in
            let task = Task { [self] in
                await PoolCheck.during(label) { await body() }
                _ = self.running.withLock { $0.removeValue(forKey: id) }
            }
            running[id] = task
            return task
        }
    }

    /// Starts no more read-aheads, waits for the work in flight and writes down the uses.
    package func finish() async {
        await readAhead.stop()
        for task in running.withLock({ Array($0.values) }) { await task.value }
        await engine.flushUses()
    }
}
