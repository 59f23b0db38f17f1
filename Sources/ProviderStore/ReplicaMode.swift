/// How a domain's replica shows a file whose contents are not downloaded, chosen when the domain
/// is added (`domain add --mode`). Stored in `domain.replicaMode` by its raw value.
public enum ReplicaMode: String, Codable, Hashable, Sendable, CaseIterable {
    /// A file that is not downloaded is `<name>.placeholder` beside its real name: a small JSON
    /// file with the item's metadata. A program sees no file at the real name until the item is
    /// materialized. The replica is an ordinary folder at ``DomainRecord/replicaPath``; works on
    /// any file system, without `serve` and without root.
    case placeholderFiles = "placeholder-files"
    /// Every file is under its real name, as Apple's dataless files: one not downloaded is a
    /// sparse file with the item's size and dates, and `serve` fetches its contents when any
    /// program reads, writes, maps or runs it (fanotify pre-content events). The files live in a
    /// backing folder under the state folder (`<home>/replicas/<domain name>`), which the engine
    /// reads and writes; ``DomainRecord/replicaPath`` is where programs see them, a bind mount of
    /// the backing folder that `serve` makes and guards. Needs CAP_SYS_ADMIN, Linux 6.14 or
    /// later and a backing folder on ext4, xfs, btrfs or bcachefs.
    case dataless

    /// Decodes the raw value, refusing one this version does not know (a database written by a
    /// newer version) with a message that says so, rather than guessing a mode: a dataless
    /// replica read as another mode would take its holes for contents.
    /// - Throws: `DecodingError.dataCorrupted` for an unknown mode.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let mode = ReplicaMode(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription:
                    "unknown replica mode '\(raw)' (written by a newer version of FileProviderKit?); use that version for this database"
            )
        }
        self = mode
    }
}
