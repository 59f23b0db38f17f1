import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// A change someone made in the replica folder, found by comparing it with the database.
enum LocalChange: Sendable {
    /// A new file or folder at a path the database does not know.
    case created(path: String, kind: ItemKind, fingerprint: FileFingerprint)
    /// The contents of a materialized file changed.
    case modified(record: ItemRecord, fingerprint: FileFingerprint)
    /// A real file was written at the real name of an item that is not downloaded (beside or
    /// instead of its placeholder). Its writer never saw the item's contents, so it is not an
    /// edit of them: both are kept.
    case writtenOverPlaceholder(record: ItemRecord, fingerprint: FileFingerprint)
    /// An item moved or was renamed (recognised by inode, or by a placeholder's identifier).
    case moved(record: ItemRecord, to: String, fingerprint: FileFingerprint?)
    /// An item is gone from the replica.
    case deleted(record: ItemRecord)

    var path: String {
        switch self {
        case .created(let path, _, _): return path
        case .modified(let record, _), .writtenOverPlaceholder(let record, _), .deleted(let record): return record.path
        case .moved(_, let to, _): return to
        }
    }
}

/// Which local names are never uploaded: editors' temporary files, our own files, and a domain's
/// own patterns (`*` and `?` wildcards, matched against the name).
public struct IgnoreRules: Sendable {
    public static let builtIn = ["*.swp", "*.swx", ".#*", "~$*", "*.tmp", "*~", ".fp-tmp-*", ".fileprovider-staging*", ".DS_Store"]
    public var patterns: [String]

    public init(extra: [String] = []) { patterns = Self.builtIn + extra }

    public func ignores(_ name: String) -> Bool {
        if name.hasSuffix(Replica.placeholderSuffix) { return true }
        return patterns.contains { fnmatch($0, name, 0) == 0 }
    }
}

/// What a scan of the replica found.
struct LocalScanResult {
    /// Changes to send to the store.
    var changes: [LocalChange]
    /// Files still being written, left for a later scan.
    var unsettled: [String]
    /// Placeholder files (relative paths of the items they stand for) that no item owns: a
    /// copy of another item's placeholder, or one left beside a real file that took over its
    /// item. They hold no contents, and nothing else would ever remove them.
    var strayPlaceholders: [String]
    /// Materialized items whose file is gone and whose own placeholder stands in its place: an
    /// eviction that has not been recorded yet (still running in another process, or cut short
    /// by a crash). Not a deletion.
    var evicted: [ItemRecord]
    /// Dataless folders that hold something in the replica (made there before the folder was
    /// populated): they must be populated before their contents can be compared.
    var occupiedDataless: [String]
    /// The engine's own downloads that were placed but not recorded (by another process still
    /// recording them, or one killed before it could): recorded, never sent.
    var placed: [PlacedFile] = []
}

/// A file the engine downloaded into the replica (its ``DownloadMark`` matches) that the
/// database does not record as it is.
struct PlacedFile {
    var record: ItemRecord
    var download: PlacedDownload
}

/// Compares the replica with the database. Blocking; runs on the engine's executor.
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

    private struct Seen {
        var fingerprint: FileFingerprint
        var kind: ItemKind
    }

    func scan(records: [ItemRecord], now: Date = Date()) -> LocalScanResult {
        var seen: [String: Seen] = [:]
        var placeholders = Set<String>()
        // identifier key -> paths of this domain's placeholders the database does not know
        var strayPlaceholders: [UInt64: [String]] = [:]
        let byPath = Dictionary(records.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        walk("", byPath: byPath, seen: &seen, placeholders: &placeholders, stray: &strayPlaceholders)
        for key in strayPlaceholders.keys { strayPlaceholders[key]!.sort() }
        // The items of a dataless folder are not in the replica: they are neither missing nor
        // compared. Something in such a folder means it must be populated first.
        let dataless = Set(records.lazy.filter(\.isDataless).map(\.path))
        if !dataless.isEmpty {
            let stray = strayPlaceholders.values.joined()
            let parents = Set((Array(seen.keys) + Array(placeholders) + stray).map { DomainController.split($0).parent })
            let occupied = parents.intersection(dataless)
            if !occupied.isEmpty {
                return LocalScanResult(changes: [], unsettled: [], strayPlaceholders: [], evicted: [], occupiedDataless: occupied.sorted())
            }
        }

        let nowNanos = Int64(now.timeIntervalSince1970 * 1e9)
        var unsettled: [String] = []
        // Settled: unchanged for the settle time, or seen finished and not changed since.
        func settled(_ print: FileFingerprint, _ path: String) -> Bool {
            settleNanos <= 0 || nowNanos - print.modificationNanos >= settleNanos || finishedWrites[path] == print.modificationNanos
        }

        var changes: [LocalChange] = []
        var missing: [ItemRecord] = []
        var evicted: [ItemRecord] = []
        var placed: [PlacedFile] = []
        // The engine's own download of the item, unchanged since it was placed.
        func placedDownload(_ record: ItemRecord, _ print: FileFingerprint) -> PlacedFile? {
            DownloadMark.recognize(atPath: replica.path(record.path), print, as: record).map { download in
                PlacedFile(
                    record: record,
                    download: PlacedDownload(
                        identifier: record.identifier, contentVersion: download.contentVersion, size: print.size,
                        modificationNanos: print.modificationNanos, inode: print.inode))
            }
        }
        // Paths of placeholders the user moved away and put a new file in their place.
        var replaced = Set<String>()
        for record in records where !record.path.isEmpty {
            if !dataless.isEmpty && dataless.contains(DomainController.split(record.path).parent) { continue }
            let here = seen[record.path]
            switch record.state {
            case .folder:
                if here?.kind == .folder { continue }
                missing.append(record)
            case .materialized:
                if let here, here.kind == .file {
                    let print = here.fingerprint
                    if print.size != record.localSize || print.modificationNanos != record.localModificationNanos
                        || print.inode != record.localInode
                    {
                        if let download = placedDownload(record, print) {
                            placed.append(download)
                        } else if settled(print, record.path) {
                            changes.append(.modified(record: record, fingerprint: print))
                        } else {
                            unsettled.append(record.path)
                        }
                    }
                    continue
                }
                if here == nil, placeholders.contains(record.path), let found = replica.placeholderOwner(record.path) {
                    if key(of: found) == PlaceholderOwner.key(record.identifier.rawValue) {
                        evicted.append(record)
                        continue
                    }
                    // Another item's placeholder moved onto this path.
                    if found.domain == nil || found.domain == domain { strayPlaceholders[key(of: found), default: []].append(record.path) }
                }
                missing.append(record)
            case .placeholder, .symlink:
                if let here, here.kind == .file, record.state == .placeholder {
                    // The placeholder moved elsewhere and a new file took its name: a move and a
                    // creation.
                    if !placeholders.contains(record.path),
                        strayPlaceholders[PlaceholderOwner.key(record.identifier.rawValue)]?.isEmpty == false
                    {
                        missing.append(record)
                        replaced.insert(record.path)
                        continue
                    }
                    // The engine's download, placed but not recorded yet; anything else was
                    // written by someone who never saw the item's contents: both are kept.
                    if let download = placedDownload(record, here.fingerprint) {
                        placed.append(download)
                    } else if settled(here.fingerprint, record.path) {
                        changes.append(.writtenOverPlaceholder(record: record, fingerprint: here.fingerprint))
                    } else {
                        unsettled.append(record.path)
                    }
                    continue
                }
                if placeholders.contains(record.path) { continue }
                missing.append(record)
            }
        }

        // New paths, parents first.
        var created = seen.filter { byPath[$0.key] == nil || replaced.contains($0.key) }.sorted { $0.key < $1.key }
        // Moves: a missing item whose inode (or placeholder identifier) turns up at a new path.
        var createdByInode: [Int64: Int] = [:]
        for (index, entry) in created.enumerated() { createdByInode[entry.value.fingerprint.inode] = index }
        var movedAway = Set<Int>()
        var movedFolders: [String] = []
        var remainingMissing: [ItemRecord] = []
        for record in missing.sorted(by: { $0.path < $1.path }) {
            if movedFolders.contains(where: { record.path.hasPrefix($0 + "/") }) { continue }
            if let inode = record.localInode, let index = createdByInode[inode], !movedAway.contains(index),
                created[index].value.kind == (record.kind == .folder ? .folder : .file)
            {
                movedAway.insert(index)
                changes.append(.moved(record: record, to: created[index].key, fingerprint: created[index].value.fingerprint))
                if record.kind == .folder { movedFolders.append(record.path) }
                continue
            }
            if record.state == .placeholder || record.state == .symlink,
                var targets = strayPlaceholders[PlaceholderOwner.key(record.identifier.rawValue)],
                !targets.isEmpty
            {
                let target = targets.removeFirst()
                strayPlaceholders[PlaceholderOwner.key(record.identifier.rawValue)] = targets
                changes.append(.moved(record: record, to: target, fingerprint: nil))
                continue
            }
            remainingMissing.append(record)
        }
        let movedTargets = movedAway.map { created[$0].key }
        created = created.enumerated().filter { !movedAway.contains($0.offset) }.map(\.element)
            .filter { entry in !movedTargets.contains { entry.key.hasPrefix($0 + "/") } }
        for (path, entry) in created {
            if entry.kind == .file && !settled(entry.fingerprint, path) {
                unsettled.append(path)
                continue
            }
            changes.append(.created(path: path, kind: entry.kind, fingerprint: entry.fingerprint))
        }
        // Deletions; a deleted folder covers everything below it.
        var deletedFolders: [String] = []
        for record in remainingMissing.sorted(by: { $0.path < $1.path }) {
            if deletedFolders.contains(where: { record.path.hasPrefix($0 + "/") }) { continue }
            if movedFolders.contains(where: { record.path.hasPrefix($0 + "/") }) { continue }
            changes.append(.deleted(record: record))
            if record.kind == .folder { deletedFolders.append(record.path) }
        }
        // Placeholders no item owns. One carrying the identifier of a missing item is kept: it
        // belongs to a move (of the item, or of a folder above it) that this scan saw.
        let missingIdentifiers = Set(missing.map { PlaceholderOwner.key($0.identifier.rawValue) })
        let unowned = strayPlaceholders.filter { !missingIdentifiers.contains($0.key) }.values.joined().sorted()
        return LocalScanResult(
            changes: changes, unsettled: unsettled, strayPlaceholders: unowned, evicted: evicted, occupiedDataless: [], placed: placed)
    }

    /// The identifier of the item a placeholder stands for now.
    /// Whether a file is a materialized item's file exactly as recorded.
    private static func isUnchangedDownload(_ print: FileFingerprint, _ record: ItemRecord?) -> Bool {
        guard let record, record.state == .materialized else { return false }
        return print.size == record.localSize && print.modificationNanos == record.localModificationNanos
            && print.inode == record.localInode
    }

    private func key(of owner: PlaceholderOwner) -> UInt64 {
        renamedKeys[owner.identifierKey] ?? owner.identifierKey
    }

    private func walk(
        _ relative: String, byPath: [String: ItemRecord], seen: inout [String: Seen], placeholders: inout Set<String>,
        stray: inout [UInt64: [String]]
    ) {
        let folder = replica.path(relative)
        guard let directory = opendir(folder) else { return }
        defer { closedir(directory) }
        var subfolders: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String? in
                let bytes = raw.bindMemory(to: UInt8.self)
                let length = bytes.firstIndex(of: 0) ?? bytes.count
                return Filename.decode(bytes[..<length])
            }
            guard let name, name != ".", name != ".." else { continue }
            let path = relative.isEmpty ? name : relative + "/" + name
            if replica.layout == .placeholderFiles && name.hasSuffix(Replica.placeholderSuffix) {
                let base = String(path.dropLast(Replica.placeholderSuffix.count))
                placeholders.insert(base)
                if byPath[base] == nil, let found = replica.placeholderOwner(base), found.domain == domain {
                    stray[key(of: found), default: []].append(base)
                }
                continue
            }
            if Replica.isTemporary(name) {
                replica.removeAbandonedTemporary(atPath: replica.path(path))
                continue
            }
            if ignore.ignores(name) || !Filename.isValid(name) { continue }
            if relative.isEmpty && replica.path(name) == replica.staging.path { continue }
            guard let print = replica.fingerprint(atPath: replica.path(path)) else { continue }
            if print.isDirectory {
                seen[path] = Seen(fingerprint: print, kind: .folder)
                subfolders.append(path)
            } else if print.isRegularFile {
                // A dataless file is the placeholder of its item, never contents. A downloaded
                // file that is as the engine wrote it needs no look at its attributes.
                if replica.layout == .dataless, !Self.isUnchangedDownload(print, byPath[path]),
                    let found = Replica.datalessOwner(atPath: replica.path(path))
                {
                    placeholders.insert(path)
                    if byPath[path].map({ found.isOwned(by: $0.identifier) }) != true { stray[key(of: found), default: []].append(path) }
                    continue
                }
                seen[path] = Seen(fingerprint: print, kind: .file)
            }
        }
        for subfolder in subfolders {
            walk(subfolder, byPath: byPath, seen: &seen, placeholders: &placeholders, stray: &stray)
        }
    }
}
