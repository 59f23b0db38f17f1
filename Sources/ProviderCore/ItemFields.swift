/// The fields of an item that changed, as in Apple's `NSFileProviderItemFields`.
///
/// Passed to `createItem` and `modifyItem`; returned as `stillPendingFields` for fields the
/// backend could not apply yet, which the engine sends again later.
public struct ItemFields: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let contents = ItemFields(rawValue: 1 << 0)
    public static let filename = ItemFields(rawValue: 1 << 1)
    public static let parentItemIdentifier = ItemFields(rawValue: 1 << 2)
    public static let lastUsedDate = ItemFields(rawValue: 1 << 3)
    public static let tagData = ItemFields(rawValue: 1 << 4)
    public static let favoriteRank = ItemFields(rawValue: 1 << 5)
    public static let creationDate = ItemFields(rawValue: 1 << 6)
    public static let contentModificationDate = ItemFields(rawValue: 1 << 7)
    public static let fileSystemFlags = ItemFields(rawValue: 1 << 8)
    public static let extendedAttributes = ItemFields(rawValue: 1 << 9)
    public static let typeAndCreator = ItemFields(rawValue: 1 << 10)
}
