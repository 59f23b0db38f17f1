#if canImport(Glibc)
    import Glibc
#endif

/// The order of names by their bytes (UTF-8 as it is, no Unicode collation): the order a
/// listing's items come in. `memcmp` over the common length, then the shorter first.
public enum ByteOrder {
    /// Whether `left` sorts before `right`.
    public static func precedes(_ left: UnsafeBufferPointer<UInt8>, _ right: UnsafeBufferPointer<UInt8>) -> Bool {
        let common = min(left.count, right.count)
        let order = common == 0 ? 0 : memcmp(left.baseAddress!, right.baseAddress!, common)
        return order != 0 ? order < 0 : left.count < right.count
    }

    /// Whether `left` sorts before `right`.
    public static func precedes(_ left: [UInt8], _ right: [UInt8]) -> Bool {
        left.withUnsafeBufferPointer { a in right.withUnsafeBufferPointer { b in precedes(a, b) } }
    }

    /// Whether `left`'s UTF-8 bytes sort before `right`'s, compared in place (the generic
    /// comparison of two UTF-8 views was 2% of a WebDAV first sync's CPU).
    public static func precedes(_ left: String, _ right: String) -> Bool {
        var (left, right) = (left, right)
        return left.withUTF8 { a in right.withUTF8 { b in precedes(a, b) } }
    }
}
