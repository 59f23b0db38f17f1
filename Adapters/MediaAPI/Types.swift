import Foundation

// The JSON bodies of the media API (Docs/MediaAPI.md), as they come over the wire.

/// One entry of `GET /media`. The original API sends `name` and `size` only; the extended
/// listing adds `type` (`file` or `folder`), `modified` (nanoseconds since 1970) and `etag`.
struct ListingEntry: Decodable, Sendable {
    var name: String
    var size: WireInteger
    var type: String?
    var modified: WireInteger?
    var etag: String?
}

/// A JSON number where the API promises an integer: the `Int64` it is, or, when it is not
/// one (a fraction, a number past `Int64`, a string), what was sent, so the entry is refused
/// with a message naming it instead of vanishing from the listing.
enum WireInteger: Decodable, Sendable, Equatable {
    case value(Int64)
    case impossible(String)

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int64.self) {
            self = .value(value)
        } else if let value = try? container.decode(UInt64.self) {
            self = .impossible(String(value))
        } else if let value = try? container.decode(Double.self) {
            self = .impossible(String(value))
        } else if let text = try? container.decode(String.self) {
            self = .impossible(String(text.prefix(40)).debugDescription)
        } else {
            self = .impossible("a value that is not a number")
        }
    }

    /// The number when it is an `Int64`.
    var value: Int64? {
        if case .value(let value) = self { return value }
        return nil
    }

    /// What was sent, for messages.
    var text: String {
        switch self {
        case .value(let value): return String(value)
        case .impossible(let text): return text
        }
    }
}

/// Decodes an element or gives `nil`, so one malformed listing entry does not lose the others.
struct Lossy<Element: Decodable & Sendable>: Decodable, Sendable {
    var value: Element?

    init(from decoder: any Decoder) throws {
        value = try? Element(from: decoder)
    }
}

/// `GET /capabilities` of a server with our extensions.
struct CapabilitiesDocument: Decodable, Sendable {
    var api: String?
    var version: Int?
    var extensions: [String]
    /// The largest upload in bytes, or `nil` for no limit.
    var maxUploadSize: Int64?
    /// The largest `size` of `/preview`.
    var maxPreviewSize: Int?
}

/// The reply of the extended `POST /file`, `POST /media` and `POST /move`.
struct EntryReply: Decodable, Sendable {
    var message: String?
    var entry: ListingEntry?
}

/// `{"error": …}` or `{"message": …}`.
struct ErrorReply: Decodable, Sendable {
    var error: String?
    var message: String?
}
