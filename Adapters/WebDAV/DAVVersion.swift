import AdapterKit
import Foundation
import ProviderCore

// Where a file's content version comes from. Servers disagree on what they give:
// - Apache, lighttpd and rclone send a quoted ETag (`"3-5f1c"`), Apache a weak one (`W/"3-5f1c"`)
//   for a file changed within the last second;
// - wsgidav 4 sends `getetag` unquoted in PROPFIND (`16228881-1796424990-5`) and quoted on GET;
// - nginx's dav-ext sends no `getetag` at all (its GET has an ETag, its PROPFIND none).
// Every ETag is read by `EntityTag.parse` into one form (quoted, without `W/`), so a listing
// and a GET of the same version compare equal; where a server's listings give no ETag, the
// version is its modification date and size (`DAVVersion.stamp`), from PROPFIND and GET alike.

/// An entity tag in one form: the opaque tag in quotes, without a weak `W/` (`"3-5f1c"`).
struct EntityTag: Equatable, Sendable {
    /// The tag in quotes, as `If-Match` sends it.
    let quoted: String
    /// The server marked it weak (`W/`).
    let isWeak: Bool

    /// What a server's ETag text is.
    enum Parsed: Equatable {
        /// No tag: nothing, only blanks, or `""`.
        case none
        case tag(EntityTag)
        /// Something no server should send (a reason to refuse the entry).
        case invalid(String)
    }

    /// The most bytes of an opaque tag: with its quotes and the version's kind byte it fits an
    /// ``ProviderCore/ItemVersion``.
    static let maximumLength = ItemVersion.maximumLength - 3

    /// Reads an ETag as servers send it: `"abc"`, `W/"abc"`, or unquoted `abc` (wsgidav's
    /// `getetag`). The opaque tag must be RFC 9110's `etagc` (printable ASCII but `"` and space)
    /// and at most ``maximumLength`` bytes.
    static func parse(_ text: String?) -> Parsed {
        guard let text else { return .none }
        // On the bytes: every file of a listing comes here.
        var value = HTTPText.trimmed(text)
        var weak = false
        if value.utf8.starts(with: "W/".utf8) {
            weak = true
            value = value[value.utf8.index(value.startIndex, offsetBy: 2)...]
        }
        let utf8 = value.utf8
        let isQuoted = utf8.count >= 2 && utf8.first == UInt8(ascii: "\"") && utf8.last == UInt8(ascii: "\"")
        let opaque = isQuoted ? value[utf8.index(after: utf8.startIndex)..<utf8.index(before: utf8.endIndex)] : value
        if opaque.isEmpty { return .none }
        guard opaque.utf8.count <= maximumLength, opaque.utf8.allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 < 0x7f) }) else {
            return .invalid("its ETag is longer than \(maximumLength) bytes or not printable ASCII")
        }
        // A tag in quotes, as most servers send it, is already in its form.
        return .tag(EntityTag(quoted: isQuoted ? String(value) : "\"" + opaque + "\"", isWeak: weak))
    }
}

/// The content version of a file, in the forms this backend makes (``ProviderCore/ItemVersion/content``).
enum DAVVersion: Equatable {
    /// From the server's ETag: `e` and the tag in quotes (``EntityTag/quoted``).
    case etag(String)
    /// From a server that gives no ETag in its listings: `m`, the modification date in whole
    /// seconds since 1970, `-` and the size. It cannot see a change that keeps the size within
    /// the same second.
    case stamp(seconds: Int64, size: Int64)

    /// The version's bytes.
    var content: Data {
        switch self {
        case .etag(let quoted): Data(utf8: quoted, tag: UInt8(ascii: "e"))
        case .stamp(let seconds, let size): Data("m\(seconds)-\(size)".utf8)
        }
    }

    /// The version a content version holds, or `nil` for one this backend did not make (or a folder's).
    init?(_ content: Data) {
        guard let kind = content.first, let text = String(bytes: content.dropFirst(), encoding: .utf8) else { return nil }
        switch kind {
        case UInt8(ascii: "e"):
            // Read as an ETag from a server is: a version stored before ETags had one form
            // (wsgidav's unquoted `eabc`) still names its tag (`"abc"`) in `If-Match`.
            guard case .tag(let tag) = EntityTag.parse(text) else { return nil }
            self = .etag(tag.quoted)
        case UInt8(ascii: "m"):
            let parts = text.split(separator: "-", maxSplits: 1)
            guard parts.count == 2, let seconds = Int64(parts[0]), let size = Int64(parts[1]) else { return nil }
            self = .stamp(seconds: seconds, size: size)
        default: return nil
        }
    }

    /// The stamp of a file modified at `date` with `size` bytes.
    static func stamp(_ date: Date, size: Int64) -> DAVVersion {
        .stamp(seconds: Int64(date.timeIntervalSince1970.rounded(.down)), size: size)
    }

    /// Whether this is a stamp (the server gave no ETag).
    var isStamp: Bool {
        if case .stamp = self { return true }
        return false
    }
}

/// Which form of version the files of a server get: what its listings gave. A `GET` reply
/// gives an ETag on servers whose listings do not (nginx), so a version made from a `GET` takes
/// the form the listings have, never the reply's own.
final class VersionForms: @unchecked Sendable {
    enum Form: Equatable { case etag, stamp }

    private let lock = NSLock()
    private var seen: Form?

    /// The form the last listed file had, or `nil` before any file was listed.
    var current: Form? { lock.withLock { seen } }

    func record(_ form: Form) { lock.withLock { seen = form } }
}
