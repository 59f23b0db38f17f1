import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

extension MediaBackend {
    /// Creates a file or folder from a template.
    ///
    /// On an extended server a file is streamed to a temporary file and renamed into place by
    /// the server, with `If-None-Match: *` so an existing item is never overwritten (a replay
    /// with `mayAlreadyExist` overwrites a file, so it ends with the template's contents), and a
    /// folder is made only when its parent exists. With the original API the adapter checks
    /// first (a race with another writer is possible, as `supportsConditionalWrites` says),
    /// refuses what the API cannot hold, uploads in place and checks the size the server then
    /// reports; a short file is removed again.
    /// - Throws: `invalidFilename` for an unsafe name; `noSuchItem` when the parent does not
    ///   exist; `filenameCollision` when the name is taken (without `mayAlreadyExist`, or by an
    ///   item of another kind); `notSupported` for a symlink and, with the original API, for a
    ///   file over 25 MiB or not named `.jpg`, `.jpeg` or `.png` (the API would not list it);
    ///   `localIOFailure` when `contents` cannot be read; `corruptData` when the server kept a
    ///   different size than was sent.
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        let new = try NewItem(template, options: options, reservedPrefix: MediaPath.uploadPrefix)
        let (path, replay) = (new.path, new.replay)
        switch template.kind {
        case .symlink:
            throw FileProviderError(.notSupported, "the media API cannot hold symlinks")
        case .folder:
            return ItemResult(item: try await createFolder(at: path, replay: replay))
        case .file:
            let source = contents?.path ?? "/dev/null"
            let size = try UploadFile.size(atPath: source)
            try checkUpload(path, size: size)
            return ItemResult(item: try await createFile(at: path, from: source, size: size, replay: replay))
        }
    }

    private func collision(_ path: MediaPath) -> FileProviderError {
        FileProviderError(
            .filenameCollision, "an item named \(path.name.debugDescription) already exists in \(path.parent.display)")
    }

    private func createFolder(at path: MediaPath, replay: Bool) async throws(FileProviderError) -> Item {
        switch dialect {
        case .extended:
            var request = HTTPRequest("POST", "/media")
            request.body = .form([("path", serverPath(path)), ("parents", "0")])
            request.headers = ["If-None-Match: *"]
            let reply = try await send(request)
            switch reply.status {
            case 412, 409:
                if replay, reply.status == 412, let existing = try? await item(for: path.identifier), existing.kind == .folder {
                    return existing
                }
                throw collision(path)
            case 404:
                throw .noSuchItem(path.parent.identifier)
            default:
                try reply.check()
            }
            guard let entry = try reply.decode(EntryReply.self).entry, let item = try makeItem(entry, in: path.parent) else {
                throw FileProviderError(.corruptData, "the server did not describe the new folder \(path.display)")
            }
            return item
        case .original:
            try await requireOriginalFolder(path.parent)
            if let existing = try await originalExisting(path) {
                if replay && existing.kind == .folder { return existing }
                throw collision(path)
            }
            var request = HTTPRequest("POST", "/media")
            request.body = .form([("path", serverPath(path))])
            request.finalStatuses = [500]
            let reply = try await send(request)
            if reply.status == 500 {
                // mkdir failed: most likely a file the API does not list is in the way.
                throw FileProviderError(.filenameCollision, "the server could not make \(path.display): \(reply.errorText)")
            }
            try reply.check()
            return originalFolder(path)
        }
    }

    private func createFile(at path: MediaPath, from source: String, size: Int64, replay: Bool)
        async throws(FileProviderError) -> Item
    {
        switch dialect {
        case .extended:
            let reply = try await upload(path, from: source, size: size, headers: replay ? [] : ["If-None-Match: *"])
            switch reply.status {
            case 412, 409: throw collision(path)
            case 404: throw .noSuchItem(path.parent.identifier)
            default: try reply.check()
            }
            return try uploadedItem(reply, at: path, size: size)
        case .original:
            try await requireOriginalFolder(path.parent)
            if let existing = try await originalExisting(path) {
                if !replay || existing.kind != .file { throw collision(path) }
            }
            return try await originalUpload(path, from: source, size: size, isNew: true)
        }
    }

    // MARK: Shared by create and modify

    /// Refuses, before sending anything, an upload the server cannot hold.
    ///
    /// - Throws: `notSupported` for a file over ``BackendCapabilities/maximumUploadSize`` and,
    ///   with the original API, for a name it would not list.
    func checkUpload(_ path: MediaPath, size: Int64) throws(FileProviderError) {
        if let limit = capabilities.maximumUploadSize, size > limit {
            throw FileProviderError(
                .notSupported,
                "\(path.display) is \(Self.mebibytes(size)); this media server accepts files up to \(Self.mebibytes(limit)) and would keep a truncated copy, so it was not sent"
            )
        }
        if dialect == .original && !Self.isOriginalImageName(path.name) {
            throw FileProviderError(
                .notSupported,
                "\(path.display) is not a .jpg, .jpeg or .png file; this media server lists images only, so it would be invisible and was not sent"
            )
        }
    }

    static func mebibytes(_ bytes: Int64) -> String {
        String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }

    /// `POST /file` streaming `source`.
    func upload(_ path: MediaPath, from source: String, size: Int64, headers: [String]) async throws(FileProviderError)
        -> HTTPReply
    {
        var request = HTTPRequest("POST", "/file", query: itemQuery(path))
        request.body = .file(path: source, size: size)
        request.headers = headers
        return try await send(request)
    }

    /// The item an extended `POST /file` reply describes.
    func uploadedItem(_ reply: HTTPReply, at path: MediaPath, size: Int64) throws(FileProviderError) -> Item {
        guard let entry = try reply.decode(EntryReply.self).entry, let item = try makeItem(entry, in: path.parent) else {
            throw FileProviderError(.corruptData, "the server did not describe the upload of \(path.display)")
        }
        guard item.size == size else {
            throw FileProviderError(.corruptData, "the server kept \(item.size) of the \(size) bytes sent for \(path.display)")
        }
        return item
    }

    /// Uploads in place with the original API and checks what the server kept.
    ///
    /// - Throws: `corruptData` when the server kept another size (a new file is removed again);
    ///   `invalidArgument` when the server refused the upload.
    func originalUpload(_ path: MediaPath, from source: String, size: Int64, isNew: Bool) async throws(FileProviderError)
        -> Item
    {
        let reply = try await upload(path, from: source, size: size, headers: [])
        if !reply.isSuccess {
            if isNew { await removeQuietly(path) }
            if reply.status == 400 {
                throw FileProviderError(
                    .cannotSynchronize, "the server refused \(path.display) (\(reply.errorText)); nothing was kept")
            }
            try reply.check()
        }
        guard let probe = try await probe(path) else { throw .noSuchItem(path.identifier) }
        guard probe.size == size else {
            if isNew { await removeQuietly(path) }
            throw FileProviderError(
                .corruptData,
                "the server kept \(probe.size) of the \(size) bytes sent for \(path.display)\(isNew ? "; the short copy was removed" : "")")
        }
        return originalFile(path, probe)
    }

    /// `DELETE` without looking at the outcome, to undo a refused upload.
    func removeQuietly(_ path: MediaPath) async {
        _ = try? await send(HTTPRequest("DELETE", "/media", query: [("path", serverPath(path))]))
    }

    /// - Throws: `noSuchItem` when a folder is not on the server (the original API).
    func requireOriginalFolder(_ folder: MediaPath) async throws(FileProviderError) {
        if folder.isRoot { return }
        guard try await originalFolderExists(folder) else { throw .noSuchItem(folder.identifier) }
    }

    /// The item at a path of the original API, or `nil`.
    func originalExisting(_ path: MediaPath) async throws(FileProviderError) -> Item? {
        do {
            return try await originalItem(at: path)
        } catch where error.code == .noSuchItem {
            return nil
        }
    }
}
