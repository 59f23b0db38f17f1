import Foundation
import Synchronization

/// Folders of the bucket this backend saw a moment ago, by key (`docs/`): a batch of new files
/// in one folder checks that the folder exists once, not with a listing before every upload.
///
/// A folder is trusted for ``lifetime`` after a listing showed it or this backend wrote its
/// marker; deleting or moving a folder through this backend forgets it and every folder below.
/// Another client can delete a folder meanwhile: a file created in it then makes the folder
/// exist again (a key below a prefix is the folder, in S3), as any S3 client writing there
/// would. Holds at most ``maximumFolders`` keys.
final class KnownFolders: Sendable {
    /// How long a folder seen is trusted.
    static let lifetime: Duration = .seconds(5)
    /// The most folders remembered; past it the memory starts again.
    static let maximumFolders = 1_024

    private let seen = Mutex<[String: ContinuousClock.Instant]>([:])

    /// Whether the folder of `key` was seen less than ``lifetime`` ago.
    func contains(_ key: String) -> Bool {
        let now = ContinuousClock.now
        return seen.withLock { folders in
            guard let at = folders[key] else { return false }
            if now - at < Self.lifetime { return true }
            folders[key] = nil
            return false
        }
    }

    /// Remembers that the folder of `key` exists now.
    func insert(_ key: String) {
        let now = ContinuousClock.now
        seen.withLock { folders in
            if folders.count >= Self.maximumFolders { folders.removeAll(keepingCapacity: true) }
            folders[key] = now
        }
    }

    /// Forgets the folder of `key` and every folder below it.
    func forget(below key: String) {
        seen.withLock { folders in
            for folder in folders.keys where folder.hasPrefix(key) { folders[folder] = nil }
        }
    }
}
