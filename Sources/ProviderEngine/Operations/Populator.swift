import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// Populates dataless folders: writes a folder's items into the replica from the database
/// (placeholders, dataless folders), adopting downloads and moving aside local files in the way.
/// Takes the domain's locks (``DomainLocks``). Built per operation by ``DomainController``.
///
/// A local file that took the name of an item of the folder (made before the folder was
/// populated) is renamed `name 2.ext` and recorded as a name collision; nothing is lost. In
/// a layout where writing an item's name edits the item (dataless), such a file is left in
/// place and sent as an edit of the item by the next scan.
/// Takes the domain's sync lock, so it waits for a sync running in another process (`serve`).
/// When the task is cancelled, the folder being populated is finished, no other folder is
/// started, and the paths not done get a `cancelled` outcome saying how many folders below
/// them are still dataless.
struct Populator: Sendable {
    let context: DomainContext
    let locks: DomainLocks
    let reader: RecordReader

    var domain: DomainRecord { context.domain }
    var domainID: Int64 { context.domainID }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func location(_ path: String) -> String { context.location(path) }
    func display(_ path: String) -> String { context.display(path) }
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }

    /// ``DomainController/populate(paths:recursive:)``.
    func populate(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        await PoolCheck.during("populate") { await populating(paths: paths, recursive: recursive) }
    }

    private func populating(paths: [String], recursive: Bool) async -> [ItemOutcome] {
        let lock: DomainLock
        do throws(FileProviderError) {
            lock = try await locks.lockForSync(events: nil)
        } catch {
            return paths.map { ItemOutcome(path: location($0), error: error) }
        }
        defer { withExtendedLifetime(lock) {} }
        return await locks.treeLock.withLock { () async -> [ItemOutcome] in
            var outcomes: [ItemOutcome] = []
            for path in paths {
                do throws(FileProviderError) {
                    if Task.isCancelled { throw FileProviderError.notStarted }
                    let target = try await blocking { [self] () throws(FileProviderError) in try reader.record(at: path) }
                    try await finishing { [self] () async throws(FileProviderError) in
                        try await populateFolder(target.kind == .folder ? path : RelativePath(path).parent, ancestors: true)
                    }
                    if recursive && target.kind == .folder {
                        // The dataless folders below, a page of the subtree at a time (any size
                        // in bounded memory); counted first for the message on cancellation.
                        let (store, domainID, below) = (self.store, self.domainID, target.path)
                        let count = try await executor.run { try store.datalessFolderCount(domainID: domainID, below: below) }
                        var index = 0
                        try await reader.forEachSubtreePage(below: below) { page throws(FileProviderError) in
                            for folder in page where folder.kind == .folder && folder.isDataless {
                                if Task.isCancelled {
                                    let left = max(count - index, 0)
                                    throw FileProviderError(
                                        .cancelled,
                                        "interrupted after populating \(index) of the \(max(count, index)) dataless folders below it; \(left) are still dataless"
                                    )
                                }
                                try await finishing { [self] () async throws(FileProviderError) in
                                    try await populateFolder(folder.path, ancestors: true)
                                }
                                index += 1
                            }
                            return true
                        }
                    }
                    outcomes.append(ItemOutcome(path: location(path), error: nil))
                } catch {
                    outcomes.append(ItemOutcome(path: location(path), error: error))
                }
            }
            return outcomes
        }
    }

    /// Runs `body` to its end even when the task is cancelled meanwhile: a folder whose
    /// population started is finished (it takes moments, and the database learns it whole).
    /// - Throws: what `body` throws.
    private func finishing(_ body: @escaping @Sendable () async throws(FileProviderError) -> Void) async throws(FileProviderError) {
        // An unstructured task does not inherit the caller's cancellation.
        let result = await Task { () async -> Result<Void, FileProviderError> in
            do throws(FileProviderError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }.value
        try result.get()
    }

    /// Makes sure these folders (relative paths) are populated, so files can be written into
    /// them. `held` is the domain's sync lock when the caller holds it already (then it is not
    /// taken again, and the replica mode is checked as ``DomainLocks/lockForSync(events:)`` would).
    /// - Throws: what ``populateFolder(_:ancestors:)`` and ``DomainLocks/lockForSync(events:)`` throw.
    func populateFolders(_ paths: [String], holding held: DomainLock? = nil) async throws(FileProviderError) {
        let parents = Set(paths).sorted()
        if parents.isEmpty { return }
        // Nothing to do (the usual case) needs no lock.
        let (store, domainID) = (self.store, self.domainID)
        let dataless = try await blocking { () throws(FileProviderError) -> [String] in
            var dataless: [String] = []
            for parent in parents where try store.item(domainID: domainID, path: parent)?.isDataless ?? true { dataless.append(parent) }
            return dataless
        }
        if dataless.isEmpty { return }
        let lock: DomainLock
        if let held {
            lock = held
            try await blocking { [self] () throws(FileProviderError) in try locks.checkModeIsCurrent() }
        } else {
            lock = try await locks.lockForSync(events: nil)
        }
        defer { withExtendedLifetime(lock) {} }
        try await locks.treeLock.withLock { () async throws(FileProviderError) in
            for parent in dataless { try await populateFolder(parent, ancestors: true) }
        }
    }

    /// Populates one dataless folder (and, with `ancestors`, the dataless folders above it
    /// first). A populated folder is left as it is. The caller holds the tree lock (``DomainLocks/treeLock``).
    /// - Throws: `noSuchItem` when the database has no folder at `path`; `localIOFailure` when
    ///   the replica or the database cannot be written.
    func populateFolder(_ path: String, ancestors: Bool) async throws(FileProviderError) {
        let (store, domainID) = (self.store, self.domainID)
        let found = try await blocking { () throws(FileProviderError) in try store.item(domainID: domainID, path: path) }
        guard var folder = found, folder.kind == .folder else {
            throw FileProviderError(
                .noSuchItem,
                "no folder at \(display(path)); run 'fileproviderctl sync \(domain.name)' to refresh")
        }
        if !folder.isDataless { return }
        if ancestors && !path.isEmpty {
            try await populateFolder(RelativePath(path).parent, ancestors: true)
        }
        let parent = folder.identifier
        // Only the rows it acts on: its folders and what is not materialized (materialized
        // files are left as they are; a `materialize` of a whole folder reads none of them).
        let children = try await blocking { () throws(FileProviderError) in
            try store.childrenToPopulate(domainID: domainID, parent: parent)
        }
        let replica = self.replica
        let folders = children.filter { $0.kind == .folder }
        // Folders first, downloads adopted, and local files that are in the way moved aside
        // (to names no item of the folder has: read only when a file is in the way).
        let (watchers, name) = (context.newDatalessFolders, domain.name)
        let (inodes, collisions, adopted, edits) = try await executor.run {
            () throws -> ([Int64?], [(String, String)], [ItemRecord], Set<String>) in
            try replica.makeFolder(path)
            var collisions: [(String, String)] = []
            var adopted: [ItemRecord] = []
            var edits: Set<String> = []
            var taken: Set<String>?
            for child in children where child.state != .materialized {
                guard let print = replica.fingerprint(atPath: replica.path(child.path)) else { continue }
                if child.kind == .folder && print.isDirectory { continue }
                // A dataless file written before a population was cut short: its placeholder.
                if replica.placeholderUnderItsName(child.path) != nil { continue }
                if let version = DownloadMark.downloadedVersion(of: child, print, in: replica) {
                    var child = child
                    child.markMaterialized(contentVersion: version, fingerprint: print)
                    adopted.append(child)
                    continue
                }
                // A file written at the item's name is the item's edit where the layout says
                // so: left where it stands, and the next scan sends it with the item's version
                // as base (a store that changed meanwhile gives a conflict).
                if replica.writesAtAnItemsNameEditIt && child.kind == .file && print.isRegularFile {
                    edits.insert(child.path)
                    continue
                }
                if taken == nil { taken = try store.childPaths(domainID: domainID, parent: parent) }
                collisions.append(
                    (child.path, try Self.moveAside(child.path, avoiding: taken ?? [], in: replica)))
            }
            var inodes: [Int64?] = []
            for child in folders {
                try replica.makeFolder(child.path)
                inodes.append(replica.fingerprint(atPath: replica.path(child.path))?.inode)
            }
            // Its subfolders are dataless: serve marks them before the folder's own open
            // (which may have started this population) goes on.
            watchers.made(domain: name, paths: folders.map(\.path))
            return (inodes, collisions, adopted, edits)
        }
        let kept = edits.union(adopted.map(\.path))
        let files = children.filter { $0.kind != .folder && $0.state != .materialized && !kept.contains($0.path) }
        let errors = await context.writePlaceholders(files, creating: true)
        if let (index, error) = errors.first {
            throw FileProviderError(error.code, "\(display(files[index].path)): \(error.message)")
        }
        var upserts = folders.enumerated().map { index, child in
            var child = child
            child.localInode = inodes[index]
            return child
        }
        upserts += adopted
        folder.isDataless = false
        upserts.append(folder)
        // The records and the name collisions, in one job on the engine's threads; then the
        // status the folder and its subfolders show (before a program that opened the folder
        // goes on, so its `fstat` after the open sees the change time the folder keeps).
        let domainName = domain.name
        try await blocking { [upserts, folder] () throws(FileProviderError) in
            try store.apply(domainID: domainID, upserts: upserts, deletions: [])
            if replica.layout.writesFolderStatus {
                let policies = try PolicyResolver.read(from: store, domainID: domainID, along: path)
                for written in [folder] + folders {
                    let policy = policies.effective(written.path, own: written.contentPolicy).policy
                    FolderStatus.write(
                        FolderStatus.of(dataless: written.isDataless, policy: policy), on: written.path, in: replica, domain: domainName)
                }
            }
            for (path, kept) in collisions {
                try store.recordConflict(
                    ConflictRecord(
                        domainID: domainID, path: path, keptPath: kept, kind: "nameCollision",
                        details:
                            "a local item had the name of an item of a folder that was not populated yet; it was renamed"
                    ))
            }
        }
    }

    /// Renames a local item to the first free `name N.ext` beside it; returns the new path.
    /// Blocking.
    private static func moveAside(
        _ path: String, avoiding taken: Set<String>, in replica: Replica
    )
        throws(FileProviderError) -> String
    {
        let (parent, name) = RelativePath(path).split
        for attempt in 2..<1000 {
            let candidate = (parent.isEmpty ? "" : parent + "/") + ConflictName.numbered(name, attempt)
            if taken.contains(candidate) || replica.fingerprint(atPath: replica.path(candidate)) != nil {
                continue
            }
            if replica.placeholderExists(candidate) { continue }
            try replica.move(fromPath: replica.path(path), toPath: replica.path(candidate))
            return candidate
        }
        throw FileProviderError(.filenameCollision, "no free name beside \(replica.path(path))")
    }
}
