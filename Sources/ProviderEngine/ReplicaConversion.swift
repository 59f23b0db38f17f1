import CSystemShims
import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// What ``ProviderManager/convertDomain(named:to:events:)`` did.
public struct ConversionReport: Codable, Hashable, Sendable {
    public var domain: String
    /// The mode the domain had and the mode it has now.
    public var from: ReplicaMode
    public var to: ReplicaMode
    /// The folder the files were in and the folder they are in now (the replica folder or the
    /// backing folder).
    public var source: String
    public var destination: String
    /// Entries of the old folder moved into the new one by renaming; a folder counts once, with
    /// everything inside it.
    public var movedEntries = 0
    /// Files and folders in the new folder that were not placeholders: kept as they were (the
    /// same inodes, dates and contents).
    public var files = 0
    public var folders = 0
    /// Placeholders given the new mode's form: `<name>.placeholder` files made dataless files,
    /// or dataless files made `<name>.placeholder` files.
    public var convertedPlaceholders = 0
    /// Placeholders removed without a new form, holding no contents: a `<name>.placeholder`
    /// beside a real file at its name, a dataless file that no item owns.
    public var removedPlaceholders = 0
    /// Whether this run finished a conversion that an earlier, interrupted one started.
    public var resumed = false
    /// Whether the domain had the mode already: nothing was done.
    public var unchanged = false

    init(domain: String, from: ReplicaMode, to: ReplicaMode, source: String, destination: String) {
        self.domain = domain
        self.from = from
        self.to = to
        self.source = source
        self.destination = destination
    }
}

/// Progress of a conversion, for a CLI to draw.
public enum ConversionEvent: Sendable {
    /// A sync of the domain is running (in `process`, when known): the conversion waits for it.
    case waitingForSync(process: Int32?)
    /// Entries of the new folder looked at so far, out of about `estimated` (the domain's items).
    case converting(done: Int, estimated: Int)
}

/// Receives conversion events.
public typealias ConversionEventHandler = @Sendable (ConversionEvent) -> Void

/// Converts a domain's files between the layouts of the two ``ReplicaMode``s, in the folder the
/// new mode keeps them in. Blocking; runs on the engine's executor.
///
/// Two steps, each made of steps that can be cut at any point and run again:
/// 1. **Move**: every entry of the old folder is renamed into the new one (a folder with
///    everything inside it in one rename), so files keep their inodes, dates and sizes and the
///    database's fingerprints still tell edits from downloads. An entry in both (a folder made
///    again in the old one) is merged; two files of one name stop the conversion.
/// 2. **Convert** every placeholder of the domain in the new folder: its new form is made first
///    (a dataless file of the item's size and date, or a `<name>.placeholder` file with its
///    metadata), then its old form is removed. A run after a kill finds either form or both,
///    and finishes.
///
/// ``ProviderManager/convertDomain(named:to:events:)`` runs it between writing the target mode
/// in a marker file (no engine work starts on the domain while it is there) and recording the
/// new mode.
struct ReplicaConversion {
    let domain: String
    let domainID: Int64
    let target: ReplicaMode
    let source: URL
    let destination: URL
    let store: MetadataStore
    let events: ConversionEventHandler?
    let estimated: Int
    /// Whether to stop at the next step (the command was interrupted).
    let stopped: @Sendable () -> Bool
    /// Records read from the database at once, and dataless files found away from their items
    /// looked up together (tests make it small).
    var pageSize = 4_096

    /// The destination in the new mode's layout, and in the other one.
    private var newLayout: Replica { Replica(root: destination, staging: destination, layout: target) }
    private var oldLayout: Replica {
        Replica(root: destination, staging: destination, layout: target == .dataless ? .placeholderFiles : .dataless)
    }

    /// Moves the old folder's entries into the new one, then converts the placeholders.
    /// - Throws: `filenameCollision` when a file of one name is in both folders, or a file that
    ///   is not a placeholder stands where a converted placeholder goes; `localIOFailure` (or
    ///   the code of the failure) naming the file that cannot be moved, written or removed.
    func run(into report: inout ConversionReport) throws(FileProviderError) {
        var moved = try moveEntries()
        var done = 0
        var away: [AwayFile] = []
        while true {
            report.movedEntries += moved
            try convert("", report: &report, done: &done, away: &away)
            try convertAway(&away, report: &report)
            // Anything put in the old folder while this ran goes too: it must end empty.
            moved = try moveEntries()
            if moved == 0 { return }
            report.files = 0
            report.folders = 0
        }
    }

    /// Renames every entry of the old folder into the new one; returns how many were moved.
    /// Names are moved byte for byte (also names that are not UTF-8).
    /// - Throws: as ``run(into:)``.
    func moveEntries() throws(FileProviderError) -> Int {
        guard Self.isFolder(source.path) else { return 0 }
        return try move(from: Array(source.path.utf8CString.dropLast()), to: Array(destination.path.utf8CString.dropLast()))
    }

    private func move(from: [CChar], to: [CChar]) throws(FileProviderError) -> Int {
        var moved = 0
        for name in try Self.names(in: from) {
            if stopped() { throw Self.interrupted }
            let source = from + [47] + name
            let target = to + [47] + name
            if fp_rename_noreplace(source + [0], target + [0]) == 0 {
                moved += 1
                continue
            }
            let code = errno
            if code == EEXIST && Self.isFolder(source) && Self.isFolder(target) {
                moved += try move(from: source, to: target)
                if rmdir(source + [0]) != 0 && errno != ENOENT {
                    throw POSIXError.error("cannot remove the emptied folder", path: Self.display(source))
                }
                continue
            }
            if code == EEXIST {
                throw FileProviderError(
                    .filenameCollision,
                    "\(Self.display(source)) and \(Self.display(target)) both exist; move one of them out of the way and run the same command again"
                )
            }
            throw POSIXError.error("cannot move \(Self.display(source)) to", path: Self.display(target), errno: code)
        }
        return moved
    }

    /// Converts the placeholders in a folder of the destination and below, counting what it keeps.
    private func convert(
        _ relative: String, report: inout ConversionReport, done: inout Int, away: inout [AwayFile]
    ) throws(FileProviderError) {
        let replica = newLayout
        var subfolders: [String] = []
        for bytes in try Self.names(in: Array(replica.path(relative).utf8CString.dropLast())) {
            // A name that is not UTF-8 is never one of the engine's (a scan skips it): kept.
            guard let name = Filename.decode(bytes.map { UInt8(bitPattern: $0) }) else { continue }
            let path = relative.isEmpty ? name : relative + "/" + name
            if relative.isEmpty && name == ".fileprovider-staging" { continue }
            if Replica.isTemporary(name) {
                // Left by a run killed while writing a placeholder (nobody holds its lock).
                replica.removeAbandonedTemporary(atPath: replica.path(path))
                continue
            }
            guard let print = replica.fingerprint(atPath: replica.path(path)) else { continue }
            if stopped() { throw Self.interrupted }
            done += 1
            if done % 64 == 0 { events?(.converting(done: done, estimated: estimated)) }
            if print.isDirectory {
                report.folders += 1
                subfolders.append(path)
                continue
            }
            guard print.isRegularFile else {
                report.files += 1
                continue
            }
            switch target {
            case .dataless:
                if name.hasSuffix(Replica.placeholderSuffix) && name != Replica.placeholderSuffix,
                    try toDataless(String(path.dropLast(Replica.placeholderSuffix.count)), report: &report)
                {
                    continue
                }
                // A dataless file made by an earlier, interrupted run is a placeholder, not a file.
                if Replica.datalessOwner(atPath: replica.path(path)) == nil { report.files += 1 }
            case .placeholderFiles:
                if Replica.datalessOwner(atPath: replica.path(path)) != nil {
                    try toPlaceholderFile(path, report: &report, away: &away)
                    if away.count >= max(1, pageSize) { try convertAway(&away, report: &report) }
                } else if !name.hasSuffix(Replica.placeholderSuffix) {
                    report.files += 1
                }
            }
        }
        for folder in subfolders { try convert(folder, report: &report, done: &done, away: &away) }
    }

    /// Makes `<base>.placeholder`, when it is one of this domain's placeholders, the dataless
    /// file `base`, then removes it. Where a file with contents (or a folder) has the name, only
    /// the placeholder is removed: it holds no contents, and a sync sees the file as it saw it
    /// before (written over an item that is not downloaded: both are kept). Returns false, doing
    /// nothing, for a `.placeholder` file that is not this domain's placeholder (a file kept).
    private func toDataless(_ base: String, report: inout ConversionReport) throws(FileProviderError) -> Bool {
        let old = oldLayout
        guard let metadata = try? old.readPlaceholder(base), metadata.domain == domain else { return false }
        let new = newLayout
        let target = new.path(base)
        if new.fingerprint(atPath: target) != nil && Replica.datalessOwner(atPath: target) == nil {
            try old.removeFile(atPath: old.placeholderPath(base))
            report.removedPlaceholders += 1
            return true
        }
        do {
            try new.createDatalessFile(base, metadata)
        } catch where error.code == .filenameCollision {
            // A file with contents took the name meanwhile: it stays, as above.
            try old.removeFile(atPath: old.placeholderPath(base))
            report.removedPlaceholders += 1
            return true
        }
        try old.removeFile(atPath: old.placeholderPath(base))
        report.convertedPlaceholders += 1
        return true
    }

    /// A dataless file found away from its item (the user moved it): its item is known only by
    /// the key of its identifier (``PlaceholderOwner``), which the database cannot look up.
    struct AwayFile {
        var path: String
        var key: UInt64
    }

    /// Makes the dataless file at `path` a `<path>.placeholder` file with the metadata of its
    /// item, then removes it (only while it is still a dataless file). Its item is the one at
    /// `path` when the file is that item's; else the item whose identifier it carries (a
    /// dataless file moved by the user: its placeholder file, carrying the identifier, is a
    /// moved placeholder as well); else, for a dataless file no item owns, the item at `path`
    /// when that is a file. A dataless file of no item is removed: it holds no contents, and a
    /// sync would remove it as well. A file away from its item is added to `away` and
    /// converted by ``convertAway(_:report:)``.
    /// - Throws: `filenameCollision` when `<path>.placeholder` is a file that is not this item's
    ///   placeholder (it is never overwritten).
    private func toPlaceholderFile(_ path: String, report: inout ConversionReport, away: inout [AwayFile]) throws(FileProviderError) {
        guard let owner = Replica.datalessOwner(atPath: newLayout.path(path)) else { return }
        let here = try store.item(domainID: domainID, path: path)
        guard let record = here.flatMap({ owner.isOwned(by: $0.identifier) ? $0 : nil }) else {
            away.append(AwayFile(path: path, key: owner.identifierKey))
            return
        }
        try toPlaceholderFile(path, key: owner.identifierKey, record: record, report: &report)
    }

    /// Converts the dataless files in `away` (see ``toPlaceholderFile(_:report:away:)``) and
    /// empties it: their items are found in one pass over the domain's records, a page at a
    /// time, so memory is bounded by a page and by `away` (which the walk converts whenever it
    /// holds ``pageSize`` files), not by the domain.
    /// - Throws: as ``toPlaceholderFile(_:report:away:)``; `localIOFailure` when the database fails.
    private func convertAway(_ away: inout [AwayFile], report: inout ConversionReport) throws(FileProviderError) {
        if away.isEmpty { return }
        let wanted = Set(away.map(\.key))
        var owners: [UInt64: ItemRecord] = [:]
        var after: String?
        while owners.count < wanted.count {
            let page = try store.descendants(domainID: domainID, of: "", after: after, limit: max(1, pageSize))
            guard let last = page.last?.path else { break }
            after = last
            for item in page where item.kind != .folder {
                let key = PlaceholderOwner.key(item.identifier.rawValue)
                if wanted.contains(key) && owners[key] == nil { owners[key] = item }
            }
            if page.count < max(1, pageSize) { break }
        }
        let files = away
        away.removeAll()
        for file in files {
            // Still the dataless file that was found (a run after a kill finds what is left).
            guard Replica.datalessOwner(atPath: newLayout.path(file.path))?.identifierKey == file.key else { continue }
            let here = try store.item(domainID: domainID, path: file.path)
            let record = owners[file.key] ?? here.flatMap { $0.kind == .folder ? nil : $0 }
            try toPlaceholderFile(file.path, key: file.key, record: record, report: &report)
        }
    }

    /// ``toPlaceholderFile(_:report:away:)`` with the file's item found (`nil`: none); `key`
    /// is the one the dataless file carries.
    private func toPlaceholderFile(_ path: String, key: UInt64, record: ItemRecord?, report: inout ConversionReport)
        throws(FileProviderError)
    {
        let new = newLayout
        let full = new.path(path)
        guard let record else {
            try new.removeFile(atPath: full)
            report.removedPlaceholders += 1
            return
        }
        let placeholder = new.placeholderPath(path)
        if new.fingerprint(atPath: placeholder) != nil {
            let existing = try? new.readPlaceholder(path)
            guard let existing, existing.domain == domain, PlaceholderOwner.key(existing.identifier) == key else {
                throw FileProviderError(
                    .filenameCollision,
                    "\(placeholder) is in the way of the placeholder of \(domain):/\(path); move it out of the way and run the same command again"
                )
            }
        }
        try new.writePlaceholder(path, PlaceholderMetadata(domain: domain, record: record))
        if Replica.datalessOwner(atPath: full) != nil { try new.removeFile(atPath: full) }
        // The bytes a progressive fetch had put there went with the file.
        try store.removePresentRanges(domainID: domainID, identifier: record.identifier)
        report.convertedPlaceholders += 1
    }

    // MARK: Helpers

    /// The names in a folder (without `.` and `..`), as bytes.
    /// - Throws: `localIOFailure` (or the code of the failure) naming the folder.
    static func names(in folder: [CChar]) throws(FileProviderError) -> [[CChar]] {
        guard let directory = opendir(folder + [0]) else { throw POSIXError.error("cannot read the folder", path: display(folder)) }
        defer { closedir(directory) }
        var names: [[CChar]] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.bindMemory(to: CChar.self).prefix { $0 != 0 })
            }
            if name == [46] || name == [46, 46] { continue }
            names.append(name)
        }
        return names
    }

    static func isFolder(_ path: [CChar]) -> Bool {
        var info = stat()
        return lstat(path + [0], &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    static func isFolder(_ path: String) -> Bool { isFolder(Array(path.utf8CString.dropLast())) }

    static func display(_ path: [CChar]) -> String { TerminalText.quoted(bytes: path.map { UInt8(bitPattern: $0) }) }

    /// Whether two existing paths are on one file system.
    static func sameFileSystem(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev
    }

    // MARK: The marker

    /// The mode written in a conversion marker file, or `nil` when there is none.
    static func markedTarget(atPath path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "?" : text
    }

    /// Writes the marker: the target mode, in a complete file (a temporary file synced, then
    /// renamed into place).
    /// - Throws: `localIOFailure` naming the file.
    static func writeMarker(_ mode: ReplicaMode, atPath path: String) throws(FileProviderError) {
        do throws(FileProviderError) {
            try PrivateFolder.make(atPath: (path as NSString).deletingLastPathComponent)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot create the conversions folder for \(path): \(error.message)")
        }
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if fd < 0 { throw POSIXError.error("cannot write the conversion marker", path: temporary) }
        let bytes = Array((mode.rawValue + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        if written != bytes.count || synced != 0 {
            unlink(temporary)
            throw POSIXError.error("cannot write the conversion marker", path: temporary)
        }
        try POSIXError.check(rename(temporary, path), "cannot write the conversion marker", path: path)
    }

    /// The error of a conversion stopped by an interruption.
    static let interrupted = FileProviderError(
        .cancelled, "the conversion stopped part way; the domain stays blocked until the same command finishes it")

    /// The refusal of engine work while a conversion of `domain` to `target` is unfinished.
    static func unfinished(_ domain: String, _ target: String) -> FileProviderError {
        FileProviderError(
            .providerDomainTemporarilyUnavailable,
            "the conversion of domain '\(domain)' to \(target) did not finish (its files may be in two folders); finish it with 'fileproviderctl domain convert \(domain) --mode \(target)'"
        )
    }
}

extension ProviderManager {
    /// The marker of an unfinished conversion of a domain: `<home>/conversions/<name>`, holding
    /// the target mode.
    func conversionMarkerPath(forDomainNamed name: String) -> String {
        home.appendingPathComponent("conversions/\(name)").path
    }

    /// The mode an unfinished conversion of the domain was taking it to (written before the
    /// conversion moves anything, removed once the new mode is recorded), or `nil` when none is
    /// unfinished.
    public func unfinishedConversion(ofDomainNamed name: String) -> String? {
        ReplicaConversion.markedTarget(atPath: conversionMarkerPath(forDomainNamed: name))
    }

    /// Refuses engine work on a domain whose conversion did not finish: its files may be in
    /// two folders, and a scan of either would take the others for deleted.
    /// - Throws: `providerDomainTemporarilyUnavailable` saying how to finish the conversion.
    func checkNoUnfinishedConversion(_ name: String) throws(FileProviderError) {
        if let target = unfinishedConversion(ofDomainNamed: name) { throw ReplicaConversion.unfinished(name, target) }
    }

    /// Converts a domain's replica to `mode`, moving its files without losing any: downloaded,
    /// pinned and edited files, conflicted copies and everything else the user put there are
    /// moved as they are (renamed, so the next sync sees the same edits against the same base
    /// versions); only placeholders change their form. To `dataless`: the replica folder's
    /// contents move into the backing folder (``backingURL(forDomainNamed:)``), each
    /// `<name>.placeholder` becomes a dataless file, and the replica folder stays empty (the
    /// mount point of `serve`). To `placeholder-files`: the backing folder's contents move into
    /// the replica folder, each dataless file becomes `<name>.placeholder`, and the backing
    /// folder is removed.
    ///
    /// Holds the domain's serve lock (no `serve` may run it) and sync lock (waiting for a
    /// running sync) throughout. The target mode is written to a marker file first: until the
    /// new mode is recorded, no engine work starts on the domain (``controller(for:)`` and syncs
    /// refuse with a message saying how to finish), and running this again after an
    /// interruption, even `kill -9`, finishes the conversion. Both folders must be on one file
    /// system: files move by renaming, never by copying.
    ///
    /// A domain in `mode` already is left as it is (``ConversionReport/unchanged``).
    /// - Throws: `providerDomainNotFound` for an unknown domain; `cannotSynchronize` while a
    ///   `serve` process serves the domain; `invalidArgument` when a conversion to the other
    ///   mode did not finish, the replica folder and backing folder overlap each other or
    ///   another domain's folders, the backing folder holds files already, or the replica
    ///   folder is still a mount point; `notSupported` when dataless files cannot work here
    ///   (``OnAccessSupport/problem(forBacking:)``) or the two folders are on different file
    ///   systems; `filenameCollision` when a file of one name is in both folders;
    ///   `localIOFailure` (or the failure's code) naming a file that cannot be moved or written;
    ///   `cancelled` when the task is cancelled while waiting for a sync.
    public func convertDomain(
        named name: String, to mode: ReplicaMode, events: ConversionEventHandler? = nil
    ) async throws(FileProviderError) -> ConversionReport {
        _ = try domain(named: name)
        let markerPath = conversionMarkerPath(forDomainNamed: name)
        if let pending = ReplicaConversion.markedTarget(atPath: markerPath), pending != mode.rawValue {
            throw FileProviderError(
                .invalidArgument,
                "the conversion of domain '\(name)' to \(pending) did not finish; finish it first with 'fileproviderctl domain convert \(name) --mode \(pending)', then convert it to \(mode.rawValue)"
            )
        }
        let serveLock: DomainLock
        do {
            serveLock = try DomainLock.acquire(home: home, domain: name)
        } catch where error.code == .cannotSynchronize {
            let who = DomainLock.holder(home: home, domain: name).map { "process \($0)" } ?? "another process"
            throw FileProviderError(
                .cannotSynchronize,
                "domain '\(name)' is served by \(who); stop 'fileproviderctl serve' first (a conversion moves every file serve watches), then run this command again"
            )
        }
        defer { withExtendedLifetime(serveLock) {} }
        let syncLock = try await waitForSyncLock(of: name, events: events)
        defer { withExtendedLifetime(syncLock) {} }

        // Read again under the locks: another conversion may have finished meanwhile.
        let domain = try self.domain(named: name)
        guard let id = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
        let resumed = ReplicaConversion.markedTarget(atPath: markerPath) != nil
        let replica = URL(fileURLWithPath: domain.replicaPath)
        let backing = try backingURL(forDomainNamed: name)
        let (source, destination) = mode == .dataless ? (replica, backing) : (backing, replica)
        let from: ReplicaMode = mode == .dataless ? .placeholderFiles : .dataless
        var report = ConversionReport(domain: name, from: from, to: mode, source: source.path, destination: destination.path)
        report.resumed = resumed
        if !resumed && domain.replicaMode == mode {
            report.from = mode
            report.unchanged = true
            return report
        }
        if !resumed { try await executor.run { try self.checkConversion(of: domain, to: mode, replica: replica, backing: backing) } }
        try await executor.run {
            try self.prepareConversion(of: domain, to: mode, replica: replica, backing: backing, markerPath: markerPath)
        }
        // An interruption stops the work at the next entry; the marker keeps the domain blocked
        // until a rerun finishes.
        let stop = Mutex(false)
        var converting = ReplicaConversion(
            domain: name, domainID: id, target: mode, source: source, destination: destination, store: store, events: events,
            estimated: try store.itemCount(domainID: id), stopped: { stop.withLock { $0 } })
        converting.pageSize = conversionPage.withLock { $0 }
        let conversion = converting
        let started = report
        let executor = self.executor
        do {
            report = try await withTaskCancellationHandler {
                try await executor.run { () throws(FileProviderError) -> ConversionReport in
                    var report = started
                    try conversion.run(into: &report)
                    // The old folder is empty now; a dataless domain's old backing folder goes.
                    if mode == .placeholderFiles && rmdir(backing.path) != 0 && errno != ENOENT {
                        throw POSIXError.error("cannot remove the emptied backing folder", path: backing.path)
                    }
                    return report
                }
            } onCancel: {
                stop.withLock { $0 = true }
            }
        } catch {
            throw FileProviderError.wrap(error)
        }
        // Done: recorded and finished even when an interruption comes now.
        try store.setReplicaMode(domainID: id, mode)
        let finishing = Task.detached {
            // The emptied replica folder is no replica of the domain's any more: a process that
            // still has the old mode finds it unmarked and empty and refuses to scan it.
            try await executor.run { try Self.finishConversion(to: mode, replica: replica, markerPath: markerPath) }
        }
        do { try await finishing.value } catch { throw FileProviderError.wrap(error) }
        if let controller = controllers.withLock({ $0.removeValue(forKey: name) }) { await controller.close() }
        return report
    }

    /// Checks that a domain can be converted to `mode`, changing nothing. Blocking.
    /// - Throws: as ``convertDomain(named:to:events:)``.
    private func checkConversion(of domain: DomainRecord, to mode: ReplicaMode, replica: URL, backing: URL) throws(FileProviderError) {
        guard mode == .dataless else { return }
        if Self.overlaps(replica.path, backing.path) {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(replica.path) and the backing folder \(backing.path) (where a dataless domain keeps its files) are the same or inside one another; a dataless domain's replica folder must be outside \(backing.deletingLastPathComponent().path)"
            )
        }
        for other in try store.domains() where other.name != domain.name {
            var theirs = [(other.replicaPath, "replica")]
            if let theirBacking = try? backingURL(of: other) { theirs.append((theirBacking.path, "backing folder")) }
            for (folder, kind) in theirs where Self.overlaps(backing.path, folder) {
                throw FileProviderError(
                    .invalidArgument, "the backing folder \(backing.path) would overlap the \(kind) of domain '\(other.name)'")
            }
        }
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: backing.path), !contents.isEmpty {
            throw FileProviderError(
                .invalidArgument,
                "the backing folder \(backing.path) is not empty (files kept when a domain of that name was removed?); move them away and run this command again"
            )
        }
        if let problem = OnAccessSupport.problem(forBacking: backing) {
            throw FileProviderError(
                .notSupported, problem.replacingOccurrences(of: OnAccessSupport.instead, with: "keep the domain in placeholder-files mode"))
        }
    }

    /// Writes the conversion's marker and makes its destination: the folder, marked as the
    /// domain's replica root. Checks that both folders are on one file system and that a
    /// dataless domain's replica folder is no mount point. Blocking.
    /// - Throws: as ``convertDomain(named:to:events:)``.
    private func prepareConversion(
        of domain: DomainRecord, to mode: ReplicaMode, replica: URL, backing: URL, markerPath: String
    ) throws(FileProviderError) {
        if mode == .placeholderFiles && ReplicaMount.isMountPoint(replica.path) {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(replica.path) is still a mount point (left by a 'serve' that was killed?); unmount it with 'umount \(replica.path)' (the files are safe in \(backing.path)) and run this command again"
            )
        }
        do {
            try FileManager.default.createDirectory(at: backing.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: replica, withIntermediateDirectories: true)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot create the folders of domain '\(domain.name)': \(error.localizedDescription)")
        }
        let apart = [backing.path, backing.deletingLastPathComponent().path].first { FileManager.default.fileExists(atPath: $0) }
        if let apart, !ReplicaConversion.sameFileSystem(apart, replica.path) {
            throw FileProviderError(
                .notSupported,
                "the replica folder \(replica.path) and the backing folder \(backing.path) are on different file systems; a conversion moves the files by renaming them (so the database still knows them as they are) and cannot move them between file systems. Send the local changes with 'fileproviderctl sync \(domain.name)', then remove the domain and add it again in the other mode with a replica folder on the file system of \(home.path)"
            )
        }
        try ReplicaConversion.writeMarker(mode, atPath: markerPath)
        if mode == .dataless {
            try makeFolders(replica: replica, backing: backing, domain: domain.name)
        } else {
            Replica(root: replica, staging: replica).markRoot(domain: domain.name)
        }
    }

    /// The last step of a conversion, after the new mode is recorded: a replica folder emptied
    /// for a dataless domain loses its root mark, and the marker goes. Blocking.
    /// - Throws: `localIOFailure` when the marker cannot be removed.
    private static func finishConversion(to mode: ReplicaMode, replica: URL, markerPath: String) throws(FileProviderError) {
        if mode == .dataless { removeRootMark(replica.path) }
        try Replica(root: replica, staging: replica).removeFile(atPath: markerPath)
    }

    /// Removes the mark of a replica root (``Replica/markRoot(domain:)``) from a folder.
    private static func removeRootMark(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fp_fremove_xattr(fd, Replica.rootAttribute)
        Glibc.close(fd)
    }

    /// Takes a domain's sync lock, waiting while a sync holds it.
    /// - Throws: `cancelled` when the task is cancelled while waiting; `localIOFailure` when
    ///   the lock file cannot be created or locked.
    private func waitForSyncLock(of name: String, events: ConversionEventHandler?) async throws(FileProviderError) -> DomainLock {
        let path = DomainLock.syncPath(home: home, domain: name)
        var reported = false
        var delay: UInt64 = 10_000_000
        while true {
            if let lock = try DomainLock.attempt(path) { return lock }
            if !reported {
                reported = true
                events?(.waitingForSync(process: DomainLock.holder(path: path).flatMap { $0 > 0 ? $0 : nil }))
            }
            do {
                try await Task.sleep(nanoseconds: delay)
            } catch {
                throw FileProviderError(.cancelled, "stopped waiting for the sync of \(name) to finish; nothing was converted")
            }
            delay = min(delay * 2, 100_000_000)
        }
    }
}
