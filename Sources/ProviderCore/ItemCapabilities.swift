/// What the system may do with an item, as in Apple's `NSFileProviderItemCapabilities`.
public struct ItemCapabilities: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    public static let allowsReading = ItemCapabilities(rawValue: 1 << 0)
    public static let allowsWriting = ItemCapabilities(rawValue: 1 << 1)
    public static let allowsReparenting = ItemCapabilities(rawValue: 1 << 2)
    public static let allowsRenaming = ItemCapabilities(rawValue: 1 << 3)
    public static let allowsTrashing = ItemCapabilities(rawValue: 1 << 4)
    public static let allowsDeleting = ItemCapabilities(rawValue: 1 << 5)
    public static let allowsAddingSubItems = ItemCapabilities(rawValue: 1 << 6)
    public static let allowsContentEnumerating = ItemCapabilities(rawValue: 1 << 7)
    public static let allowsEvicting = ItemCapabilities(rawValue: 1 << 8)
    public static let allowsExcludingFromSync = ItemCapabilities(rawValue: 1 << 9)

    /// Everything a file in a writable store allows.
    public static let file: ItemCapabilities = [
        .allowsReading, .allowsWriting, .allowsReparenting, .allowsRenaming, .allowsDeleting,
        .allowsEvicting,
    ]
    /// Everything a folder in a writable store allows.
    public static let folder: ItemCapabilities = [
        .allowsReading, .allowsWriting, .allowsReparenting, .allowsRenaming, .allowsDeleting,
        .allowsAddingSubItems, .allowsContentEnumerating, .allowsEvicting,
    ]
}
