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
