import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

/// The second step of a ``ReplicaConversion``: converts every placeholder of the domain in the
/// new folder from the old layout's form to the new one's, reading each with the old
/// ``ReplicaLayout`` and writing it with the new one. Its new form is made first (a dataless
/// file of the item's size and date, or a `<name>.placeholder` file with its metadata), then its
/// old form is removed; a run after a kill finds either form or both, and finishes. Everything
/// else in the folder is kept as it is, and counted. Blocking.
struct PlaceholderConverter {
    let domain: String
    let domainID: Int64
    /// The layout the placeholders are read with, and the one they are written with.
    let from: any ReplicaLayout
    let to: any ReplicaLayout
    /// The new folder (where the files are once ``EntryMover`` has moved them).
    let destination: URL
    let store: MetadataStore
    let events: ConversionEventHandler?
    let estimated: Int
    /// Whether to stop at the next entry (the command was interrupted).
    let stopped: @Sendable () -> Bool
    /// Placeholders found away from their items looked up together, and records read from
    /// the database at once to find them.
    let pageSize: Int
    /// Entries looked at so far, over every pass (for ``ConversionEvent/converting(done:estimated:)``).
    private var done = 0
    /// Placeholders found away from their items, not converted yet.
    private var away: [AwayFile] = []

    init(
        domain: String, domainID: Int64, from: any ReplicaLayout, to: any ReplicaLayout, destination: URL, store: MetadataStore,
        events: ConversionEventHandler?, estimated: Int, stopped: @escaping @Sendable () -> Bool, pageSize: Int
    ) {
        self.domain = domain
        self.domainID = domainID
        self.from = from
        self.to = to
        self.destination = destination
        self.store = store
        self.events = events
        self.estimated = estimated
        self.stopped = stopped
        self.pageSize = pageSize
    }

    /// The destination in the new layout, and in the old one.
    private var newLayout: Replica { Replica(root: destination, staging: destination, layout: to) }
    private var oldLayout: Replica { Replica(root: destination, staging: destination, layout: from) }

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
            if let found = from.convertiblePlaceholder(named: name, in: relative, in: oldLayout) {
                if let metadata = found.metadata {
                    // One of this domain's placeholders; another's is kept as a file.
                    if metadata.domain == domain {
                        try convert(found.itemPath, metadata, key: found.owner.identifierKey, report: &report)
                        continue
                    }
                } else {
                    try convertKeyed(found, report: &report)
                    if away.count >= max(1, pageSize) { try convertAway(report: &report) }
                    continue
                }
            }
            // A placeholder made by an earlier, interrupted run is a placeholder, not a file.
            if !to.isPlaceholderEntry(named: name, in: relative, in: newLayout) { report.files += 1 }
        }
        for folder in subfolders { try convert(folder, report: &report) }
    }

    /// Writes the new form of the placeholder of the item at `path` (its metadata, the key of
    /// its identifier), then removes its old form. Where a file with contents holds the new
    /// form's place, only the old placeholder is removed: it holds no contents, and a sync sees
    /// the file as it saw it before (written over an item that is not downloaded: both are
    /// kept). The ranges a progressive fetch had put in the old form went with it.
    /// - Throws: `filenameCollision` when a file that is not the item's placeholder stands
    ///   where the new layout never writes over one; `localIOFailure`.
    private func convert(_ path: String, _ metadata: PlaceholderMetadata, key: UInt64, report: inout ConversionReport)
        throws(FileProviderError)
    {
        let written = try to.writeConvertedPlaceholder(path, metadata, key: key, in: newLayout)
        try from.removePlaceholder(path, in: oldLayout)
        if from.keepsPartialContents {
            try store.removePresentRanges(domainID: domainID, identifier: ItemIdentifier(metadata.identifier))
        }
        if written { report.convertedPlaceholders += 1 } else { report.removedPlaceholders += 1 }
    }

    /// A placeholder found away from its item (the user moved it) that carries only the key of
    /// its identifier (``PlaceholderOwner``, a dataless file), which the database cannot look up.
    struct AwayFile {
        var path: String
        var key: UInt64
    }

    /// Converts a placeholder that carries only the key of its item (a dataless file). Its item
    /// is the one at its path when the placeholder is that item's; else the item whose
    /// identifier it carries (a placeholder moved by the user: the new one is a moved placeholder
    /// as well); else, for a placeholder no item owns, the item at its path when that is a file.
    /// A placeholder of no item is removed: it holds no contents, and a sync would remove it as
    /// well. One away from its item is added to ``away`` and converted by ``convertAway(report:)``.
    /// - Throws: as ``convert(_:_:key:report:)``; `localIOFailure` when the database fails.
    private mutating func convertKeyed(_ found: ConvertiblePlaceholder, report: inout ConversionReport) throws(FileProviderError) {
        let here = try store.item(domainID: domainID, path: found.itemPath)
        guard let record = here.flatMap({ found.owner.isOwned(by: $0.identifier) ? $0 : nil }) else {
            away.append(AwayFile(path: found.itemPath, key: found.owner.identifierKey))
            return
        }
        try convert(found.itemPath, key: found.owner.identifierKey, record: record, report: &report)
    }

    /// Converts the placeholders in ``away`` (see ``convertKeyed(_:report:)``) and
    /// empties it: their items are found in one pass over the domain's records, a page at a
    /// time, so memory is bounded by a page and by `away` (which the walk converts whenever it
    /// holds ``pageSize`` files), not by the domain.
    /// - Throws: as ``convertKeyed(_:report:)``.
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
            // Still the placeholder that was found (a run after a kill finds what is left).
            guard from.placeholderOwner(file.path, in: oldLayout)?.identifierKey == file.key else { continue }
            let here = try store.item(domainID: domainID, path: file.path)
            let record = owners[file.key] ?? here.flatMap { $0.kind == .folder ? nil : $0 }
            try convert(file.path, key: file.key, record: record, report: &report)
        }
    }

    /// ``convertKeyed(_:report:)`` with the placeholder's item found (`nil`: none); `key` is
    /// the one the placeholder carries.
    private func convert(_ path: String, key: UInt64, record: ItemRecord?, report: inout ConversionReport)
        throws(FileProviderError)
    {
        guard let record else {
            try from.removePlaceholder(path, in: oldLayout)
            report.removedPlaceholders += 1
            return
        }
        try convert(path, PlaceholderMetadata(domain: domain, record: record), key: key, report: &report)
    }
}
