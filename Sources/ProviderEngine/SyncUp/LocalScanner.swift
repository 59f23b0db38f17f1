import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// Compares the replica with the database, folder by folder: each folder of the replica is
/// read beside its records (``ScanRecords/children(of:)``), compared, and let go before the
/// next, so memory is bounded by the largest folder and by what changed (``ScanFindings``),
/// never by the domain. The items of a dataless folder are not in the replica: their records
/// are not read. Blocking; runs on the engine's executor.
struct LocalScanner {
    let replica: Replica
    /// The domain's name: a stray placeholder is removed only when it is one of this domain's.
    let domain: String
    let ignore: IgnoreRules
    /// Files changed more recently than this are left for a later scan (still being written).
    let settleNanos: Int64
    /// Identifiers a folder move replaced since the placeholders were written, to the new ones,
    /// by identifier key (``PlaceholderOwner/key(_:)``).
    let renamedKeys: [UInt64: UInt64]
    /// Files seen finished being written (``FinishedWrites``): relative path → modification time
    /// (ns) they had then.
    let finishedWrites: [String: Int64]
    /// Called after each folder is read, with its path (tests change the replica in the middle
    /// of a walk).
    var folderRead: (@Sendable (String) -> Void)?
    /// Called after each folder is listed, before its entries are compared with its records,
    /// with its path (tests change a file between the two).
    var folderListed: (@Sendable (String) -> Void)?
    /// The most changes of each kind one scan holds (``ScanFindings/defaultLimit``; tests set
    /// fewer).
    var findingsLimit = ScanFindings.defaultLimit
    /// The store keeps an executable bit (`BackendCapabilities.supportsFileSystemFlags`): a
    /// materialized file, or an item's dataless file, whose x bit (in the stat the scan
    /// already has) differs from its record's flags is a
    /// ``LocalChange/flagsChanged(record:fingerprint:)``.
    var comparesFlags = false

    /// - Parameter renamedIdentifiers: identifiers a folder move replaced since the
    ///   placeholders were written, to the new ones.
    init(
        replica: Replica, domain: String, ignore: IgnoreRules, settleNanos: Int64, renamedIdentifiers: [String: String] = [:],
        finishedWrites: [String: Int64] = [:]
    ) {
        self.replica = replica
        self.domain = domain
        self.ignore = ignore
        self.settleNanos = settleNanos
        var keys: [UInt64: UInt64] = [:]
        for (old, new) in renamedIdentifiers { keys[PlaceholderOwner.key(old)] = PlaceholderOwner.key(new) }
        renamedKeys = keys
        self.finishedWrites = finishedWrites
    }

    /// Scans against records held in memory (tests).
    func scan(records: [ItemRecord], now: Date = Date()) -> LocalScanResult {
        // The listed records never throw.
        (try? scan(ListedScanRecords(records), now: now)) ?? .occupied([])
    }

    /// Walks the replica from its root, comparing each folder with its records as it goes,
    /// then pairs what went missing with what is new (``ScanFindings/settle(_:settled:)``).
    ///
    /// The walk reads folders one after another while programs go on changing them: a file
    /// moved from a folder not read yet into one already read is in neither listing. So when
    /// the result would delete an item or remove a placeholder, the folders are looked at
    /// again: one changed since the walk began sets
    /// ``LocalScanResult/replicaChangedDuringScan``, and those changes must not be acted on.
    /// - Throws: `localIOFailure` when the database fails.
    ///
    /// A `scope` short of ``ScanScope/all`` reads only the folders it names (a watcher saw their
    /// entries change) and the trees that appeared, so a re-sync costs what changed. Its
    /// `changesSince` is the time (``coarseClockNanos()``) just before the scope was taken: a
    /// change after it (a move into a folder outside the scope) may be in no folder read, so
    /// a folder changed since then counts as changed during the scan.
    func scan(_ records: some ScanRecords, scope: ScanScope = .all, changesSince: Int64? = nil, now: Date = Date())
        throws(FileProviderError) -> LocalScanResult
    {
        // The kernel dates a folder's changes from its coarse clock: a change after this reads
        // as this or later.
        let walkStarted = min(Self.coarseClockNanos(), changesSince ?? .max)
        let nowNanos = Int64(now.timeIntervalSince1970 * 1e9)
        // Settled: unchanged for the settle time, or seen finished and not changed since. A
        // file's time is any a program set (1684 on tmpfs, from a tar archive): an age past
        // Int64 is a file long settled (or, dated far ahead, not settled).
        let settled = { (print: FileFingerprint, path: String) -> Bool in
            let (age, overflow) = nowNanos.subtractingReportingOverflow(print.modificationNanos)
            return settleNanos <= 0 || (overflow ? print.modificationNanos < 0 : age >= settleNanos)
                || finishedWrites[path] == print.modificationNanos
        }
        var findings = ScanFindings(limit: findingsLimit)
        // Depth first, each folder's subfolders in the order they were read: what waits is a
        // list of names per level, not the tree.
        var pending: [(path: String, record: ItemRecord?, below: Bool)] = []
        if scope.everything {
            pending = [("", try records.record(at: ""), true)]
        } else {
            // Folders that are gone were moved or deleted: their parent's entry says which.
            let (folders, trees) = scope.roots
            for (path, below) in folders.map({ ($0, false) }) + trees.map({ ($0, true) }).reversed()
            where replica.fingerprint(atPath: replica.path(path))?.isDirectory == true {
                pending.append((path, try records.record(at: path), below))
            }
        }
        var foldersRead = 0
        while let (folder, record, below) = pending.popLast() {
            let subfolders = try visit(folder, record: record, records, settled: settled, into: &findings)
            foldersRead += 1
            folderRead?(folder)
            if below { pending += subfolders.reversed().map { ($0.path, $0.record, true) } }
        }
        if !findings.occupiedDataless.isEmpty { return .occupied(findings.occupiedDataless.sorted()) }
        // A real file at a placeholder's name whose placeholder went elsewhere is a move and a
        // creation; known only now that every placeholder of the replica was seen.
        // Where the walk let stray placeholders go, an overwritten item's placeholder may be one
        // of them: decided by a scan that holds them all.
        for (record, entry) in findings.overflowed.contains(.stray) ? [] : findings.overwritten {
            if findings.stray[PlaceholderOwner.key(record.identifier.rawValue)]?.isEmpty == false {
                findings.addMissing(record)
                findings.addCreated(record.path, entry)
            } else {
                classify(record, writtenOver: entry, settled: settled, into: &findings)
            }
        }
        findings.overwritten = []
        let newFolders = findings.created.filter { $0.entry.kind == .folder }.map(\.path)
        var result = try findings.settle(records, settled: settled)
        result.foldersRead = foldersRead
        if result.changes.contains(where: \.isDeletion) || !result.strayPlaceholders.isEmpty {
            result.replicaChangedDuringScan = try folderChanged(since: walkStarted, records, newFolders: newFolders)
        }
        return result
    }

    /// Whether a folder of the replica (one the database knows, or one the walk found new)
    /// changed at or after `since`: an entry was added, removed or renamed in it (its status
    /// change time moved, which no program can set back). One stat per folder, without holding
    /// the folders; runs only when the scan would delete or remove something.
    /// - Throws: `localIOFailure` when the database fails.
    private func folderChanged(since: Int64, _ records: some ScanRecords, newFolders: [String]) throws(FileProviderError) -> Bool {
        var changed = false
        func look(_ path: String) {
            if changed { return }
            var status = stat()
            guard lstat(replica.path(path), &status) == 0, status.st_mode & S_IFMT == S_IFDIR else { return }
            if Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec) >= since { changed = true }
        }
        newFolders.forEach(look)
        try records.forEachFolderPath(look)
        return changed
    }

    /// The kernel's coarse real-time clock (what it dates file changes with), in nanoseconds.
    static func coarseClockNanos() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }

    /// One entry of a folder of the replica.
    struct Entry {
        var fingerprint: FileFingerprint
        var kind: ItemKind
    }

    /// What one folder of the replica holds, by name.
    private struct Listing {
        var entries: [String: Entry] = [:]
        /// Names of items whose placeholder is here.
        var placeholders = Set<String>()
        /// The dataless files of the folder's items, by name, when ``comparesFlags``: a chmod of
        /// a file never downloaded is a change of its item too.
        var dataless: [String: FileFingerprint] = [:]
        /// Subfolders, in the order they were read.
        var subfolders: [String] = []
        var isEmpty: Bool { entries.isEmpty && placeholders.isEmpty }
    }

    /// Reads one folder and compares it with its records. Returns the paths of its subfolders
    /// and their records, to visit next.
    private func visit(
        _ folder: String, record: ItemRecord?, _ records: some ScanRecords, settled: (FileFingerprint, String) -> Bool,
        into findings: inout ScanFindings
    ) throws(FileProviderError) -> [(path: String, record: ItemRecord?)] {
        let isDataless = record?.isDataless == true
        // A dataless folder's items are not in the replica: their records are read only to
        // follow subfolders someone made there (the folder is then populated and scanned again).
        let children = try isDataless ? [] : records.children(of: folder)
        let known = byName(children)
        let listing = list(folder, known: known, into: &findings)
        folderListed?(folder)
        func child(_ name: String) -> String { folder.isEmpty ? name : folder + "/" + name }
        if isDataless {
            if listing.isEmpty { return [] }
            findings.occupiedDataless.append(folder)
            let inside = try byName(records.children(of: folder))
            return listing.subfolders.map { (child($0), inside[$0]) }
        }
        for record in children where !record.path.isEmpty {
            let name = RelativePath(record.path).name
            // A second row at one path (which the database's unique index forbids) is not compared.
            guard known[name]?.identifier == record.identifier else { continue }
            compare(
                record, here: listing.entries[name], hasPlaceholder: listing.placeholders.contains(name),
                dataless: listing.dataless[name], settled: settled, into: &findings)
        }
        for (name, entry) in listing.entries where known[name] == nil {
            findings.addCreated(child(name), entry)
        }
        return listing.subfolders.map { (child($0), known[$0]) }
    }

    private func byName(_ records: [ItemRecord]) -> [String: ItemRecord] {
        var byName: [String: ItemRecord] = [:]
        byName.reserveCapacity(records.count)
        for record in records where !record.path.isEmpty {
            let name = RelativePath(record.path).name
            if byName[name] == nil { byName[name] = record }
        }
        return byName
    }

    /// Compares one record with what its folder holds under its name.
    private func compare(
        _ record: ItemRecord, here: Entry?, hasPlaceholder: Bool, dataless: FileFingerprint?,
        settled: (FileFingerprint, String) -> Bool, into findings: inout ScanFindings
    ) {
        switch record.state {
        case .folder:
            if here?.kind == .folder { return }
            findings.addMissing(record)
        case .materialized:
            if let here, here.kind == .file {
                let print = here.fingerprint
                if print.size != record.localSize || print.modificationNanos != record.localModificationNanos
                    || print.inode != record.localInode
                {
                    if let download = placedDownload(record, print) {
                        findings.addPlaced(download)
                    } else if settled(print, record.path) {
                        findings.add(.modified(record: record, fingerprint: print))
                    } else {
                        findings.addUnsettled(record.path)
                    }
                } else if comparesFlags && print.isExecutable != record.isExecutable {
                    // A chmod changes the ctime only: the x bit of the same stat tells it.
                    findings.add(.flagsChanged(record: record, fingerprint: print))
                }
                return
            }
            if here == nil, hasPlaceholder, let found = replica.placeholderOwner(record.path) {
                if key(of: found) == PlaceholderOwner.key(record.identifier.rawValue) {
                    findings.addEvicted(record)
                    return
                }
                // Another item's placeholder moved onto this path.
                if found.domain == nil || found.domain == domain { findings.addStray(key(of: found), record.path) }
            }
            findings.addMissing(record)
        case .placeholder, .symlink:
            if let here, here.kind == .file, record.state == .placeholder {
                if !hasPlaceholder {
                    // Its placeholder may have moved elsewhere (a move, and a new file here):
                    // decided once the whole replica was read.
                    findings.addOverwritten(record, here)
                    return
                }
                classify(record, writtenOver: here, settled: settled, into: &findings)
                return
            }
            if hasPlaceholder {
                if let dataless, record.state == .placeholder, dataless.isExecutable != record.isExecutable {
                    findings.add(.flagsChanged(record: record, fingerprint: dataless))
                }
                return
            }
            findings.addMissing(record)
        }
    }

    /// A real file at the name of an item that is not downloaded: the engine's download, placed
    /// but not recorded yet; anything else was written by someone who never saw the item's
    /// contents (both are kept).
    private func classify(
        _ record: ItemRecord, writtenOver here: Entry, settled: (FileFingerprint, String) -> Bool, into findings: inout ScanFindings
    ) {
        if let download = placedDownload(record, here.fingerprint) {
            findings.addPlaced(download)
            return
        }
        // Listed while a fill of the item's dataless file was completing (its mark cleared
        // between the listing's stat and now): the file as it is now may be the engine's download.
        if let now = replica.fingerprint(atPath: replica.path(record.path)), now != here.fingerprint {
            if let download = placedDownload(record, now) { findings.addPlaced(download) } else { findings.addUnsettled(record.path) }
            return
        }
        if settled(here.fingerprint, record.path) {
            findings.add(.writtenOverPlaceholder(record: record, fingerprint: here.fingerprint))
        } else {
            findings.addUnsettled(record.path)
        }
    }

    /// The engine's own download of the item, unchanged since it was placed.
    private func placedDownload(_ record: ItemRecord, _ print: FileFingerprint) -> PlacedFile? {
        DownloadMark.recognize(record, print, in: replica).map { download in
            PlacedFile(
                record: record,
                download: PlacedDownload(identifier: record.identifier, contentVersion: download.contentVersion, fingerprint: print))
        }
    }

    /// Whether a file is a materialized item's file exactly as recorded.
    private static func isUnchangedDownload(_ print: FileFingerprint, _ record: ItemRecord?) -> Bool {
        guard let record, record.state == .materialized else { return false }
        return record.recordsFile(print)
    }

    /// The identifier key of the item a placeholder stands for now.
    private func key(of owner: PlaceholderOwner) -> UInt64 {
        renamedKeys[owner.identifierKey] ?? owner.identifierKey
    }

    /// Reads one folder of the replica (not below it). Placeholders that no record of the
    /// folder owns go to `findings.stray`; abandoned temporary files are removed.
    private func list(_ relative: String, known: [String: ItemRecord], into findings: inout ScanFindings) -> Listing {
        var listing = Listing()
        guard let directory = opendir(replica.path(relative)) else { return listing }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            guard let name = Filename.decode(entry), name != ".", name != ".." else { continue }
            let path = relative.isEmpty ? name : relative + "/" + name
            if let base = replica.layout.itemName(ofPlaceholderEntry: name, in: relative, in: replica) {
                listing.placeholders.insert(base)
                let basePath = relative.isEmpty ? base : relative + "/" + base
                if known[base] == nil, let found = replica.placeholderOwner(basePath), found.domain == domain {
                    findings.addStray(key(of: found), basePath)
                }
                continue
            }
            if Replica.isTemporary(name) {
                replica.removeAbandonedTemporary(atPath: replica.path(path))
                continue
            }
            if ignore.ignores(name, inFolder: relative) || !Filename.isValid(name) { continue }
            if relative.isEmpty && replica.path(name) == replica.staging.path { continue }
            guard let print = replica.fingerprint(atPath: replica.path(path)) else { continue }
            if print.isDirectory {
                listing.entries[name] = Entry(fingerprint: print, kind: .folder)
                listing.subfolders.append(name)
            } else if print.isRegularFile {
                // A dataless file is the placeholder of its item, never contents. A downloaded
                // file that is as the engine wrote it needs no look at its attributes.
                if replica.layout.placeholderTakesItemsName, !Self.isUnchangedDownload(print, known[name]),
                    let found = replica.placeholderUnderItsName(path)
                {
                    listing.placeholders.insert(name)
                    if known[name].map({ found.isOwned(by: $0.identifier) }) != true {
                        findings.addStray(key(of: found), path)
                    } else if comparesFlags {
                        listing.dataless[name] = print
                    }
                    continue
                }
                listing.entries[name] = Entry(fingerprint: print, kind: .file)
            } else if print.isSymlink && known[name] == nil {
                // Never sent nor followed; found as new so that sync up can say so
                // (ExcludedFromSync). One at a known item's name is not its item.
                listing.entries[name] = Entry(fingerprint: print, kind: .symlink)
            }
        }
        return listing
    }
}
