import AdapterKit
import Foundation
import ProviderCore

extension S3Backend {
    /// Copies a key of `size` bytes to a path (a rename or move of a file); returns the new
    /// object.
    ///
    /// - Throws: `corruptData` when the copy is not there afterwards; what
    ///   ``copyKey(_:size:to:)`` throws.
    func copy(_ source: String, size: Int64, to target: ItemPath) async throws(FileProviderError) -> Item {
        try await copyKey(source, size: size, to: key(target))
        guard let item = try await head(target) else {
            throw FileProviderError(.corruptData, "the copy of '\(source)' at \(target.display) is not there")
        }
        return item
    }

    /// Copies a key to another inside the bucket: one `CopyObject` up to
    /// ``MultipartSettings/copyThreshold`` (S3 takes at most 5 GiB in one), in parts with
    /// `UploadPartCopy` above it. `size` is the source's size as listed, `nil` when unknown (then
    /// one `CopyObject`, which the store refuses for an object too large).
    ///
    /// - Throws: `serverUnreachable` when a `200` carries an error (S3 says so of both
    ///   requests); what ``copyInParts(_:size:to:)`` and ``S3ErrorMapping/check(_:bucket:)``
    ///   throw.
    func copyKey(_ source: String, size: Int64?, to targetKey: String) async throws(FileProviderError) {
        if let size, size > multipart.copyThreshold {
            try await copyInParts(source, size: size, to: targetKey)
            return
        }
        var request = HTTPRequest("PUT", endpoint(key: targetKey))
        request.body = .data(Data(), contentType: "application/octet-stream")
        request.headers = ["x-amz-copy-source: \(copySource(key: source))"]
        let reply = try await send(request)
        try check(reply)
        // A 200 may still carry an error.
        let error = S3ErrorBody.parse(reply.body)
        if let code = error.code {
            throw FileProviderError(.serverUnreachable, "copying '\(source)' to '\(targetKey)' failed: \(code): \(error.message ?? "")")
        }
    }

    /// A multipart copy: `CreateMultipartUpload` of the target, `UploadPartCopy` of each range
    /// of the source (`x-amz-copy-source-range`; parts sized as uploads' are, at most 10,000;
    /// as many at once as the client has connections), then `CompleteMultipartUpload` with the
    /// parts' ETags. The source is pinned by its ETag (`x-amz-copy-source-if-match`, and a `HEAD`
    /// after the copy for stores that ignore it) so a source replaced meanwhile is never left
    /// copied half old, half new. A copy that fails is aborted (or its object deleted).
    ///
    /// - Throws: `versionOutOfDate` when the source changed during the copy; `corruptData` when a
    ///   part's reply has no ETag or the assembled object another ETag than its parts make;
    ///   `insufficientQuota` over 5 TiB; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    func copyInParts(_ source: String, size: Int64, to targetKey: String) async throws(FileProviderError) {
        guard size <= MultipartSettings.maximumObjectSize else {
            throw FileProviderError(.insufficientQuota, "'\(source)' has \(size) bytes; an S3 object holds at most 5 TiB")
        }
        let reply = try await send(HTTPRequest("HEAD", endpoint(key: source)))
        try check(reply)
        let sourceTag = reply.head["etag"].map(HTTPText.unquotedETag) ?? ""
        let ranges = multipart.parts(for: size)
        let id = try await createUpload(key: targetKey, display: "'\(targetKey)'", checksummed: false)
        activeUploads.insert(id)
        defer { activeUploads.remove(id) }
        var tags = [String](repeating: "", count: ranges.count)
        do {
            let width = max(1, min(client.settings.connections, ranges.count))
            try await withThrowingTaskGroup(of: (Int, String).self) { group in
                var next = 0
                func start() {
                    let number = next + 1
                    let range = ranges[next]
                    next += 1
                    group.addTask { [self] in
                        (
                            number,
                            try await copyPart(source, range: range, sourceTag: sourceTag, number: number, to: targetKey, uploadID: id)
                        )
                    }
                }
                while next < width { start() }
                while let (number, tag) = try await group.next() {
                    tags[number - 1] = tag
                    if next < ranges.count { start() }
                }
            }
        } catch {
            try? await abortUpload(key: targetKey, uploadID: id)
            throw FileProviderError.wrap(error)
        }
        // The parts' ETags are their MD5s where the store gives plain ones: then the object's
        // must be the MD5 of them and their count.
        let expected =
            tags.allSatisfy(Self.isPlainMD5)
            ? FileDigests.hex(FileDigests.md5(of: tags.flatMap { FileDigests.bytes(hex: $0) ?? [] })) + "-\(ranges.count)" : nil
        do {
            _ = try await completeUpload(
                key: targetKey, uploadID: id, partTags: tags, expected: expected, condition: nil, of: path(ofKey: targetKey))
        } catch {
            try? await abortUpload(key: targetKey, uploadID: id)
            throw error
        }
        // Stores that ignore `x-amz-copy-source-if-match` (moto 5): the source is looked at again.
        let after = try await send(HTTPRequest("HEAD", endpoint(key: source)))
        try check(after)
        if after.head["etag"].map(HTTPText.unquotedETag) ?? "" != sourceTag {
            try? await deleteKey(targetKey)
            throw FileProviderError(.versionOutOfDate, "'\(source)' changed in the bucket while it was copied")
        }
    }

    /// `UploadPartCopy` of one range of `source`; returns the part's ETag (unquoted).
    ///
    /// - Throws: `versionOutOfDate` for a `412` (the source is no longer `sourceTag`);
    ///   `corruptData` when the reply has no ETag; `serverUnreachable` when a `200` carries an
    ///   error; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    func copyPart(
        _ source: String, range: Range<Int64>, sourceTag: String, number: Int, to targetKey: String, uploadID: String
    ) async throws(FileProviderError) -> String {
        var request = HTTPRequest(
            "PUT", endpoint(key: targetKey, query: [("partNumber", String(number)), ("uploadId", uploadID)]))
        request.body = .data(Data(), contentType: "application/octet-stream")
        request.headers = [
            "x-amz-copy-source: \(copySource(key: source))",
            "x-amz-copy-source-range: bytes=\(range.lowerBound)-\(range.upperBound - 1)",
        ]
        if !sourceTag.isEmpty { request.headers.append("x-amz-copy-source-if-match: \"\(sourceTag)\"") }
        request.finalStatuses = [412]
        let reply = try await send(request)
        if reply.status == 412 {
            throw FileProviderError(.versionOutOfDate, "'\(source)' changed in the bucket while it was copied")
        }
        try check(reply)
        let body = S3Records.parse(reply.body)
        if let body, body.root == "Error" {
            throw FileProviderError(
                .serverUnreachable,
                "copying part \(number) of '\(source)' failed: \(body.fields["Code"] ?? ""): \(body.fields["Message"] ?? "")")
        }
        guard let tag = body?.fields["ETag"].map(HTTPText.unquotedETag), !tag.isEmpty, tag.utf8.count <= ItemVersion.maximumLength else {
            throw FileProviderError(.corruptData, "copying part \(number) of '\(source)': the reply gave no ETag")
        }
        return tag
    }

    /// The path of a key under the domain's prefix (the root for any other key: used in
    /// messages and to look a finished copy up).
    func path(ofKey objectKey: String) -> ItemPath {
        guard objectKey.hasPrefix(prefix) else { return .root }
        let rest = String(objectKey.utf8.dropFirst(prefix.utf8.count)) ?? ""
        return ItemPath(components: rest.split(separator: "/").map(String.init))
    }
}
