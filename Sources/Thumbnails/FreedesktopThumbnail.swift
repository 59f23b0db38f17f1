import CGD
import Foundation
import ProviderCore

/// A thumbnail as the freedesktop.org Thumbnail Managing Standard wants it, so file managers
/// (Nautilus, Dolphin, Thunar) show it without reading the file: a PNG of at most 128 (`normal`)
/// or 256 (`large`) pixels a side, in `$XDG_CACHE_HOME/thumbnails/<size>/<md5 of the file's
/// URI>.png`, carrying the required `Thumb::URI` and `Thumb::MTime` text chunks. The file
/// manager uses it while the file's modification time is `Thumb::MTime`.
public enum FreedesktopThumbnail {
    /// The standard's sizes.
    public enum Size: String, Sendable, CaseIterable {
        case normal, large
        /// The longest side, in pixels.
        public var pixels: Int { self == .normal ? 128 : 256 }
    }

    /// The URI the standard names a file by: `file://` and the absolute path, each byte other
    /// than unreserved characters and `/` percent-encoded (as GLib's `g_filename_to_uri`).
    public static func uri(ofPath path: String) -> String {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/!$&'()*+,;=:@".utf8)
        var encoded = "file://"
        for byte in path.utf8 {
            if unreserved.contains(byte) {
                encoded.append(Character(UnicodeScalar(byte)))
            } else {
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }

    /// The cache's root for this process's user: `$XDG_CACHE_HOME` when it is an absolute
    /// path (the base directory specification ignores a relative one), else `~/.cache`.
    public static func cacheHome(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let value = environment["XDG_CACHE_HOME"], value.hasPrefix("/") { return URL(fileURLWithPath: value) }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
    }

    /// Where the thumbnail of `uri` of `size` goes under `cacheHome`.
    public static func location(ofURI uri: String, size: Size, cacheHome: URL) -> URL {
        cacheHome.appendingPathComponent("thumbnails/\(size.rawValue)/\(fileName(forURI: uri))")
    }

    /// `Thumb::MTime` of a file modified at `date`: whole seconds since 1970 (0 when unknown).
    public static func modificationTime(of date: Date?) -> Int64 {
        Int64((date?.timeIntervalSince1970 ?? 0).rounded(.down))
    }

    /// Whether the cache holds a thumbnail of `uri` of `size` made for the modification time
    /// `modificationTime` (its `Thumb::MTime`): a file manager uses it as it is. Blocking.
    public static func isCurrent(uri: String, size: Size, modificationTime: Int64, cacheHome: URL) -> Bool {
        guard let data = FileManager.default.contents(atPath: location(ofURI: uri, size: size, cacheHome: cacheHome).path) else {
            return false
        }
        let text = textChunks(of: data)
        return text["Thumb::MTime"] == String(modificationTime) && text["Thumb::URI"] == uri
    }

    /// The cache file's name for a URI: the MD5 of the URI in lowercase hex, `.png`.
    public static func fileName(forURI uri: String) -> String {
        var digest = MD5Digest()
        Array(uri.utf8).withUnsafeBytes { digest.update($0) }
        return digest.finishBytes().map { String(format: "%02x", $0) }.joined() + ".png"
    }

    /// A PNG of `image` (JPEG, PNG, GIF or WebP) scaled to fit `size` (never up), with the
    /// standard's `Thumb::URI` and `Thumb::MTime` (seconds) chunks.
    /// - Throws: what ``Thumbnailer/png(from:fitting:)`` throws.
    public static func png(of image: Data, size: Size, uri: String, modificationTime: Int64) throws(FileProviderError) -> Data {
        let plain = try Thumbnailer.png(from: image, fitting: size.pixels)
        return withText(plain, ["Thumb::URI": uri, "Thumb::MTime": String(modificationTime), "Software": "fileproviderctl"])
    }

    /// `png` with `tEXt` chunks for `entries` right after its `IHDR` chunk (keys sorted).
    public static func withText(_ png: Data, _ entries: [String: String]) -> Data {
        let bytes = [UInt8](png)
        // Signature (8 bytes), then IHDR: length (4), type (4), 13 bytes, CRC (4).
        let afterHeader = 8 + 4 + 4 + 13 + 4
        guard bytes.count > afterHeader else { return png }
        var result = Array(bytes[..<afterHeader])
        for (key, value) in entries.sorted(by: { $0.key < $1.key }) {
            let body = Array("tEXt".utf8) + Array(key.utf8) + [0] + Array(value.utf8)
            let length = UInt32(body.count - 4)
            result += [UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)]
            result += body
            let crc = crc32(body)
            result += [UInt8(crc >> 24), UInt8((crc >> 16) & 0xff), UInt8((crc >> 8) & 0xff), UInt8(crc & 0xff)]
        }
        result += bytes[afterHeader...]
        return Data(result)
    }

    /// The text chunks of a PNG, by key (what a file manager reads back).
    public static func textChunks(of png: Data) -> [String: String] {
        let bytes = [UInt8](png)
        var entries: [String: String] = [:]
        var offset = 8
        while offset + 12 <= bytes.count {
            let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            let type = String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self)
            guard offset + 12 + length <= bytes.count else { break }
            let body = bytes[(offset + 8)..<(offset + 8 + length)]
            if type == "tEXt", let zero = body.firstIndex(of: 0) {
                entries[String(decoding: body[..<zero], as: UTF8.self)] = String(decoding: body[(zero + 1)...], as: UTF8.self)
            }
            offset += 12 + length
        }
        return entries
    }

    private static let table: [UInt32] = (0..<256).map { index -> UInt32 in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    /// The CRC-32 a PNG chunk ends with (of its type and data).
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
