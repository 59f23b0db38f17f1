import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// Downloads files into the replica for `materialize` (`startProvidingItem`): the records
/// named, a subtree a page at a time, the folders made first and populated after, the domain's
/// sync lock taken for small pages so that placeholders that are not there are not removed.
/// Built per operation by ``DomainController`` over its ``DomainContext``.
///
/// When the task is cancelled, no new download starts; running ones stop (a partial file is
/// kept with a checkpoint where the store can resume it), what finished is recorded, and
/// every file not downloaded gets a `cancelled` outcome.
struct Materializer: Sendable {
    let context: DomainContext
    let locks: DomainLocks
    let reader: RecordReader
    let downloader: Downloader
    /// Records when files were used (a `materialize` counts), for least-recently-used eviction.
    let useRecorder: UseRecorder

    var domainID: Int64 { context.domainID }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func location(_ path: String) -> String { context.location(path) }
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }
    /// Populates the folders the downloads went into.
    var populator: Populator { Populator(context: context, locks: locks, reader: reader) }

    /// ``DomainController/materialize(paths:recursive:events:)``.
    func materialize(paths: [String], recursive: Bool, events: EventHandler? = nil) async -> [ItemOutcome] {
        let collector = OutcomeCollector()
        await materialize(paths: paths, recursive: recursive, events: events, outcomes: collector.handler)
        return collector.outcomes
    }

    /// ``DomainController/materialize(paths:recursive:events:outcomes:)``.
    func materialize(paths: [String], recursive: Bool, events: EventHandler? = nil, outcomes report: OutcomeHandler) async {
        await PoolCheck.during("materialize") {
            await materializing(paths: paths, recursive: recursive, events: events, outcomes: report)
        }
    }

    private func materializing(paths: [String], recursive: Bool, events: EventHandler?, outcomes report: OutcomeHandler) async {
        do {
            let context = self.context
            _ = try await executor.run { () throws(FileProviderError) -> Bool in
                try context.checkConnected()
                return true
            }
        } catch {
            return report(paths.map { ItemOutcome(path: location($0), error: error) })
        }
        var outcomes: [ItemOutcome] = []
        var files: [ItemRecord] = []
        // Folders to show in the replica: the folders named and, with `recursive`, every folder
        // below them (empty ones too), besides the folders of the files.
        var folders: [String] = []
        // The records named, in one job on the executor.
        let targets: RecordReader.Targets
        do {
            targets = try await reader.targets(paths, policies: false)
        } catch {
            return report(paths.map { ItemOutcome(path: location($0), error: error) })
        }
        for (path, found) in zip(paths, targets.records) {
            do {
                let target = try found.get()
                if target.kind == .folder && recursive {
                    report(outcomes)
                    outcomes.removeAll()
                    await materializeSubtree(of: target.path, events: events, outcomes: report)
                } else if target.kind == .folder {
                    let (store, domainID) = (self.store, self.domainID)
                    files += try await blocking { () throws(FileProviderError) in
                        try store.children(domainID: domainID, parent: target.identifier)
                    }.filter { $0.kind == .file }
                    folders.append(path)
                } else if target.kind == .symlink {
                    outcomes.append(
                        ItemOutcome(
                            path: location(path),
                            error: FileProviderError(
                                .notSupported,
                                "a symlink to \(target.symlinkTarget ?? "?"); symlinks stay placeholders and are never followed")))
                } else {
                    files.append(target)
                }
            } catch {
                outcomes.append(ItemOutcome(path: location(path), error: error))
            }
        }
        if files.isEmpty && folders.isEmpty { return report(outcomes) }
        let parents = folders + files.map { RelativePath($0.path).parent }
        report(outcomes + (await download(files, into: parents, events: events)))
    }

    /// Downloads `files` after making the folders `parents` in the replica, then populates
    /// those folders. The folders are made first and populated after the downloads: a file
    /// about to be downloaded then never gets a placeholder just to have it replaced (two new
    /// files on disk per download instead of one; on a busy ext4 creating them cost as much as
    /// the downloads). Populating adopts what was downloaded and writes placeholders for the
    /// rest. Returns an outcome per file (and one for folders that could not be populated).
    ///
    /// In the placeholder-files layout it first tries to take the domain's sync lock, without
    /// waiting, and reads each folder of the files once (``placeholderFree(_:)``). While it holds
    /// the lock no population or sync runs in any process, so a file whose `.placeholder` was
    /// not in its folder gets none until the download is placed: removing it is skipped (an
    /// `unlink` that fails, per file). Without the lock (a sync or a population holds it) every
    /// download removes its placeholder. The lock is kept through the downloads and the
    /// population, and let go at once when no file skips the removal. Only for pages of at most
    /// ``placeholderFreeBytes`` in all: a sync in another process (`serve`'s pass) waits for
    /// the lock, so it is held only while small files are copied, where the saved `unlink`s
    /// count; a page with more bytes removes every placeholder as before.
    private func download(_ files: [ItemRecord], into parents: [String], populating: [String]? = nil, events: EventHandler?)
        async -> [ItemOutcome]
    {
        var lock: DomainLock?
        // Held through the downloads and the population, whatever path returns.
        defer { withExtendedLifetime(lock) {} }
        if !replica.layout.placeholderTakesItemsName, !files.isEmpty,
            files.reduce(Int64(0), { $0 &+ max(0, $1.size) }) <= Self.placeholderFreeBytes
        {
            let path = locks.syncLockPath
            lock = try? await blocking { () throws(FileProviderError) in try DomainLock.attempt(path) }
        }
        do {
            try await makeFolders(parents)
        } catch {
            return files.map { ItemOutcome(path: location($0.path), error: error) }
        }
        var free = Set<String>()
        if lock != nil { free = (try? await placeholderFree(files)) ?? [] }
        if free.isEmpty { lock = nil }
        var outcomes = await downloader.download(files, events: events, placeholderFree: free)
        // A file asked for is a file used: the newest for least-recently-used eviction.
        let identifiers = Dictionary(files.map { (location($0.path), $0.identifier) }, uniquingKeysWith: { first, _ in first })
        for outcome in outcomes where outcome.error == nil {
            if let identifier = identifiers[outcome.path] { useRecorder.used(domainID: domainID, identifier: identifier) }
        }
        // Interrupted: the next run (or sync) populates the folders, adopting what was downloaded.
        if Task.isCancelled { return outcomes }
        let populated = populating ?? parents
        if populated.isEmpty { return outcomes }
        do {
            try await populator.populateFolders(populated, holding: lock)
        } catch {
            outcomes.append(ItemOutcome(path: location(populated.first ?? ""), error: error))
        }
        return outcomes
    }

    /// Downloads every file below the folder at `path` and shows every folder below it, a page
    /// of ``subtreePage`` records at a time (a subtree of any size in bounded memory). A folder
    /// is populated once the pages have passed its last item (its items are contiguous in path
    /// order), so a file about to be downloaded never gets a placeholder first. Progress counts
    /// the whole subtree. Each page's outcomes go to `report` before the next page is read.
    private func materializeSubtree(of path: String, events: EventHandler?, outcomes report: OutcomeHandler) async {
        let (store, domainID) = (self.store, self.domainID)
        // The totals are read for a progress display only: without one, nothing reads every
        // row of the subtree before the first download starts.
        var totals: (count: Int, bytes: Int64) = (0, 0)
        if events != nil {
            do {
                totals = try await executor.run { try store.filesToDownload(domainID: domainID, below: path) }
            } catch {
                return report([ItemOutcome(path: location(path), error: error)])
            }
        }
        let progress = SubtreeProgress(totals: totals, events: events)
        var open = [path]  // folders whose items the pages have not passed yet
        var last: String?
        do {
            // The next page is read while this one downloads: a page changes only its own rows
            // and those of folders before it (the folders it populates).
            try await reader.forEachSubtreePage(below: path, readingAhead: true) { page in
                if Task.isCancelled { return false }
                guard let end = page.last?.path else { return false }
                last = end
                let files = page.filter { $0.kind == .file }
                let folders = page.filter { $0.kind == .folder && $0.isDataless }.map(\.path)
                let parents = folders + files.map { RelativePath($0.path).parent }
                var seen = Set(open)
                for parent in parents where seen.insert(parent).inserted { open.append(parent) }
                // Done: the folders whose items all lie before the page's last path.
                let isOpen = { (folder: String) in folder == end || end.hasPrefix(folder.isEmpty ? "" : folder + "/") }
                let done = open.filter { !isOpen($0) }
                open.removeAll { !isOpen($0) }
                report(await download(files, into: parents, populating: done, events: progress.handler))
                progress.finishPage()
                return true
            }
        } catch {
            report([ItemOutcome(path: location(last ?? path), error: error)])
        }
        if Task.isCancelled || open.isEmpty { return }
        do {
            try await populator.populateFolders(open)
        } catch {
            report([ItemOutcome(path: location(open.first ?? ""), error: error)])
        }
    }

    /// The most bytes a page of downloads may hold for the page to take the sync lock and skip
    /// removing placeholders that are not there (16 MiB: 4,096 files of 4 KiB).
    static let placeholderFreeBytes: Int64 = 16 << 20

    /// The paths of those of `files` that have no `.placeholder` file beside them, from one
    /// read of each of their folders (in one job on the executor). A folder that cannot be read,
    /// or holds more than four entries per file of it here and 1,024 more (reading it would
    /// cost more than looking name by name), names none. The caller holds the sync lock.
    /// - Throws: `cancelled` when the task is cancelled before the job starts.
    private func placeholderFree(_ files: [ItemRecord]) async throws(FileProviderError) -> Set<String> {
        var byFolder: [String: [(path: String, name: String)]] = [:]
        for file in files {
            let (parent, name) = RelativePath(file.path).split
            byFolder[parent, default: []].append((file.path, name))
        }
        let (replica, folders) = (self.replica, byFolder)
        return try await executor.run {
            var free = Set<String>()
            for (folder, entries) in folders {
                guard let present = replica.placeholderNames(in: folder, limit: 4 * entries.count + 1024) else { continue }
                for entry in entries where !present.contains(entry.name) { free.insert(entry.path) }
            }
            return free
        }
    }

    /// Makes these folders (relative paths) and the ones above them in the replica, so files
    /// can be downloaded into them; their records are not changed (a dataless folder stays
    /// dataless until it is populated).
    /// - Throws: `localIOFailure` naming the folder that could not be made.
    private func makeFolders(_ paths: [String]) async throws(FileProviderError) {
        let replica = self.replica
        let all = Set(
            paths.flatMap { path -> [String] in
                var prefixes: [String] = []
                var current = path
                while !current.isEmpty {
                    prefixes.append(current)
                    current = RelativePath(current).parent
                }
                return prefixes
            }
        ).sorted { $0.utf8.count < $1.utf8.count }
        try await executor.run {
            for path in all { try replica.makeFolder(path) }
        }
    }
}
