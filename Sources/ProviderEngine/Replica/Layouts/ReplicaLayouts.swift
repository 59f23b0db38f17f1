import ProviderStore

/// Picks a domain's ``ReplicaLayout``: the one place that maps what the domain record says
/// (its ``ReplicaMode``) to a layout. A new layout is a folder of its own under
/// `Replica/Layouts/` and one line here.
public enum ReplicaLayouts {
    /// The layout of a replica mode.
    public static func layout(for mode: ReplicaMode) -> any ReplicaLayout {
        switch mode {
        case .placeholderFiles: PlaceholderFilesLayout()
        case .dataless: DatalessLayout()
        }
    }

    /// The layout a domain's record asks for.
    public static func layout(of domain: DomainRecord) -> any ReplicaLayout { layout(for: domain.replicaMode) }

    /// Whether two records of one domain ask for different layouts: the domain was converted
    /// between them (what a process that opened it before must not act on).
    public static func differ(_ a: DomainRecord, _ b: DomainRecord) -> Bool { a.replicaMode != b.replicaMode }

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
