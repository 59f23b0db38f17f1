/// Options of `Backend.createItem`, as in Apple's `NSFileProviderCreateItemOptions`.
public struct CreateOptions: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The item may exist already: the engine is replaying an operation after a crash or a
    /// re-import. The backend returns the existing item instead of throwing `filenameCollision`
    /// when it matches the template, and never creates a duplicate.
    public static let mayAlreadyExist = CreateOptions(rawValue: 1 << 0)
    /// The item is being re-created after the backend rejected its deletion.
    public static let deletionConflicted = CreateOptions(rawValue: 1 << 1)
}

/// Options of `Backend.modifyItem`, as in Apple's `NSFileProviderModifyItemOptions`.
public struct ModifyOptions: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The modification may have been applied already (a replay after a crash).
    public static let mayAlreadyExist = ModifyOptions(rawValue: 1 << 0)
}

/// Options of `Backend.deleteItem`, as in Apple's `NSFileProviderDeleteItemOptions`.
public struct DeleteOptions: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Delete a folder with everything in it. Without it, deleting a non-empty folder throws
    /// `directoryNotEmpty`.
    public static let recursive = DeleteOptions(rawValue: 1 << 0)
}
