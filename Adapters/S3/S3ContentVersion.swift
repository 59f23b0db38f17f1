import Foundation
import ProviderCore

/// What an object's content version holds: its ETag and, in a versioned bucket, its version id
/// (`x-amz-version-id`). The ``ProviderCore/ItemVersion`` content is the ETag alone, or the
/// ETag, a space and the version id (an ETag holds no space, S3's version ids neither). The id
/// `null` (an object written before versioning was enabled, or while it was suspended) is left
/// out, so such objects keep the version they had in an unversioned bucket.
struct S3ContentVersion: Sendable, Equatable {
    /// The ETag, without quotes.
    var etag: String
    /// The version id, or `nil` in a bucket without versions (and for the `null` version).
    var versionID: String?

    /// A version of an ETag and a version id as the store sent them (`null` is taken as none).
    ///
    /// - Throws: `corruptData` naming `what` when the ETag is empty or holds a space or a quote,
    ///   the version id holds anything but printable ASCII without a space or a quote, or both
    ///   together are longer than ``ProviderCore/ItemVersion/maximumLength``.
    init(etag: String, versionID: String?, of what: @autoclosure () -> String) throws(FileProviderError) {
        guard !etag.isEmpty, etag.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x22 && $0 != 0x7F }) else {
            throw FileProviderError(.corruptData, "\(what()) has no ETag, or one that is not a token")
        }
        var id = versionID?.trimmingCharacters(in: .whitespaces)
        if id == "null" || id?.isEmpty == true { id = nil }
        if let id, !id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 }) {
            throw FileProviderError(.corruptData, "\(what()) has the version id \(id.prefix(80).debugDescription), which is not a token")
        }
        self.etag = etag
        self.versionID = id
        guard itemVersion.content.count <= ItemVersion.maximumLength else {
            throw FileProviderError(
                .corruptData, "\(what())'s ETag and version id are longer than \(ItemVersion.maximumLength) bytes together")
        }
    }

    /// The version an item carries, as this backend made it (an ETag without a version id for
    /// a version recorded before the bucket had versions).
    init(_ version: ItemVersion) {
        let text = String(decoding: version.content, as: UTF8.self)
        if let space = text.firstIndex(of: " ") {
            etag = String(text[..<space])
            versionID = String(text[text.index(after: space)...])
        } else {
            etag = text
            versionID = nil
        }
    }

    /// The item version: `ETAG` or `ETAG VERSIONID`.
    var itemVersion: ItemVersion {
        ItemVersion(content: Data((versionID.map { etag + " " + $0 } ?? etag).utf8), metadata: Data())
    }

    /// Whether an object of this version is the object of `base`: the same ETag, and the same
    /// version id where both have one (a version recorded before the bucket had versions has
    /// none, and is still the object while its ETag is).
    func matches(_ base: S3ContentVersion) -> Bool {
        guard etag == base.etag else { return false }
        guard let versionID, let other = base.versionID else { return true }
        return versionID == other
    }
}
