import Foundation
import ProviderCore
import ProviderStore

/// The database's notes of one domain's downloads, written before each is renamed into place
/// (`MetadataStore+PlacedDownloads.swift`), as its ``Replica`` consults them: what tells the
/// engine's own download (unrecorded, or recorded since a caller read its row) from a local
/// edit. The replica of a ``DomainContext`` has them; one made without (a conversion's, an
/// adoption's) knows the downloads by their ``DownloadMark`` attribute only.
public struct DownloadNotes: Sendable {
    let store: MetadataStore
    let domainID: Int64

    /// Notes downloads about to be renamed into place, in one transaction. Blocking.
    /// - Throws: `localIOFailure` when the database cannot be written.
    func note(_ downloads: [PlacedDownload]) throws(FileProviderError) {
        try store.notePlacedDownloads(domainID: domainID, downloads)
    }

    /// Forgets the note of a download whose rename failed. Blocking; a database failure is
    /// ignored (a note of a file that is not there matches nothing).
    func forget(_ identifier: ItemIdentifier, inode: Int64) {
        try? store.forgetPlacedDownload(domainID: domainID, identifier: identifier, inode: inode)
    }

    /// The engine's download of `identifier` that a file with fingerprint `print` is,
    /// unchanged since it was placed (its note); `nil` when it is not one, or the database
    /// cannot say. Blocking.
    func download(of identifier: ItemIdentifier, _ print: FileFingerprint) -> PlacedDownload? {
        guard print.isRegularFile else { return nil }
        return try? store.placedDownload(
            domainID: domainID, identifier: identifier, size: print.size, modificationNanos: print.modificationNanos, inode: print.inode)
    }

    /// ``download(of:_:)`` of whichever item is at `path` (relative to the replica root).
    /// Blocking.
    func download(atPath path: String, _ print: FileFingerprint) -> PlacedDownload? {
        guard print.isRegularFile else { return nil }
        return try? store.placedDownload(
            domainID: domainID, path: path, size: print.size, modificationNanos: print.modificationNanos, inode: print.inode)
    }
}

extension PlacedDownload {
    /// A download of `identifier` at `contentVersion` whose file has fingerprint `print`.
    init(identifier: ItemIdentifier, contentVersion: Data?, fingerprint print: FileFingerprint) {
        self.init(
            identifier: identifier, contentVersion: contentVersion, size: print.size, modificationNanos: print.modificationNanos,
            inode: print.inode)
    }
}

extension Replica {
    /// This replica, with the database's notes of `domainID`'s downloads (``downloadNotes``).
    func noting(downloadsOf domainID: Int64, in store: MetadataStore) -> Replica {
        var replica = self
        replica.downloadNotes = DownloadNotes(store: store, domainID: domainID)
        return replica
    }
}
