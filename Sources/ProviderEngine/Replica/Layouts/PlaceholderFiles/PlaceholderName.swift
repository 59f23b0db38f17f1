import Foundation

/// The name of the file that stands for a not-downloaded item in the placeholder-files layout:
/// `<name>.placeholder`, or, for a name too long for that (a legal name of 244 to 255 bytes
/// plus the 12 bytes of the suffix is over the file system's 255), the name cut at a character
/// boundary, `~`, 16 hex digits of a hash of the whole name, then the suffix. The placeholder's
/// metadata holds the whole name, so a shortened name is read back from it
/// (``Replica/itemName(ofPlaceholderFile:in:)``).
enum PlaceholderName {
    /// The longest file name.
    static let maximumBytes = 255
    /// What a shortened name keeps of the item's name, in bytes at most.
    static let keptBytes = maximumBytes - Replica.placeholderSuffix.utf8.count - 17

    /// The placeholder file's name for an item named `name`.
    static func of(_ name: String) -> String {
        if name.utf8.count + Replica.placeholderSuffix.utf8.count <= maximumBytes { return name + Replica.placeholderSuffix }
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in name.unicodeScalars {
            let length = UTF8.width(scalar)
            if bytes + length > keptBytes { break }
            kept.append(scalar)
            bytes += length
        }
        let hex = String(FNV1a.hash(name.utf8), radix: 16)
        return String(kept) + "~" + String(repeating: "0", count: 16 - hex.utf8.count) + hex + Replica.placeholderSuffix
    }

    /// Whether the part of a placeholder file's name before the suffix may be a shortened name
    /// (it ends in `~` and 16 lowercase hex digits), whose item's name only its metadata holds.
    static func mayBeShortened(_ stem: String) -> Bool {
        let bytes = Array(stem.utf8.suffix(17))
        guard bytes.count == 17, bytes[0] == UInt8(ascii: "~") else { return false }
        return bytes.dropFirst().allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

extension Replica {
    /// The item name a file named `fileName` in the folder `relative` stands for, when it is a
    /// placeholder file's name: the name without `.placeholder`, or for a shortened one
    /// (``PlaceholderName``) the name its metadata holds. `nil` when `fileName` does not end
    /// in `.placeholder`. Blocking (a shortened name's metadata is read).
    func itemName(ofPlaceholderFile fileName: String, in relative: String) -> String? {
        Self.itemName(ofPlaceholderFile: fileName, atPath: path(relative.isEmpty ? fileName : relative + "/" + fileName))
    }

    /// ``itemName(ofPlaceholderFile:in:)`` of the file at the absolute path `file`, named
    /// `fileName`. Blocking.
    static func itemName(ofPlaceholderFile fileName: String, atPath file: String) -> String? {
        guard fileName.utf8.count > placeholderSuffix.utf8.count, fileName.hasSuffix(placeholderSuffix) else { return nil }
        let stem = String(fileName.dropLast(placeholderSuffix.count))
        guard PlaceholderName.mayBeShortened(stem) else { return stem }
        guard let data = FileManager.default.contents(atPath: file), let metadata = try? PlaceholderMetadata.read(from: data),
            PlaceholderName.of(metadata.filename) == fileName
        else { return stem }
        return metadata.filename
    }
}
