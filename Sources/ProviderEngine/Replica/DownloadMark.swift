import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What the engine writes, as an extended attribute (`user.fileprovider.download`), on a
/// download (placed or filled in place) where the database's note (``DownloadNotes``, what a
/// download gets instead) cannot be written; earlier versions wrote it on every download, and
/// those files keep it: which item and content version the file holds, and the size,
/// modification time and inode the file had when the engine placed it.
///
/// The database records the same fingerprint, but only once the download is recorded: a process
/// killed between the rename and its database write, or a sync in another process scanning
/// while the download is placed, would otherwise see a file nobody recorded and take it for a
/// local edit (and upload it). A file whose mark matches it is the engine's own download: the
/// scan records it instead. Any change to the file (an edit in place changes its size or time; a
/// save by rename or a copy makes a new inode) breaks the match, so a local edit is never taken
/// for a download.
///
/// The value is 41 bytes: a format byte, then hashes of the identifier and of the content
/// version and the fingerprint, little-endian. Different on every file, it gives each file an
/// ext4 attribute block of 4 KiB of its own beside the status and the domain's name
/// (Docs/Performance.md, "An attribute block per downloaded file").
struct DownloadMark: Equatable {
    static let attribute = "user.fileprovider.download"
    private static let format: UInt8 = 1
    private static let length = 41

    var identifierHash: UInt64
    var contentVersionHash: UInt64
    var size: Int64
    var modificationNanos: Int64
    var inode: Int64

    init(identifier: ItemIdentifier, contentVersion: Data, fingerprint: FileFingerprint) {
        identifierHash = FNV1a.hash(identifier.rawValue.utf8)
        contentVersionHash = FNV1a.hash(contentVersion)
        size = fingerprint.size
        modificationNanos = fingerprint.modificationNanos
        inode = fingerprint.inode
    }

    private init?(bytes: [UInt8]) {
        guard bytes.count == Self.length, bytes[0] == Self.format else { return nil }
        func word(_ index: Int) -> UInt64 {
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[1 + index * 8 + $1]) << (8 * UInt64($1)) }
        }
        identifierHash = word(0)
        contentVersionHash = word(1)
        size = Int64(bitPattern: word(2))
        modificationNanos = Int64(bitPattern: word(3))
        inode = Int64(bitPattern: word(4))
    }

    private var bytes: [UInt8] {
        var bytes = [Self.format]
        for word in [
            identifierHash, contentVersionHash, UInt64(bitPattern: size), UInt64(bitPattern: modificationNanos), UInt64(bitPattern: inode),
        ] {
            for shift in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: word >> (8 * UInt64(shift)))) }
        }
        return bytes
    }

    /// Whether this mark says the file with fingerprint `print` is the engine's unchanged
    /// download of `identifier`.
    func matches(_ print: FileFingerprint, identifier: ItemIdentifier) -> Bool {
        describes(print) && identifierHash == FNV1a.hash(identifier.rawValue.utf8)
    }

    /// Whether this mark describes the file with fingerprint `print` as it stands: the engine's
    /// download of some item, unchanged since it was placed.
    func describes(_ print: FileFingerprint) -> Bool {
        print.isRegularFile && print.size == size && print.modificationNanos == modificationNanos && print.inode == inode
    }

    /// Whether the file at `path` (relative to `replica`) is, as it stands now, a download the
    /// engine placed and nobody changed since (the note of whichever item is at the path, else
    /// the file's mark, describes it). Blocking.
    static func isUnchangedDownload(_ path: String, _ print: FileFingerprint, in replica: Replica) -> Bool {
        if replica.downloadNotes?.download(atPath: path, print) != nil { return true }
        return read(atPath: replica.path(path))?.describes(print) ?? false
    }

    /// Whether the file holds `contentVersion` (as far as the hash can tell).
    func holds(contentVersion: Data) -> Bool { contentVersionHash == FNV1a.hash(contentVersion) }

    /// Writes the mark of a file the engine just finished writing at `path` (a staging file,
    /// dated, about to be renamed into place). Blocking. Where the file system keeps no extended
    /// attributes, nothing is written: such a download, if never recorded, is later taken for
    /// a local file and kept as both versions, never lost.
    static func write(atPath path: String, identifier: ItemIdentifier, contentVersion: Data, fingerprint: FileFingerprint) {
        write(to: StagedFile(path: path), identifier: identifier, contentVersion: contentVersion, fingerprint: fingerprint)
    }

    /// ``write(atPath:identifier:contentVersion:fingerprint:)`` of a staging file, through its
    /// folder's descriptor when it has one. Blocking.
    static func write(to file: StagedFile, identifier: ItemIdentifier, contentVersion: Data, fingerprint: FileFingerprint) {
        file.setAttribute(
            attribute, to: DownloadMark(identifier: identifier, contentVersion: contentVersion, fingerprint: fingerprint).bytes)
    }

    private func save(atPath path: String) {
        let bytes = self.bytes
        ExtendedAttribute.set(Self.attribute, to: bytes, atPath: path)
    }

    /// The mark of the file at `path`, or `nil` when it has none (or one of another format).
    /// Blocking.
    static func read(atPath path: String) -> DownloadMark? {
        var buffer = [UInt8](repeating: 0, count: length + 1)
        let count = ExtendedAttribute.get(attribute, atPath: path, into: &buffer)
        guard count == length else { return nil }
        return DownloadMark(bytes: Array(buffer[..<length]))
    }

    /// Hands the engine's download of `old` at `path` (relative to the replica) to item `new`,
    /// before the file moves and `new`'s row is written: a store whose identifiers come from
    /// paths gives a moved item a new identifier, and its downloaded file follows it. The
    /// database notes the file as `new`'s download when it is `old`'s, unchanged (as its row
    /// records it, or noted); a mark the file has is carried too. Nothing happens to a file
    /// that is neither. Blocking.
    static func carry(_ old: ItemRecord, atPath path: String, to new: ItemIdentifier, in replica: Replica) {
        guard old.identifier != new else { return }
        let full = replica.path(path)
        if let notes = replica.downloadNotes, let print = replica.fingerprint(atPath: full), print.isRegularFile {
            let recorded = old.state == .materialized && old.recordsFile(print)
            let noted = recorded ? nil : notes.download(of: old.identifier, print)
            if recorded || noted != nil {
                try? notes.note([
                    PlacedDownload(
                        identifier: new, contentVersion: recorded ? old.localContentVersion : noted?.contentVersion, fingerprint: print)
                ])
            }
        }
        carry(atPath: full, from: old.identifier, to: new)
    }

    /// Hands the mark of the engine's download at `path` from item `old` to item `new`: a store
    /// whose identifiers come from paths gives a moved item a new identifier, and its
    /// downloaded file follows it. Nothing happens when the file has no mark of `old` that
    /// matches it. Blocking.
    static func carry(atPath path: String, from old: ItemIdentifier, to new: ItemIdentifier) {
        var info = stat()
        guard old != new, lstat(path, &info) == 0, var mark = read(atPath: path),
            mark.inode == Replica.inode(info), mark.identifierHash == FNV1a.hash(old.rawValue.utf8)
        else { return }
        mark.identifierHash = FNV1a.hash(new.rawValue.utf8)
        mark.save(atPath: path)
    }

    /// A file the engine downloaded and placed, unchanged since.
    struct Download {
        /// The content version the file holds: the record's when the mark names it, `nil` when
        /// it is an older one (the next sync downloads the newer).
        var contentVersion: Data?
    }

    /// Whether the file of `record`'s item in `replica` (with fingerprint `print`) is the
    /// engine's own unchanged download of the item, and of which version: the database's note
    /// of it (``DownloadNotes``), else the file's mark (a file placed by an earlier version, or
    /// where the note could not be written). A file neither
    /// describes is never taken for a download here (an uploaded file has the item's size and
    /// date too). Blocking.
    static func recognize(_ record: ItemRecord, _ print: FileFingerprint, in replica: Replica) -> Download? {
        guard record.kind == .file, print.isRegularFile else { return nil }
        if let placed = replica.downloadNotes?.download(of: record.identifier, print) {
            return Download(contentVersion: placed.contentVersion == record.contentVersion ? record.contentVersion : nil)
        }
        return recognize(atPath: replica.path(record.path), print, as: record)
    }

    /// Whether the file at `path` (with fingerprint `print`) is the engine's own unchanged
    /// download of `record`'s item, and of which version: its mark says so. A file without a
    /// mark is never taken for a download here (an uploaded file has the item's size and date
    /// too). Blocking.
    static func recognize(atPath path: String, _ print: FileFingerprint, as record: ItemRecord) -> Download? {
        guard record.kind == .file, print.isRegularFile, let mark = read(atPath: path), mark.matches(print, identifier: record.identifier)
        else { return nil }
        return Download(contentVersion: mark.holds(contentVersion: record.contentVersion) ? record.contentVersion : nil)
    }
}

/// The 64-bit FNV-1a hash: stable across runs and processes (unlike `Hasher`), for names and
/// marks the engine finds again later.
enum FNV1a {
    static func hash<Bytes: Sequence>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}

extension Replica {
    /// Whether a materialized file (at the record's path, with fingerprint `print`) differs
    /// from what the engine wrote: its fingerprint is not the recorded one, and it is not a
    /// download the engine placed but has not recorded yet (its note, ``DownloadNotes``, or its
    /// ``DownloadMark``; another process downloading the item again, or one killed before its
    /// database write). Blocking when the fingerprints differ (it asks the database and reads
    /// the mark).
    public func hasLocalChanges(_ record: ItemRecord, _ print: FileFingerprint) -> Bool {
        if record.recordsFile(print) { return false }
        // Evicted by another process, not recorded yet: the item's dataless file is no edit.
        if placeholderUnderItsName(record.path)?.isOwned(by: record.identifier) == true { return false }
        return DownloadMark.recognize(record, print, in: self) == nil
    }
}
