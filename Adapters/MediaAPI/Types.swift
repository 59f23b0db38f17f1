import Foundation

// The JSON bodies of the media API (Docs/MediaAPI.md), as they come over the wire.

/// One entry of `GET /media`. The original API sends `name` and `size` only; the extended
/// listing adds `type` (`file` or `folder`), `modified` (nanoseconds since 1970) and `etag`.
struct ListingEntry: Decodable, Sendable {
    var name: String
    var size: Int64
    var type: String?
    var modified: Int64?
    var etag: String?
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
