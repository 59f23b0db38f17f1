import ProviderStore

/// Answers which content policy applies to a path of one domain: the policy set on the item
/// itself, else on its nearest folder above, else ``ContentPolicy/lazy`` (policies inherit
/// downward, as Apple's content policies and cfapi's pin states). Built from the few explicit
/// policies of the domain (``MetadataStore/explicitPolicies(domainID:)``); a value, so a pass
/// takes one and asks it many times.
public struct PolicyResolver: Sendable {
    /// The explicit policies by path ("" is the root).
    public let explicit: [String: ContentPolicy]

    public init(explicit: [String: ContentPolicy]) { self.explicit = explicit }

    /// The policy of `path` and the path it was set on (`nil` for the default).
    public func resolve(_ path: String) -> (policy: ContentPolicy, setOn: String?) {
        // Most domains set no policy: `ls` of many rows asks for nothing.
        if explicit.isEmpty { return (.lazy, nil) }
        var current = Substring(path)
        while true {
            if let policy = explicit[String(current)] { return (policy, String(current)) }
            if current.isEmpty { return (.lazy, nil) }
            if let slash = current.lastIndex(of: "/") {
                current = current[..<slash]
            } else {
                current = ""
            }
        }
    }

    /// The policy of `path`.
    public func policy(of path: String) -> ContentPolicy { resolve(path).policy }
}
