import CSystemShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Extended attributes of files (`user.fileprovider.*`): the marks of replica roots, dataless
/// files and downloads, and any attribute a file system passes through (the FUSE replica layout).
/// By path they never follow a final symlink (`lsetxattr`, `lgetxattr`).
///
/// Those by `String` path or descriptor return what the call returns, -1 with `errno` on
/// failure (`ENOTSUP` where the file system keeps no extended attributes), and throw nothing:
/// the caller says what failed. Those by byte path (any name, UTF-8 or not; values of any
/// length) throw ``Failure`` with the errno. Blocking: call them from the engine's executor or
/// a FUSE session's threads, never Swift's cooperative pool.
package enum ExtendedAttribute {
    /// Sets attribute `name` of the file at `path` to `value`: 0, or -1 with errno.
    @discardableResult
    package static func set(_ name: String, to value: [UInt8], atPath path: String) -> Int32 {
        value.withUnsafeBytes { fp_set_xattr(path, name, $0.baseAddress, $0.count) }
    }

    /// Sets attribute `name` of the file `file` in the folder open as `folder` (a descriptor;
    /// `O_PATH` will do) to `value`, looking up only `file` in it (`setxattrat`, Linux 6.13;
    /// on an older kernel `lsetxattr` of `path`, the same file's whole path): 0, or -1 with
    /// errno.
    @discardableResult
    package static func set(_ name: String, to value: [UInt8], inFolder folder: Int32, file: String, path: String) -> Int32 {
        value.withUnsafeBytes { fp_set_xattr_at(folder, file, path, name, $0.baseAddress, $0.count) }
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

    /// Whether the file at `path` has an attribute whose name starts with `prefix` (one
    /// `llistxattr`, never following a final symlink): `false` only when its list was read and
    /// holds none; `true` when one is there or the list could not be read in 1 KiB (errno).
    package static func hasAny(withPrefix prefix: String, atPath path: String) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { buffer in
            let length = fp_list_xattr(path, buffer.baseAddress, buffer.count)
            guard length >= 0 else { return true }
            let names = UnsafeBufferPointer(rebasing: buffer[..<length])
            return names.split(separator: 0).contains { $0.starts(with: prefix.utf8) }
        }
    }

    // MARK: By byte path, for a file system passing attributes through

    /// A failed attribute call: the errno it failed with (`ENODATA` when the file has no such
    /// attribute, `ENOTSUP` where the file system keeps none, `EEXIST`/`ENODATA` for a set whose
    /// flags refuse, `E2BIG`/`ERANGE` for a value too long).
    package struct Failure: Error, Equatable, Sendable {
        /// The errno value.
        package let code: Int32

        package init(code: Int32) { self.code = code }
    }

    /// The value of attribute `name` of the file at `path` (bytes, any length the file system
    /// keeps), never following a final symlink.
    /// - Throws: ``Failure`` with the call's errno (`ENODATA` when the file has none).
    package static func value(_ name: [UInt8], atPath path: [UInt8]) throws(Failure) -> [UInt8] {
        let (bytes, code) = withCString(path) { path in
            withCString(name) { name in readSized { fp_get_xattr(path, name, $0, $1) } }
        }
        guard code == 0 else { throw Failure(code: code) }
        return bytes
    }

    /// The names of the attributes of the file at `path` (each without its NUL), never
    /// following a final symlink.
    /// - Throws: ``Failure`` with the call's errno.
    package static func names(atPath path: [UInt8]) throws(Failure) -> [[UInt8]] {
        let (list, code) = withCString(path) { path in readSized { fp_list_xattr(path, $0, $1) } }
        guard code == 0 else { throw Failure(code: code) }
        return list.split(separator: 0).map { Array($0) }
    }

    /// Sets attribute `name` of the file at `path` to `value`, never following a final symlink;
    /// `flags` as `setxattr(2)`'s (`XATTR_CREATE`, `XATTR_REPLACE`).
    /// - Throws: ``Failure`` with the call's errno.
    package static func set(_ name: [UInt8], to value: UnsafeRawBufferPointer, atPath path: [UInt8], flags: Int32) throws(Failure) {
        let code = withCString(path) { path in
            withCString(name) { name in
                fp_set_xattr_flags(path, name, value.baseAddress, value.count, flags) == 0 ? 0 : errno
            }
        }
        guard code == 0 else { throw Failure(code: code) }
    }

    /// Removes attribute `name` of the file at `path`, never following a final symlink.
    /// - Throws: ``Failure`` with the call's errno (`ENODATA` when the file has none).
    package static func remove(_ name: [UInt8], atPath path: [UInt8]) throws(Failure) {
        let code = withCString(path) { path in withCString(name) { name in fp_remove_xattr(path, name) == 0 ? 0 : errno } }
        guard code == 0 else { throw Failure(code: code) }
    }

    /// Reads what `call(buffer, capacity)` returns when its length is not known (a value, a
    /// list of names): asks for the length, then reads, again when it grew meanwhile (`ERANGE`).
    /// The bytes and 0, or no bytes and the errno.
    private static func readSized(_ call: (UnsafeMutableRawPointer?, Int) -> Int) -> ([UInt8], Int32) {
        for _ in 0..<8 {
            let length = call(nil, 0)
            guard length >= 0 else { return ([], errno) }
            if length == 0 { return ([], 0) }
            var buffer = [UInt8](repeating: 0, count: length)
            let read = buffer.withUnsafeMutableBytes { call($0.baseAddress, $0.count) }
            if read >= 0 { return (Array(buffer[..<read]), 0) }
            guard errno == ERANGE else { return ([], errno) }
        }
        return ([], ERANGE)
    }

    /// Calls `body` with `bytes` as a NUL-terminated C string.
    private static func withCString<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (bytes + [0]).withUnsafeBufferPointer { buffer in buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) } }
    }
}
