import CSystemShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Extended attributes of files (`user.fileprovider.*`): the marks of replica roots, dataless
/// files and downloads. By path they never follow a final symlink (`lsetxattr`, `lgetxattr`).
///
/// Each returns what the call returns, -1 with `errno` on failure (`ENOTSUP` where the file
/// system keeps no extended attributes), and throws nothing: the caller says what failed.
/// Blocking: call them from the engine's executor, never Swift's cooperative pool.
package enum ExtendedAttribute {
    /// Sets attribute `name` of the file at `path` to `value`: 0, or -1 with errno.
    @discardableResult
    package static func set(_ name: String, to value: [UInt8], atPath path: String) -> Int32 {
        value.withUnsafeBytes { fp_set_xattr(path, name, $0.baseAddress, $0.count) }
    }

    /// Sets attribute `name` of the open file `fd` to `value`: 0, or -1 with errno.
    @discardableResult
    package static func set(_ name: String, to value: [UInt8], of fd: Int32) -> Int32 {
        value.withUnsafeBytes { fp_fset_xattr(fd, name, $0.baseAddress, $0.count) }
    }

    /// Reads attribute `name` of the file at `path` into `buffer` (at most its count): the
    /// value's length, or -1 with errno (`ENODATA` when the file has none, `ERANGE` when the
    /// value is longer than `buffer`).
    package static func get(_ name: String, atPath path: String, into buffer: inout [UInt8]) -> Int {
        buffer.withUnsafeMutableBytes { fp_get_xattr(path, name, $0.baseAddress, $0.count) }
    }

    /// Reads attribute `name` of the open file `fd` into `buffer` (at most its count): the
    /// value's length, or -1 with errno as ``get(_:atPath:into:)``.
    package static func get(_ name: String, of fd: Int32, into buffer: inout [UInt8]) -> Int {
        buffer.withUnsafeMutableBytes { fp_fget_xattr(fd, name, $0.baseAddress, $0.count) }
    }

    /// Removes attribute `name` of the open file `fd`: 0, or -1 with errno (`ENODATA` when it
    /// has none).
    @discardableResult
    package static func remove(_ name: String, of fd: Int32) -> Int32 {
        fp_fremove_xattr(fd, name)
    }
}
