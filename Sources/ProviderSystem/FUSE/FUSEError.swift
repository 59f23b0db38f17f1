#if canImport(Glibc)
    import Glibc
#endif

/// Why a FUSE request failed, as the kernel hands it to the program: an errno value (`ENOENT`,
/// `EIO`, ...). What every ``FUSEFileSystem`` method throws.
public struct FUSEError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The errno value the program's call fails with.
    public let code: Int32

    /// An error with errno value `code` (`EIO` when `code` is not positive: a request never
    /// fails with "success").
    public init(code: Int32) { self.code = code > 0 ? code : EIO }

    /// The error of the C call that just failed: `errno` now.
    public static func lastCall() -> FUSEError { FUSEError(code: errno) }

    /// ENOENT: no item of that name, or no item with that inode.
    public static let noEntry = FUSEError(code: ENOENT)
    /// EIO: the contents could not be had (the store is unreachable, the fetch failed).
    public static let ioError = FUSEError(code: EIO)
    /// EEXIST: the name is taken.
    public static let exists = FUSEError(code: EEXIST)
    /// ENOTEMPTY: a folder to remove or replace holds items.
    public static let notEmpty = FUSEError(code: ENOTEMPTY)
    /// ENOTDIR: a folder was expected.
    public static let notFolder = FUSEError(code: ENOTDIR)
    /// EISDIR: a file was expected.
    public static let isFolder = FUSEError(code: EISDIR)
    /// EPERM: the operation is not allowed on this item.
    public static let notPermitted = FUSEError(code: EPERM)
    /// EACCES: this requester may not do that.
    public static let accessDenied = FUSEError(code: EACCES)
    /// ENOSPC: the local disk is full.
    public static let noSpace = FUSEError(code: ENOSPC)
    /// EINVAL: an argument makes no sense (a flag not supported, a name with `/`).
    public static let invalid = FUSEError(code: EINVAL)
    /// ENAMETOOLONG: a name over 255 bytes.
    public static let nameTooLong = FUSEError(code: ENAMETOOLONG)
    /// EOPNOTSUPP: this file system does not do that.
    public static let notSupported = FUSEError(code: EOPNOTSUPP)
    /// EXDEV: a rename across domains.
    public static let crossDevice = FUSEError(code: EXDEV)
    /// ENODATA: the item has no extended attribute of that name.
    public static let noAttribute = FUSEError(code: ENODATA)
    /// ERANGE: the answer does not fit in the program's buffer.
    public static let range = FUSEError(code: ERANGE)
    /// ENOSYS: this file system does not implement the request at all; the kernel remembers
    /// and no longer asks (for extended attributes programs then get EOPNOTSUPP).
    public static let notImplemented = FUSEError(code: ENOSYS)

    public var description: String { "\(String(cString: strerror(code))) (errno \(code))" }
}
