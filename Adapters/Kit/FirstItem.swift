import Foundation
import ProviderCore

/// The item a download started with, so that an attempt resumed after a break (with `Range`),
/// and every range of a ``RangedDownload``, can check it is still the same file. Shared by the
/// HTTP adapters' downloads.
public final class FirstItem: @unchecked Sendable {
    private let lock = NSLock()
    private var item: Item?

    public init() {}

    /// Keeps the first item; throws `versionNoLongerAvailable` when a later one has another
    /// content version, `corruptData` when it has the same version but another size (a server
    /// whose `Content-Range` lies about the file's size).
    public func check(_ candidate: Item) throws(FileProviderError) {
        let first: Item = lock.withLock {
            if item == nil { item = candidate }
            return item!
        }
        if first.version.content != candidate.version.content {
            throw FileProviderError(
                .versionNoLongerAvailable, "\(candidate.filename) changed on the server during the download; fetch it again")
        }
        if first.size != candidate.size {
            throw FileProviderError(
                .corruptData,
                "\(candidate.filename): the server gave its size as \(first.size) bytes, then as \(candidate.size), for the same version")
        }
    }

    /// The first item, once there is one.
    public var value: Item? { lock.withLock { item } }
}
