import Foundation

/// The names adapters give the files an upload writes into the store's folder before renaming
/// them into place: `.fileprovider-staging-<UUID>`, with the UUID as `UUID().uuidString` spells
/// it (upper-case, 8-4-4-4-12). No item may have a name with the prefix.
///
/// An upload that is killed (the process, the machine or the connection) leaves its staging
/// file behind. An adapter that lists a folder removes those that are abandoned
/// (``isAbandoned(_:modified:accessed:now:)``, or, where every writer locks its staging file
/// as the local backend does, those nobody holds), and never anything else.
public enum StagingName {
    /// The prefix of staging names.
    public static let prefix = ".fileprovider-staging-"

    /// How long a staging file must have been left untouched before a listing removes it: one
    /// hour.
    ///
    /// An upload in progress, from this process or another machine, writes its staging file
    /// all the time, so its modification time stays within seconds of now (an upload stalled
    /// for an hour has a dead connection and starts again under a new name). Just before the
    /// rename, an upload may give the file the item's own, older modification time; the
    /// access time then stays the time the file was made (uploads set it to now, or the
    /// server did at the creation), so a file counts as untouched only when both times are
    /// older. An hour also leaves room for a server clock that is behind ours. And removing a
    /// staging file never loses data: its source is the replica's file, and an upload whose
    /// staging file vanished fails at the rename and is sent again by the next sync.
    public static let abandonedAge: TimeInterval = 3600

    /// A new staging name.
    public static func make() -> String { prefix + UUID().uuidString }

    /// Whether `name` is exactly a staging name: the prefix and a UUID spelled as ``make()``
    /// spells it, nothing before or after. A user's file that merely starts with the prefix is
    /// not one.
    public static func matches(_ name: String) -> Bool {
        guard name.utf8.starts(with: prefix.utf8) else { return false }
        let rest = String(name.utf8.dropFirst(prefix.utf8.count)) ?? ""
        return rest.utf8.count == 36 && UUID(uuidString: rest)?.uuidString == rest
    }

    /// Whether the entry `name` is an abandoned staging file: a staging name (``matches(_:)``)
    /// whose modification and access times (seconds since 1970) are both more than
    /// ``abandonedAge`` before `now`.
    public static func isAbandoned(_ name: String, modified: Int64, accessed: Int64, now: Date = Date()) -> Bool {
        guard matches(name) else { return false }
        let limit = Int64(now.timeIntervalSince1970 - abandonedAge)
        return modified < limit && accessed < limit
    }
}
