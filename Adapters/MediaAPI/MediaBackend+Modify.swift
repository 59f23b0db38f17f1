import AdapterKit
import Foundation
import ProviderCore

extension MediaBackend {
    /// Changes a file's contents, renames or moves an item.
    ///
    /// On an extended server new contents are uploaded with `If-Match` on the base version's
    /// ETag and a rename or move is `POST /move` with `If-Match`, so the server checks the
    /// version atomically; a move never replaces an existing item. With the original API the
    /// version is checked just before the upload, and renames and moves are refused: the API
    /// has no way to make them. Modification dates and other fields are accepted and ignored
    /// (the server sets its own dates).
    /// - Throws: `noSuchItem` when the item or the new parent is gone; `versionOutOfDate` when
    ///   the item's version is not `baseVersion` (nothing is changed); `filenameCollision` when
    ///   the new name is taken; `invalidFilename` for an unsafe new name; `invalidArgument` for
    ///   new contents on a folder, renaming the root, or moving a folder into itself;
    ///   `notSupported` for a rename or move with the original API and for contents it cannot
    ///   hold (see ``createItem(basedOn:fields:contents:options:)``).
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?,
        options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let change = try ItemChange(item, changedFields: changedFields)
        let (path, renames) = (change.path, change.renames)
        if renames {
            if dialect == .original {
                throw FileProviderError(
                    .notSupported, "this media server cannot rename or move \(path.display): the media API has no such request")
            }
        }
        let newContents = changedFields.contains(.contents)
        var size: Int64 = 0
        var source = "/dev/null"
        if newContents {
            source = contents?.path ?? "/dev/null"
            size = try UploadFile.size(atPath: source)
            try checkUpload(path, size: size)
        }
        switch dialect {
        case .original:
            let current = try await originalItem(at: path)
            if current.version != baseVersion { throw .versionOutOfDate(item.identifier) }
            guard newContents else { return ItemResult(item: current) }
            guard current.kind == .file else {
                throw FileProviderError(.invalidArgument, "\(path.display) is not a file; its contents cannot be set")
            }
            return ItemResult(item: try await originalUpload(path, from: source, size: size, isNew: false))
        case .extended:
            guard let baseTag = Self.etag(of: baseVersion) else { throw .versionOutOfDate(item.identifier) }
            var current: Item?
            var tag = baseTag
            if newContents {
                let reply = try await upload(path, from: source, size: size, headers: ["If-Match: \"\(tag)\""])
                switch reply.status {
                case 404: throw .noSuchItem(item.identifier)
                case 409: throw FileProviderError(.invalidArgument, "\(path.display) is not a file; its contents cannot be set")
                case 412: throw .versionOutOfDate(item.identifier)
                default: try reply.check()
                }
                let uploaded = try uploadedItem(reply, at: path, size: size)
                current = uploaded
                tag = Self.etag(of: uploaded.version) ?? tag
            }
            if renames {
                let parent = try MediaPath(change.parent(current: path.parent.identifier))
                let target = try parent.child(named: change.name, reservedPrefix: MediaPath.uploadPrefix)
                if target.identifier != path.identifier || !target.identifier.rawValue.utf8.elementsEqual(path.identifier.rawValue.utf8) {
                    current = try await move(path, to: target, ifMatch: tag)
                }
            }
            if let current { return ItemResult(item: current) }
            let now = try await self.item(for: item.identifier)
            if now.version.content != baseVersion.content { throw .versionOutOfDate(item.identifier) }
            return ItemResult(item: now)
        }
    }

    /// `POST /move` with `If-Match`.
    private func move(_ source: MediaPath, to target: MediaPath, ifMatch tag: String) async throws(FileProviderError) -> Item {
        var request = HTTPRequest(
            "POST", "/move", query: [("from", serverPath(source)), ("to", serverPath(target))])
        request.headers = ["If-Match: \"\(tag)\""]
        let reply = try await send(request)
        switch reply.status {
        case 404: throw FileProviderError(.noSuchItem, "\(source.display) or the folder \(target.parent.display) is gone")
        case 409:
            throw FileProviderError(
                .filenameCollision, "an item named \(target.name.debugDescription) already exists in \(target.parent.display)")
        case 412: throw .versionOutOfDate(source.identifier)
        case 400: throw FileProviderError(.invalidArgument, "\(source.display) cannot be moved to \(target.display): \(reply.errorText)")
        default: try reply.check()
        }
        guard let entry = try reply.decode(EntryReply.self).entry, let item = try makeItem(entry, in: target.parent) else {
            throw FileProviderError(.corruptData, "the server did not describe \(target.display) after the move")
        }
        return item
    }
}
