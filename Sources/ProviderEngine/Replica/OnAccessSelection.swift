import ProviderStore

/// Which on-access mechanism a conversion gives a dataless domain
/// (``ProviderManager/convertDomain(named:to:onAccess:events:)``, `domain convert --on-access`).
public enum OnAccessSelection: Sendable, Hashable {
    /// The mechanism the domain has stays; a domain converted to dataless gets ``auto``'s.
    case keep
    /// fanotify where it can work, else FUSE, as `domain add --on-access auto` picks
    /// (``ProviderManager/chooseOnAccess(_:backing:)``).
    case auto
    /// This mechanism, refused with the reason where it cannot work.
    case only(OnAccessMechanism)

    /// `nil` (what `--on-access auto` parses to) is ``auto``; a mechanism is ``only(_:)``.
    public init(_ requested: OnAccessMechanism?) {
        self = requested.map { .only($0) } ?? .auto
    }

    /// The mechanism asked of ``ProviderManager/chooseOnAccess(_:backing:)``: `nil` for ``auto``
    /// (and ``keep``, for which the caller decides first).
    var requested: OnAccessMechanism? {
        if case .only(let mechanism) = self { return mechanism }
        return nil
    }
}
