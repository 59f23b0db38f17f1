import AdapterKit
import Foundation
import ProviderCore

extension MediaBackend {
    /// Deletes an item; a folder with everything in it when `options` has `recursive`.
    ///
    /// On an extended server `DELETE /media` carries `If-Match` (the base version's ETag, or
    /// `*` for "whatever is there") so the server checks the version and that the item exists,
    /// and `recursive=0` unless `recursive` is asked for. The original API always deletes
    /// recursively and answers `200` even when nothing was there, so the adapter checks the item,
    /// its version and, without `recursive`, that a folder lists nothing before it deletes. (A
    /// folder holding only files that API does not list looks empty and is deleted with them.)
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when its version is not
    ///   `baseVersion`; `directoryNotEmpty` for a non-empty folder without `recursive`;
    ///   `deletionRejected` for the root.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        let path = try MediaPath(identifier)
        if path.isRoot { throw FileProviderError(.deletionRejected, "the root of a domain cannot be deleted") }
        var request = HTTPRequest("DELETE", "/media", query: [("path", serverPath(path))])
        switch dialect {
        case .extended:
            if let baseVersion {
                guard let tag = Self.etag(of: baseVersion) else { throw .versionOutOfDate(identifier) }
                request.headers = ["If-Match: \"\(tag)\""]
            } else {
                request.headers = ["If-Match: *"]
            }
            if !options.contains(.recursive) { request.query.append(("recursive", "0")) }
            let reply = try await send(request)
            switch reply.status {
            case 404: throw .noSuchItem(identifier)
            case 409: throw FileProviderError(.directoryNotEmpty, "\(path.display) is not empty")
            case 412: throw .versionOutOfDate(identifier)
            default: try reply.check()
            }
        case .original:
            let current = try await originalItem(at: path)
            if let baseVersion, baseVersion != current.version { throw .versionOutOfDate(identifier) }
            if current.kind == .folder && !options.contains(.recursive) {
                let page = try await enumerateItems(in: identifier, startingAt: .initialPageSortedByName)
                if !page.items.isEmpty { throw FileProviderError(.directoryNotEmpty, "\(path.display) is not empty") }
            }
            try await send(request).check()
        }
    }
}
