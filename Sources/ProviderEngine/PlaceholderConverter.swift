import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// The second step of a ``ReplicaConversion``: converts every placeholder of the domain in the
/// new folder to the new mode's form. Its new form is made first (a dataless file of the item's
/// size and date, or a `<name>.placeholder` file with its metadata), then its old form is
/// removed; a run after a kill finds either form or both, and finishes. Everything else in the
/// folder is kept as it is, and counted. Blocking.
struct PlaceholderConverter {
    let domain: String
    let domainID: Int64
    let target: ReplicaMode
    /// The new folder (where the files are once ``EntryMover`` has moved them).
    let destination: URL
    let store: MetadataStore
    let events: ConversionEventHandler?
    let estimated: Int
    /// Whether to stop at the next entry (the command was interrupted).
    let stopped: @Sendable () -> Bool
    /// Dataless files found away from their items looked up together, and records read from
    /// the database at once to find them.
    let pageSize: Int
    /// Entries looked at so far, over every pass (for ``ConversionEvent/converting(done:estimated:)``).
    private var done = 0
    /// Dataless files found away from their items, not converted yet.
    private var away: [AwayFile] = []

    init(
        domain: String, domainID: Int64, target: ReplicaMode, destination: URL, store: MetadataStore,
        events: ConversionEventHandler?, estimated: Int, stopped: @escaping @Sendable () -> Bool, pageSize: Int
    ) {
        self.domain = domain
        self.domainID = domainID
        self.target = target
        self.destination = destination
        self.store = store
        self.events = events
        self.estimated = estimated
        self.stopped = stopped
        self.pageSize = pageSize
    }

    /// The destination in the new mode's layout, and in the other one.
    private var newLayout: Replica { Replica(root: destination, staging: destination, layout: target) }
    private var oldLayout: Replica {
        Replica(root: destination, staging: destination, layout: target == .dataless ? .placeholderFiles : .dataless)
    }

    /// Converts every placeholder in the destination, counting in `report` the files and
    /// folders it keeps and the placeholders it converts or removes.
    /// - Throws: `filenameCollision` when a file that is not a placeholder stands where a
    ///   converted placeholder goes; `cancelled` (``ReplicaConversion/interrupted``) when
    ///   ``stopped`` says so; `localIOFailure` (or the code of the failure) naming the file that
    ///   cannot be read, written or removed, or when the database fails.
    mutating func convertAll(report: inout ConversionReport) throws(FileProviderError) {
        try convert("", report: &report)
        try convertAway(report: &report)
    }

    /// Converts the placeholders in a folder of the destination and below, counting what it keeps.
    private mutating func convert(_ relative: String, report: inout ConversionReport) throws(FileProviderError) {
        let replica = newLayout
        var subfolders: [String] = []
        for bytes in try BytePaths.names(in: BytePaths.bytes(replica.path(relative))) {
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
            if stopped() { throw ReplicaConversion.interrupted }
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
                if let item = oldLayout.itemName(ofPlaceholderFile: name, in: relative),
                    try toDataless(relative.isEmpty ? item : relative + "/" + item, report: &report)
                {
                    continue
                }
                // A dataless file made by an earlier, interrupted run is a placeholder, not a file.
                if Replica.datalessOwner(atPath: replica.path(path)) == nil { report.files += 1 }
            case .placeholderFiles:
                if Replica.datalessOwner(atPath: replica.path(path)) != nil {
                    try toPlaceholderFile(path, report: &report)
                    if away.count >= max(1, pageSize) { try convertAway(report: &report) }
                } else if !name.hasSuffix(Replica.placeholderSuffix) {
                    report.files += 1
                }
            }
        }
        for folder in subfolders { try convert(folder, report: &report) }
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
    /// sync would remove it as well. A file away from its item is added to ``away`` and
    /// converted by ``convertAway(report:)``.
    /// - Throws: `filenameCollision` when `<path>.placeholder` is a file that is not this item's
    ///   placeholder (it is never overwritten).
    private mutating func toPlaceholderFile(_ path: String, report: inout ConversionReport) throws(FileProviderError) {
        guard let owner = Replica.datalessOwner(atPath: newLayout.path(path)) else { return }
        let here = try store.item(domainID: domainID, path: path)
        guard let record = here.flatMap({ owner.isOwned(by: $0.identifier) ? $0 : nil }) else {
            away.append(AwayFile(path: path, key: owner.identifierKey))
            return
        }
        try toPlaceholderFile(path, key: owner.identifierKey, record: record, report: &report)
    }

    /// Converts the dataless files in ``away`` (see ``toPlaceholderFile(_:report:)``) and
    /// empties it: their items are found in one pass over the domain's records, a page at a
    /// time, so memory is bounded by a page and by `away` (which the walk converts whenever it
    /// holds ``pageSize`` files), not by the domain.
    /// - Throws: as ``toPlaceholderFile(_:report:)``; `localIOFailure` when the database fails.
    private mutating func convertAway(report: inout ConversionReport) throws(FileProviderError) {
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

    /// ``toPlaceholderFile(_:report:)`` with the file's item found (`nil`: none); `key`
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
}
