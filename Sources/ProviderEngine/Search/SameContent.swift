import Foundation
import ProviderCore
import ProviderStore

/// A file found holding (or maybe holding) the same contents as others, named by domain.
public struct ContentLocation: Sendable, Hashable, Codable {
    public var domain: String
    /// Relative path, no leading `/`.
    public var path: String
    public var size: Int64
    /// `algorithm:hex`, when one is recorded.
    public var contentHash: String?
    /// How it was found to hold the same contents as the file asked about (``ProviderManager/whereis(_:)``;
    /// `dupes` gives this per group).
    public var comparedBy: SameContent.Comparison

    public init(domain: String, path: String, size: Int64, contentHash: String?, comparedBy: SameContent.Comparison) {
        self.domain = domain
        self.path = path
        self.size = size
        self.contentHash = contentHash
        self.comparedBy = comparedBy
    }

    /// `DOMAIN:/path`.
    public var location: String { "\(domain):/\(path)" }
}

/// Files of one size across domains that hold, or may hold, the same contents
/// (``ProviderManager/duplicates(_:)``).
public struct SameContent: Sendable, Hashable {
    /// How the contents were compared.
    public enum Comparison: String, Sendable, Hashable, Codable {
        /// The recorded content hashes (same algorithm) are equal: the same contents.
        case contentHash
        /// The sizes are equal and at least one file was never hashed: maybe the same
        /// contents (nothing is downloaded to find out).
        case size
    }

    public var size: Int64
    public var comparedBy: Comparison
    /// The hash all the files have, for ``Comparison/contentHash``.
    public var contentHash: String?
    /// At least two.
    public var files: [ContentLocation]

    public init(size: Int64, comparedBy: Comparison, contentHash: String?, files: [ContentLocation]) {
        self.size = size
        self.comparedBy = comparedBy
        self.contentHash = contentHash
        self.files = files
    }

    /// The groups of same contents among files of one size: when every one has a hash, a
    /// group per hash that two or more files have; else one group of all, compared by size.
    static func groups(ofOneSize files: [ContentLocation]) -> [SameContent] {
        guard files.count > 1, let size = files.first?.size else { return [] }
        if files.contains(where: { $0.contentHash == nil }) {
            return [SameContent(size: size, comparedBy: .size, contentHash: nil, files: files.map { $0.compared(by: .size) })]
        }
        var byHash: [String: [ContentLocation]] = [:]
        var order: [String] = []
        for file in files {
            let key = file.contentHash!.lowercased()
            if byHash[key] == nil { order.append(key) }
            byHash[key, default: []].append(file.compared(by: .contentHash))
        }
        return order.compactMap { key in
            guard let group = byHash[key], group.count > 1 else { return nil }
            return SameContent(size: size, comparedBy: .contentHash, contentHash: key, files: group)
        }
    }
}

extension ContentLocation {
    func compared(by comparison: SameContent.Comparison) -> ContentLocation {
        var copy = self
        copy.comparedBy = comparison
        return copy
    }
}

extension ProviderManager {
    /// Every file of every domain that holds, or may hold, the contents of the file at
    /// `location` (git-annex's `whereis`, across domains), the file itself first: files with
    /// the same recorded hash (``SameContent/Comparison/contentHash``), and files of the same
    /// size when either was never hashed (``SameContent/Comparison/size``). Files whose hash
    /// differs are left out. Offline; nothing is downloaded.
    /// - Throws: `providerDomainNotFound`; `noSuchItem` when the database has no item there;
    ///   `invalidArgument` when the item is not a file; `localIOFailure` when the database fails.
    public func whereis(_ location: ItemLocation) async throws(FileProviderError) -> [ContentLocation] {
        try await blocking { [self] () throws(FileProviderError) in
            let domains = try self.domains()
            let names = Dictionary(domains.compactMap { domain in domain.id.map { ($0, domain.name) } }) { first, _ in first }
            let domain = try self.domain(named: location.domain)
            guard let id = domain.id, let item = try store.item(domainID: id, path: location.path) else {
                throw FileProviderError(
                    .noSuchItem, "no item at \(location.description); run 'fileproviderctl sync \(location.domain)' to refresh")
            }
            guard item.kind == .file else {
                throw FileProviderError(.invalidArgument, "\(location.description) is a \(item.kind.rawValue); whereis takes a file")
            }
            let own = item.comparableHash.map(Self.hashParts)
            var found: [ContentLocation] = []
            var this: ContentLocation?
            for copy in try store.files(ofSize: item.size) {
                guard let name = names[copy.domainID] else { continue }
                let other = copy.contentHash.map(Self.hashParts)
                let comparison: SameContent.Comparison
                if let own, let other, own.algorithm == other.algorithm {
                    guard own.hex == other.hex else { continue }
                    comparison = .contentHash
                } else {
                    comparison = .size
                }
                let location = ContentLocation(
                    domain: name, path: copy.path, size: copy.size, contentHash: copy.contentHash, comparedBy: comparison)
                if copy.domainID == id && copy.path == item.path { this = location } else { found.append(location) }
            }
            return (this.map { [$0] } ?? []) + found
        }
    }

    /// The groups of files across all domains that hold, or may hold, the same contents
    /// (``SameContent``), smallest size first, a page of sizes at a time to `body`. Empty files
    /// are left out. Offline; nothing is downloaded.
    /// - Throws: `localIOFailure` when the database fails; what `body` throws.
    public func duplicates(pageSize: Int = 4_096, _ body: ([SameContent]) throws(FileProviderError) -> Void) async throws(FileProviderError)
    {
        let store = self.store
        let names = try await blocking { [self] () throws(FileProviderError) in
            Dictionary(try self.domains().compactMap { domain in domain.id.map { ($0, domain.name) } }) { first, _ in first }
        }
        var after: Int64?
        while true {
            let last = after
            let page = try await blocking { () throws(FileProviderError) in try store.filesSharingASize(after: last, limit: pageSize) }
            guard let largest = page.last?.size else { return }
            after = largest
            var groups: [SameContent] = []
            var start = page.startIndex
            while start < page.endIndex {
                var end = start
                while end < page.endIndex && page[end].size == page[start].size { end += 1 }
                let files = page[start..<end].compactMap { copy in
                    names[copy.domainID].map {
                        ContentLocation(domain: $0, path: copy.path, size: copy.size, contentHash: copy.contentHash, comparedBy: .size)
                    }
                }
                groups += SameContent.groups(ofOneSize: files)
                start = end
            }
            if !groups.isEmpty { try body(groups) }
        }
    }

    /// An `algorithm:hex` hash as its parts (an empty algorithm for hex alone), case ignored.
    static func hashParts(_ hash: String) -> (algorithm: String, hex: String) {
        let lower = hash.lowercased()
        guard let colon = lower.firstIndex(of: ":") else { return ("", lower) }
        return (String(lower[..<colon]), String(lower[lower.index(after: colon)...]))
    }
}
