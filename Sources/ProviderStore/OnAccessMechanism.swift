/// How `serve` gives programs a dataless domain's files (`domain add --mode dataless
/// --on-access`), chosen when the domain is added and stored in `domain.onAccess` by its raw
/// value. Both keep the files the same way in the backing folder (`<home>/replicas/<name>`);
/// they differ in how programs reach them at the replica path.
public enum OnAccessMechanism: String, Codable, Hashable, Sendable, CaseIterable {
    /// fanotify pre-content events on a bind mount of the backing folder: native speed for
    /// complete files; needs CAP_SYS_ADMIN, Linux 6.14 or later and a backing folder on ext4,
    /// xfs, btrfs or bcachefs.
    case fanotify
    /// A FUSE file system over the backing folder (libfuse 3, mounted through `fusermount3`):
    /// any user, any kernel with FUSE; no holes for programs to skip.
    case fuse

    /// Decodes the raw value, refusing one this version does not know (a database written by a
    /// newer version) with a message that says so.
    /// - Throws: `DecodingError.dataCorrupted` for an unknown mechanism.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let mechanism = OnAccessMechanism(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription:
                    "unknown on-access mechanism '\(raw)' (written by a newer version of FileProviderKit?); use that version for this database"
            )
        }
        self = mechanism
    }
}
