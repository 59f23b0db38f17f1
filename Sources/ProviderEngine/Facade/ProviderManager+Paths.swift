import Foundation
import ProviderCore
import ProviderStore

/// An item addressed by the user: a domain and a path relative to its replica root.
public struct ItemLocation: Hashable, Sendable {
    public var domain: String
    /// "" for the root, else `a/b/c`.
    public var path: String

    public init(domain: String, path: String) {
        self.domain = domain
        self.path = path
    }

    /// `DOMAIN:/path`, for messages: quoted when the path holds characters that must not reach
    /// a terminal (``TerminalText/quoted(_:)``).
    public var description: String { TerminalText.quoted("\(domain):/\(path)") }
}

extension ProviderManager {
    /// Resolves `DOMAIN:/path`, `DOMAIN:path`, `DOMAIN:` or a file system path inside a replica
    /// (a `.placeholder` file stands for its item).
    ///
    /// - Throws: `providerDomainNotFound` for an unknown domain; `invalidArgument` for a path
    ///   outside every replica or with `..`.
    public func resolve(_ argument: String) throws(FileProviderError) -> ItemLocation {
        if let colon = argument.firstIndex(of: ":"), !argument[..<colon].contains("/") {
            let name = String(argument[..<colon])
            _ = try domain(named: name)
            return ItemLocation(domain: name, path: try Self.normalize(String(argument[argument.index(after: colon)...])))
        }
        for part in argument.split(separator: "/") where part == ".." {
            throw FileProviderError(.invalidArgument, "'..' is not allowed in item paths: \(argument)")
        }
        let absolute = URL(fileURLWithPath: argument).standardizedFileURL.path
        for domain in try domains() {
            // A dataless domain's files are also reachable in its backing folder.
            let roots = [domain.replicaPath] + [try? backingURL(of: domain)].compactMap { $0??.path }
            for root in roots {
                if absolute == root { return ItemLocation(domain: domain.name, path: "") }
                if absolute.hasPrefix(root + "/") {
                    var relative = String(absolute.dropFirst(root.count + 1))
                    if relative.hasSuffix(Replica.placeholderSuffix), let id = domain.id,
                        try store.item(domainID: id, path: relative) == nil
                    {
                        // `name.placeholder` means `name` (a shortened one, the name it holds).
                        let (folder, name) = RelativePath(relative).split
                        if let item = Replica.itemName(ofPlaceholderFile: name, atPath: absolute) {
                            relative = folder.isEmpty ? item : folder + "/" + item
                        }
                    }
                    return ItemLocation(domain: domain.name, path: try Self.normalize(relative))
                }
            }
        }
        throw FileProviderError(
            .invalidArgument,
            "\(argument) is not inside any domain's replica; use DOMAIN:/path or a path under a replica folder (see 'fileproviderctl domain list')"
        )
    }

    /// Turns `/a//b/` into `a/b`; refuses `.` and `..` components.
    static func normalize(_ path: String) throws(FileProviderError) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        for part in parts where part == "." || part == ".." {
            throw FileProviderError(.invalidArgument, "'.' and '..' are not allowed in item paths: \(path)")
        }
        return parts.joined(separator: "/")
    }
}
