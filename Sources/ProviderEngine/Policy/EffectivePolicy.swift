import ProviderCore
import ProviderStore

/// The content policy that applies to an item, and where it is set.
public struct EffectivePolicy: Sendable, Hashable {
    /// The item's path, relative to the replica root.
    public var path: String
    public var policy: ContentPolicy
    /// The path of the item the policy is set on (the item itself or a folder above it);
    /// `nil` for the default (``ContentPolicy/lazy``, set nowhere).
    public var setOn: String?

    public init(path: String, policy: ContentPolicy, setOn: String?) {
        self.path = path
        self.policy = policy
        self.setOn = setOn
    }

    /// Whether the policy is set on the item itself.
    public var isOwn: Bool { setOn == path }
}
