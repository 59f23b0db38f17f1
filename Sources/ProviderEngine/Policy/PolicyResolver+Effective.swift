import Foundation
import ProviderCore
import ProviderStore

extension PolicyResolver {
    /// The policy of the item at `path` whose own policy is `own`, and where it is set.
    public func effective(_ path: String, own: ContentPolicy?) -> EffectivePolicy {
        let (policy, setOn) = resolve(path, own: own)
        return EffectivePolicy(path: path, policy: policy, setOn: setOn)
    }

    /// The policy of `record`'s item, and where it is set.
    public func effective(_ record: ItemRecord) -> EffectivePolicy {
        effective(record.path, own: record.contentPolicy)
    }

    /// The path of the item whose ``ContentPolicy/eager`` policy keeps `record`'s item
    /// downloaded (the item itself or the nearest folder above with a policy of its own), else
    /// `nil`; its own policy is `record`'s.
    func pinHolder(of record: ItemRecord) -> String? {
        let (policy, setOn) = resolve(record)
        return policy == .eager ? setOn : nil
    }
}
