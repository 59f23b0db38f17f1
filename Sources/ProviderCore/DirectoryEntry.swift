import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A directory entry as `readdir` returns it, read in place.
///
/// `readdir` returns a pointer into its buffer, and an entry takes only as many bytes as its
/// record (`d_reclen`): a short name's entry at the end of the buffer ends well before the 256
/// bytes `dirent.d_name` declares. Copying `entry.pointee` or `entry.pointee.d_name` reads
/// past it, and crashes when the buffer ends at an unmapped page. These read no further than
/// the record.
public enum DirectoryEntry {
    /// Calls `body` with the bytes of the entry's name, without its terminating NUL (`.` and
    /// `..` included).
    public static func withName<Result>(
        of entry: UnsafePointer<dirent>, _ body: (UnsafeBufferPointer<UInt8>) throws -> Result
    ) rethrows -> Result {
        let raw = UnsafeRawPointer(entry)
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19
        let recordOffset = MemoryLayout<dirent>.offset(of: \dirent.d_reclen) ?? 16
        let record = Int(raw.loadUnaligned(fromByteOffset: recordOffset, as: UInt16.self))
        let capacity = max(0, min(record, MemoryLayout<dirent>.size) - nameOffset)
        let start = (raw + nameOffset).assumingMemoryBound(to: UInt8.self)
        let length = memchr(start, 0, capacity).map { UnsafeRawPointer($0) - UnsafeRawPointer(start) } ?? capacity
        return try body(UnsafeBufferPointer(start: start, count: length))
    }

    /// The entry's name as bytes (`.` and `..` included).
    public static func nameBytes(of entry: UnsafePointer<dirent>) -> [UInt8] {
        withName(of: entry) { Array($0) }
    }

    /// The entry's type (`DT_DIR`, `DT_REG`, …; `DT_UNKNOWN` when the file system does not say).
    public static func type(of entry: UnsafePointer<dirent>) -> Int32 {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_type) ?? 18
        return Int32(UnsafeRawPointer(entry).load(fromByteOffset: offset, as: UInt8.self))
    }

    /// The entry's inode number.
    public static func inode(of entry: UnsafePointer<dirent>) -> UInt64 {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_ino) ?? 0
        return UInt64(UnsafeRawPointer(entry).loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

extension Filename {
    /// The name of a directory entry `readdir` returned (`.` and `..` included), `nil` when
    /// it is not valid UTF-8 (no item's name is then).
    public static func decode(_ entry: UnsafePointer<dirent>) -> String? {
        DirectoryEntry.withName(of: entry) { decode($0) }
    }
}
