/// What the engine keeps downloaded of an item, set per item or folder and inherited downward
/// (Apple's `NSFileProviderContentPolicy`, cfapi's pin states). Stored in `item.contentPolicy` by
/// its raw value where it was set; an item without one takes its nearest ancestor's, and the
/// domain's root defaults to ``lazy``.
public enum ContentPolicy: String, Codable, Hashable, Sendable, CaseIterable {
    /// Fetched when read, evictable (Apple's `downloadLazily`). The default.
    case lazy
    /// Always downloaded, never evicted (Apple's `downloadEagerlyAndKeepDownloaded`, cfapi's
    /// pinned): what `pin` sets.
    case eager
    /// Fetched when read; a change in the store evicts the file instead of downloading it again
    /// (Apple's `downloadLazilyAndEvictOnRemoteUpdate`).
    case evictOnRemoteUpdate = "evict-on-remote-update"
    /// Not kept: evicted now and after each use, as soon as it is not open and has no unsynced
    /// edits (cfapi's unpinned): what `unpin` sets.
    case onlineOnly = "online-only"

    /// Whether automatic eviction may take the file's contents.
    public var isEvictable: Bool { self != .eager }

    /// A policy from its raw value, or `nil` for an unknown one. A database written by a newer
    /// version may hold a policy this one does not know: it is read as ``eager`` by
    /// ``ItemRecord``, which keeps the contents rather than guess they may go.
    public init?(name: String) { self.init(rawValue: name) }
}

/// How a `dataless` domain fetches a file a program reads (`domain add --hydration`).
public enum Hydration: String, Codable, Hashable, Sendable, CaseIterable {
    /// The whole file on its first access.
    case full
    /// Only the chunks a read needs, with read-ahead that grows while a program reads in order
    /// (Windows' progressive hydration, Apple's `fetchPartialContents`). Needs a backend with
    /// ranged reads; others fall back to ``full``.
    case progressive
}
