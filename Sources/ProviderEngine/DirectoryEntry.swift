import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension Filename {
    /// The name of a directory entry `readdir` returned (`.` and `..` included), `nil` when
    /// it is not valid UTF-8 (no item's name is then).
    static func decode(_ entry: UnsafeMutablePointer<dirent>) -> String? {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            return decode(bytes[..<(bytes.firstIndex(of: 0) ?? bytes.count)])
        }
    }
}
