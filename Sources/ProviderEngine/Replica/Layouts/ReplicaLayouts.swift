import ProviderStore

/// Picks a domain's ``ReplicaLayout``: the one place that maps what the domain record says
/// (its ``ReplicaMode`` and, for a dataless domain, its ``OnAccessMechanism``) to a layout. A
/// new layout is a folder of its own under `Replica/Layouts/` and one line here.
public enum ReplicaLayouts {
    /// The layout of a replica mode; `onAccess` picks a dataless one (fanotify's or FUSE's).
    public static func layout(for mode: ReplicaMode, onAccess: OnAccessMechanism = .fanotify) -> any ReplicaLayout {
        switch (mode, onAccess) {
        case (.placeholderFiles, _): PlaceholderFilesLayout()
        case (.dataless, .fanotify): DatalessLayout()
        case (.dataless, .fuse): FUSELayout()
        }
    }

    /// The layout a domain's record asks for.
    public static func layout(of domain: DomainRecord) -> any ReplicaLayout {
        layout(for: domain.replicaMode, onAccess: domain.onAccess)
    }

    /// Whether two records of one domain ask for different layouts: the domain was converted
    /// between them (what a process that opened it before must not act on).
    public static func differ(_ a: DomainRecord, _ b: DomainRecord) -> Bool {
        a.replicaMode != b.replicaMode || (a.replicaMode == .dataless && a.onAccess != b.onAccess)
    }

    /// The layout a conversion to `target` reads the domain's files with: the layout its record
    /// names, or, when the record names `target` already (a conversion killed after recording
    /// it, finished by a rerun), the other one. A third layout needs the conversion's marker to
    /// name its source.
    static func conversionSource(of domain: DomainRecord, to target: any ReplicaLayout) -> any ReplicaLayout {
        let current = layout(of: domain)
        guard current.mode == target.mode else { return current }
        return target.keepsFilesInBackingFolder ? PlaceholderFilesLayout() : DatalessLayout()
    }
}
