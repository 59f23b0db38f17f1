import Foundation

/// A file of some domain as the content searches (`whereis`, `dupes`) see it: where it is,
/// its size and its recorded content hash.
public struct ContentCopy: Sendable, Hashable {
    public var domainID: Int64
    /// Relative path, no leading `/`.
    public var path: String
    public var size: Int64
    /// `algorithm:hex`, when one is recorded.
    public var contentHash: String?

    public init(domainID: Int64, path: String, size: Int64, contentHash: String?) {
        self.domainID = domainID
        self.path = path
        self.size = size
        self.contentHash = contentHash
    }
}
