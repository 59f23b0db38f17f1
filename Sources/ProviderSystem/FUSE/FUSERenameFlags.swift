/// How a rename treats an existing item at the new name (`renameat2` flags).
public struct FUSERenameFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `RENAME_NOREPLACE`: fail with `EEXIST` rather than replace an item at the new name.
    public static let noReplace = FUSERenameFlags(rawValue: 1)
    /// `RENAME_EXCHANGE`: swap the two items (both must exist).
    public static let exchange = FUSERenameFlags(rawValue: 2)
}
