import AdapterKit
import Foundation
import ProviderCore

extension S3Backend {
    /// Uploads a file to a key, conditional on `condition` (`If-None-Match: *` or
    /// `If-Match: "etag"`): over ``MultipartSettings/threshold`` in parts
    /// (``putMultipart(_:size:at:condition:)``), else with one `PutObject` that sends its
    /// `Content-MD5` and SHA-256 (`x-amz-checksum-sha256`: the server refuses bytes damaged on
    /// the way) and whose ETag, where it is an MD5, is checked against the bytes. Returns the
    /// new ETag, with the version id the store answered with (`x-amz-version-id`) in a
    /// versioned bucket.
    ///
    /// - Throws: `versionOutOfDate` when the condition does not hold (`412`);
    ///   `insufficientQuota` for a file over 5 TiB or when the store is full; `localIOFailure`
    ///   when the file cannot be read; `corruptData` when the reply has no ETag, or an MD5 of
    ///   other bytes; what ``S3ErrorMapping/check(_:bucket:)`` and
    ///   ``putMultipart(_:size:at:condition:)`` throw.
    func put(_ contents: URL, at path: ItemPath, condition: String?) async throws(FileProviderError) -> (
        version: S3ContentVersion, size: Int64, date: Date?
    ) {
        let size = try UploadFile.size(atPath: contents.path)
        let what = "PUT \(path.display)"
        if size > multipart.threshold {
            let outcome = try await putMultipart(contents, size: size, at: path, condition: condition)
            var versionID = outcome.versionID
            if versioned && versionID == nil, let item = try await head(path), S3ContentVersion(item.version).etag == outcome.etag {
                // A completion whose reply names no version: the object's, when it is still this upload.
                versionID = S3ContentVersion(item.version).versionID
            }
            return (try S3ContentVersion(etag: outcome.etag, versionID: versioned ? versionID : nil, of: what), size, outcome.date)
        }
        let file = contents.path
        let digests = try await hashers.run { () throws -> FileDigests in try FileDigests.of(file: file, sha256: true) }
        var request = HTTPRequest("PUT", endpoint(key: key(path)))
        request.body = .file(path: contents.path, size: size)
        request.headers = [
            "x-amz-checksum-sha256: \(Data(digests.sha256 ?? []).base64EncodedString())",
            "Content-MD5: \(Data(digests.md5).base64EncodedString())",
        ]
        if let condition { request.headers.append(condition) }
        request.finalStatuses = [412]
        let reply = try await send(request)
        if reply.status == 412 {
            throw FileProviderError(.versionOutOfDate, "\(path.display) changed in the bucket; the upload was not made")
        }
        try check(reply)
        guard let tag = reply.head["etag"].map(HTTPText.unquotedETag), !tag.isEmpty, tag.utf8.count <= ItemVersion.maximumLength else {
            throw FileProviderError(.corruptData, "PUT \(path.display): the reply gave no ETag")
        }
        if Self.isPlainMD5(tag), Self.etagIsMD5(reply.head), tag.lowercased() != digests.md5Hex {
            throw FileProviderError(
                .corruptData,
                "\(path.display) was stored as other bytes than those sent (its ETag is \(tag), the MD5 sent \(digests.md5Hex)); upload it again"
            )
        }
        let version = try S3ContentVersion(etag: tag, versionID: versioned ? reply.head["x-amz-version-id"] : nil, of: what)
        return (version, size, reply.head["date"].flatMap(Self.httpDate))
    }

    /// Writes a folder's marker object (`name/`, empty).
    func putMarker(_ path: ItemPath) async throws(FileProviderError) { try await putMarkerKey(key(path, folder: true)) }

    /// Writes an empty marker object at a key ending in `/`.
    func putMarkerKey(_ key: String) async throws(FileProviderError) {
        var request = HTTPRequest("PUT", endpoint(key: key))
        request.body = .data(Data(), contentType: "application/x-directory")
        try check(try await send(request))
    }

    /// Deletes one key (`DeleteObject`; a key that is not there is no error in S3).
    func deleteKey(_ key: String) async throws(FileProviderError) {
        let reply = try await send(HTTPRequest("DELETE", endpoint(key: key)))
        if reply.status == 404 { return }
        try check(reply)
    }

    /// Every key at or below a folder's prefix (its marker among them), following pages.
    ///
    /// - Throws: what ``listPage(prefix:delimiter:token:maxKeys:)`` throws; `corruptData` past
    ///   ``ProviderCore/ItemBounds/maximumEntriesPerFolder`` keys.
    func allKeys(below folder: ItemPath) async throws(FileProviderError) -> [S3Object] {
        let prefix = key(folder, folder: true)
        var objects: [S3Object] = []
        var token: String?
        repeat {
            let listing = try await listPage(prefix: prefix, delimiter: false, token: token)
            objects += listing.objects
            if objects.count > ItemBounds.maximumEntriesPerFolder { throw ItemBounds.tooManyEntries(in: folder.display) }
            token = listing.isTruncated ? listing.nextContinuationToken : nil
        } while token != nil
        return objects
    }

    /// Creates a file (`PutObject`, `If-None-Match: *` unless `mayAlreadyExist`) or a folder
    /// (its marker object). A new file's name is checked against the folders of its folder
    /// seen a moment ago (``KnownFolders``: one listing of the folder per 5 seconds, not one
    /// per file), else with a listing of its own.
    ///
    /// - Throws: `filenameCollision` when something is at the name (without
    ///   `mayAlreadyExist`; with it, a folder there is returned, and a file is replaced);
    ///   `noSuchItem` when the parent does not exist; `invalidFilename` for an unsafe name;
    ///   `notSupported` for a symlink; what ``put(_:at:condition:)`` throws.
    public func createItem(basedOn template: Item, fields: ItemFields, contents: URL?, options: CreateOptions)
        async throws(FileProviderError) -> ItemResult
    {
        guard template.kind != .symlink else { throw FileProviderError(.notSupported, "S3 holds no symlinks") }
        let parent = try path(of: template.parentIdentifier)
        guard parent.allowsChild(named: template.filename, reservedPrefix: "\u{0}") else {
            throw FileProviderError(.invalidFilename, "'\(template.filename)' cannot be a name in a bucket")
        }
        let path = parent.appending(template.filename)
        let mayExist = options.contains(.mayAlreadyExist)
        if template.kind == .folder {
            guard try await parentExists(parent) else { throw .noSuchItem(template.parentIdentifier) }
            if try await head(path) != nil {
                throw FileProviderError(.filenameCollision, "a file is at \(path.display)")
            }
            if try await folderExists(path) {
                if mayExist { return ItemResult(item: folderItem(path)) }
                throw FileProviderError(.filenameCollision, "a folder is at \(path.display)")
            }
            try await putMarker(path)
            // Nothing was below it a moment ago: it holds no folders.
            knownFolders.insert(key(path, folder: true), subfolders: [])
            knownFolders.addSubfolder(path.name, in: key(parent, folder: true))
            return ItemResult(item: folderItem(path))
        }
        guard let contents else { throw FileProviderError(.invalidArgument, "no contents to upload for \(path.display)") }
        // A folder of the file's name: from the folder's names seen a moment ago, else a listing.
        let folder = try await folderForNewFile(parent)
        guard folder.exists else { throw .noSuchItem(template.parentIdentifier) }
        let folderThere: Bool
        if let subfolders = folder.subfolders {
            folderThere = subfolders.contains(path.name)
        } else {
            folderThere = try await folderExists(path)
        }
        if folderThere {
            throw FileProviderError(.filenameCollision, "a folder is at \(path.display)")
        }
        do {
            let put = try await put(contents, at: path, condition: mayExist ? nil : "If-None-Match: *")
            return ItemResult(item: uploadedItem(path, put))
        } catch where error.code == .versionOutOfDate {
            throw FileProviderError(.filenameCollision, "a file is at \(path.display)")
        }
    }

    func uploadedItem(_ path: ItemPath, _ put: (version: S3ContentVersion, size: Int64, date: Date?)) -> Item {
        Item(
            identifier: path.identifier, parentIdentifier: path.parent.identifier, filename: path.name, kind: .file,
            size: put.size, contentModificationDate: put.date, version: put.version.itemVersion)
    }

    /// Changes an item: new contents (`PutObject` with `If-Match` on the base ETag), a rename
    /// or move (`CopyObject` of every key to its new name, then `DeleteObject` of every old
    /// key: a crash in between leaves both copies, and the replay copies and deletes again).
    /// Dates are not kept by S3 (an object's date is its upload's): a change of them alone
    /// changes nothing.
    ///
    /// - Throws: `noSuchItem` when the item is gone; `versionOutOfDate` when the object's
    ///   ETag is not `baseVersion`'s; `filenameCollision` when the new name is taken;
    ///   `invalidFilename` for an unsafe name; `noSuchItem` when the new parent does not exist;
    ///   what ``put(_:at:condition:)`` throws.
    public func modifyItem(
        _ item: Item, baseVersion: ItemVersion, changedFields: ItemFields, contents: URL?, options: ModifyOptions
    ) async throws(FileProviderError) -> ItemResult {
        let path = try path(of: item.identifier)
        if path.isRoot { throw FileProviderError(.invalidArgument, "the root cannot be changed") }
        guard let current = try await self.item(at: path) else { throw .noSuchItem(item.identifier) }
        if current.kind == .file && !S3ContentVersion(current.version).matches(S3ContentVersion(baseVersion)) {
            throw FileProviderError(.versionOutOfDate, "\(path.display) changed in the bucket since this change was made")
        }
        let moves = changedFields.contains(.filename) || changedFields.contains(.parentItemIdentifier)
        var target = path
        if moves {
            let parent = try self.path(of: changedFields.contains(.parentItemIdentifier) ? item.parentIdentifier : current.parentIdentifier)
            let name = changedFields.contains(.filename) ? item.filename : current.filename
            guard parent.allowsChild(named: name, reservedPrefix: "\u{0}") else {
                throw FileProviderError(.invalidFilename, "'\(name)' cannot be a name in a bucket")
            }
            target = parent.appending(name)
            if current.kind == .folder && path.contains(target) {
                throw FileProviderError(.invalidArgument, "\(path.display) cannot move into itself")
            }
            if target != path {
                guard try await parentExists(parent) else { throw .noSuchItem(parent.identifier) }
                let fileThere = try await head(target) != nil
                let folderThere = fileThere ? false : try await folderExists(target)
                if fileThere || folderThere {
                    throw FileProviderError(.filenameCollision, "something is at \(target.display)")
                }
            }
        }
        if current.kind == .folder {
            if target != path { try await moveFolder(path, to: target) }
            return ItemResult(item: folderItem(target), stillPendingFields: [])
        }
        var result = current
        if changedFields.contains(.contents), let contents {
            let condition = target == path ? "If-Match: \(Self.ifMatch(baseVersion))" : "If-None-Match: *"
            let put = try await put(contents, at: target, condition: condition)
            result = uploadedItem(target, put)
            if target != path { try await deleteKey(key(path)) }
        } else if target != path {
            result = try await copy(key(path), size: current.size, to: target)
            try await deleteKey(key(path))
        }
        return ItemResult(item: result)
    }

    /// Moves every key below a folder to another one: the new marker, copies of every key,
    /// then deletions of every old one.
    func moveFolder(_ path: ItemPath, to target: ItemPath) async throws(FileProviderError) {
        let objects = try await allKeys(below: path)
        let oldPrefix = key(path, folder: true)
        let newPrefix = key(target, folder: true)
        knownFolders.forget(below: oldPrefix)
        try await putMarker(target)
        knownFolders.addSubfolder(target.name, in: key(target.parent, folder: true))
        for object in objects where object.key != oldPrefix {
            let rest = String(object.key.utf8.dropFirst(oldPrefix.utf8.count)) ?? ""
            if rest.hasSuffix("/") {
                // A marker: written anew (SeaweedFS cannot copy its folder entries).
                try await putMarkerKey(newPrefix + rest)
                continue
            }
            try await copyKey(object.key, size: object.size.flatMap { Int64($0) }, to: newPrefix + rest)
        }
        try await deleteAll(objects, below: oldPrefix)
    }

    /// Deletes every key of a folder, then the folders between them and the folder, deepest
    /// first, then the folder's marker. (A key that is not there is no error in S3; SeaweedFS
    /// keeps a folder its last key left until the folder's own key is deleted.)
    func deleteAll(_ objects: [S3Object], below folderKey: String) async throws(FileProviderError) {
        knownFolders.forget(below: folderKey)
        var folders = Set<String>()
        for object in objects where object.key != folderKey {
            if !object.key.hasSuffix("/") { try await deleteKey(object.key) }
            var rest = String(object.key.utf8.dropFirst(folderKey.utf8.count)) ?? ""
            while let slash = rest.lastIndex(of: "/") {
                rest = String(rest[..<slash])
                folders.insert(folderKey + rest + "/")
            }
        }
        for folder in folders.sorted(by: { $0.utf8.count > $1.utf8.count }) { try await deleteKey(folder) }
        try await deleteKey(folderKey)
    }

    /// Deletes a file (after checking its ETag against `baseVersion`) or a folder: its marker
    /// and, with `recursive`, every key below it.
    ///
    /// - Throws: `noSuchItem` when nothing is there; `versionOutOfDate` when the object's ETag
    ///   is not `baseVersion`'s; `directoryNotEmpty` for a folder with keys below it without
    ///   `recursive`; `deletionRejected` for the root.
    public func deleteItem(identifier: ItemIdentifier, baseVersion: ItemVersion?, options: DeleteOptions)
        async throws(FileProviderError)
    {
        let path = try path(of: identifier)
        if path.isRoot { throw FileProviderError(.deletionRejected, "the root cannot be deleted") }
        if let file = try await head(path) {
            if let baseVersion, baseVersion != Self.folderVersion,
                !S3ContentVersion(file.version).matches(S3ContentVersion(baseVersion))
            {
                throw FileProviderError(.versionOutOfDate, "\(path.display) changed in the bucket since it was deleted here")
            }
            try await deleteKey(key(path))
            return
        }
        let objects = try await allKeys(below: path)
        if objects.isEmpty { throw .noSuchItem(identifier) }
        let marker = key(path, folder: true)
        if !options.contains(.recursive) && objects.contains(where: { $0.key != marker }) {
            throw FileProviderError(.directoryNotEmpty, "\(path.display) is not empty")
        }
        try await deleteAll(objects, below: marker)
    }
}
