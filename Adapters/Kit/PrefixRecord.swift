import CKitShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The prefix of a download's file written without a gap, recorded on the file in an extended
/// attribute while ranges are written into it out of order (SFTP's ranged transfers,
/// ``RangedDownload``): a download resumed after a kill starts there, not at the file's size,
/// because bytes past the prefix may have gaps. Removed once the download is complete.
///
/// Each call is one system call on a local file: make it off Swift's cooperative pool.
public enum PrefixRecord {
    /// The extended attribute the prefix is recorded in.
    public static let attribute = "user.fileprovider.verified-prefix"

    /// The prefix recorded on the file at `path`, if one is (a ranged download was killed and
    /// may have written past it).
    public static func recorded(atPath path: String) -> Int64? {
        var buffer = [UInt8](repeating: 0, count: 24)
        let count = fp_kit_getxattr(path, attribute, &buffer, buffer.count)
        guard count > 0 else { return nil }
        return Int64(String(decoding: buffer.prefix(count), as: UTF8.self))
    }

    /// Records `prefix` on the file at `path`; `false` when its file system keeps no extended
    /// attributes (then the file must be written in order).
    @discardableResult
    public static func record(_ prefix: Int64, atPath path: String) -> Bool {
        let value = Array(String(prefix).utf8)
        return fp_kit_setxattr(path, attribute, value, value.count) == 0
    }

    /// Records `prefix` on the open file `descriptor`; `false` when its file system keeps no
    /// extended attributes.
    @discardableResult
    public static func record(_ prefix: Int64, descriptor: Int32) -> Bool {
        let value = Array(String(prefix).utf8)
        return fp_kit_fsetxattr(descriptor, attribute, value, value.count) == 0
    }

    /// Removes the record from the file at `path` (nothing happens when there is none).
    ///
    /// Looked for first: ext4 starts a journal transaction for a removal even when there is
    /// nothing to remove, and every download forgets.
    public static func forget(atPath path: String) {
        if fp_kit_getxattr(path, attribute, nil, 0) >= 0 { _ = fp_kit_removexattr(path, attribute) }
    }

    /// Removes the record from the open file `descriptor` (nothing happens when there is none);
    /// looked for first, as ``forget(atPath:)`` does.
    public static func forget(descriptor: Int32) {
        if fp_kit_fgetxattr(descriptor, attribute, nil, 0) >= 0 { _ = fp_kit_fremovexattr(descriptor, attribute) }
    }
}
