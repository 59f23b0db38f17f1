/// How a set of an extended attribute treats one that exists, or not (`setxattr(2)` flags).
public struct FUSEAttributeFlags: OptionSet, Sendable, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `XATTR_CREATE`: fail with `EEXIST` when the attribute exists.
    public static let create = FUSEAttributeFlags(rawValue: 1)
    /// `XATTR_REPLACE`: fail with `ENODATA` when it does not.
    public static let replace = FUSEAttributeFlags(rawValue: 2)
}
