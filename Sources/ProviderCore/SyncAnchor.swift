import Foundation

/// A position in a backend's change feed, opaque to the engine, at most 500 bytes.
public struct SyncAnchor: Hashable, Sendable, Codable {
    public static let maximumLength = 500
    public var rawValue: Data

    /// Creates an anchor.
    /// - Precondition: `rawValue` is at most ``maximumLength`` bytes.
    public init(_ rawValue: Data) {
        precondition(rawValue.count <= Self.maximumLength, "a sync anchor is at most 500 bytes")
        self.rawValue = rawValue
    }
}

/// A position in a paged listing, opaque to the engine, at most 500 bytes.
public struct Page: Hashable, Sendable, Codable {
    public static let maximumLength = 500
    public var rawValue: Data

    /// Creates a page token.
    /// - Precondition: `rawValue` is at most ``maximumLength`` bytes.
    public init(_ rawValue: Data) {
        precondition(rawValue.count <= Self.maximumLength, "a page token is at most 500 bytes")
        self.rawValue = rawValue
    }

    /// The first page of a listing sorted by name.
    public static let initialPageSortedByName = Page(Data("NSFileProviderInitialPageSortedByName".utf8))
    /// The first page of a listing sorted by date.
    public static let initialPageSortedByDate = Page(Data("NSFileProviderInitialPageSortedByDate".utf8))

    /// Whether this is one of the two initial pages.
    public var isInitial: Bool { self == .initialPageSortedByName || self == .initialPageSortedByDate }
}

/// What changed since an anchor: from `Backend.enumerateChanges(in:from:)`.
public struct ChangeSet: Sendable {
    /// Items created or changed since the anchor.
    public var updatedItems: [Item]
    /// Identifiers of items deleted since the anchor.
    public var deletedIdentifiers: [ItemIdentifier]
    /// The anchor to ask from next time.
    public var newAnchor: SyncAnchor
    /// More changes are waiting: ask again from `newAnchor` at once.
    public var moreComing: Bool
    /// Changed items left out because a value of theirs is impossible (see ``ItemBounds``);
    /// the engine reports each one and keeps what it had.
    public var refused: [RefusedItem]

    public init(
        updatedItems: [Item], deletedIdentifiers: [ItemIdentifier], newAnchor: SyncAnchor,
        moreComing: Bool, refused: [RefusedItem] = []
    ) {
        self.updatedItems = updatedItems
        self.deletedIdentifiers = deletedIdentifiers
        self.newAnchor = newAnchor
        self.moreComing = moreComing
        self.refused = refused
    }
}
