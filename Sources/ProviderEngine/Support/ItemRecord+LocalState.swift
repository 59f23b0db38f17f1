import Foundation
import ProviderStore

extension ItemRecord {
    /// Records that the replica holds this item's contents: the content version they are (`nil`
    /// when unknown, so the next sync downloads again) and the file's fingerprint as written.
    mutating func markMaterialized(contentVersion: Data?, fingerprint: FileFingerprint) {
        state = .materialized
        localContentVersion = contentVersion
        localSize = fingerprint.size
        localModificationNanos = fingerprint.modificationNanos
        localInode = fingerprint.inode
    }

    /// Whether `print` is the fingerprint this row records of its file (size, modification
    /// time, inode), whatever its state.
    func recordsFile(_ print: FileFingerprint) -> Bool {
        print.size == localSize && print.modificationNanos == localModificationNanos && print.inode == localInode
    }

    /// Whether the store's contents changed since the version the local file was downloaded (or
    /// uploaded) as. Sync down records the store's new version even when it keeps the local file
    /// (it never downloads over local edits, and a download can fail), so `contentVersion` is then
    /// newer than the file: a local edit or deletion of it is based on `localContentVersion`, and
    /// the store's change is one its user never saw (a conflict, never a plain overwrite).
    /// `false` when the file's version is unknown (`localContentVersion` is `nil`).
    var storeChangedSinceDownload: Bool {
        guard state == .materialized, let downloaded = localContentVersion else { return false }
        return downloaded != contentVersion
    }

    /// Records that the store has not taken this file's contents yet (`stillPendingFields`):
    /// the fingerprint no longer matches, so the next scan sends the contents again.
    mutating func markContentsPending() {
        localSize = -1
    }

    /// Records that the replica holds only this item's placeholder.
    mutating func markPlaceholder() {
        state = .placeholder
        localContentVersion = nil
        localSize = nil
        localModificationNanos = nil
        localInode = nil
    }
}
