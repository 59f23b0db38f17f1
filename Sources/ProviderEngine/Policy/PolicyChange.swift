import ProviderCore
import ProviderStore

/// What setting a content policy on one item did.
public struct PolicyChange: Sendable {
    /// The item, `DOMAIN:/path`.
    public var path: String
    /// Its policy now: its own, or (after `inherit`) its folder's.
    public var policy: ContentPolicy
    /// Where that policy is set, `DOMAIN:/path`; `nil` for the default.
    public var setOn: String?
    /// The items below it whose own policies were removed (`DOMAIN:/path`): a folder's policy
    /// applies to its whole subtree.
    public var cleared: [String]
}
