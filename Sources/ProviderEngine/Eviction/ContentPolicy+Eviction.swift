import ProviderCore
import ProviderStore

extension ContentPolicy {
    /// Whether a new version in the store evicts a downloaded file instead of downloading it
    /// again: ``evictOnRemoteUpdate``, and ``onlineOnly`` (a file that is not kept is not
    /// fetched again for a program that no longer reads it).
    var evictsOnRemoteUpdate: Bool { self == .evictOnRemoteUpdate || self == .onlineOnly }
}
