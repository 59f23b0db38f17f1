import AdapterKit
import Foundation
import ProviderCore

/// What a multipart upload did.
struct MultipartOutcome: Sendable {
    var etag: String
    var date: Date?
    /// The object's version id, where the completion's reply gave one (`x-amz-version-id`).
    var versionID: String?
    /// The upload's id.
    var uploadID: String
    /// Parts sent by this call.
    var partsSent: Int
    /// Parts an interrupted upload of the same file had already sent, checked by their MD5
    /// and kept.
    var partsKept: Int
}

/// An upload in progress on the store (`ListMultipartUploads`).
struct PendingUpload: Sendable {
    var key: String
    var uploadID: String
    var initiated: Date?
    /// The checksum algorithm the upload was started with, where the listing says it (AWS and
    /// moto do, SeaweedFS 4.48 does not).
    var checksumAlgorithm: String?

    /// Whether its parts may carry `x-amz-checksum-sha256`: started with SHA-256, or the
    /// listing does not say (AWS refuses a SHA-256 on a part of an upload started with another
    /// algorithm or none; SeaweedFS and moto take it on any).
    var takesSHA256: Bool { checksumAlgorithm.map { $0.uppercased() == "SHA256" } ?? true }
}

extension S3Backend {
    /// Uploads a file in parts: `CreateMultipartUpload` with `x-amz-checksum-algorithm: SHA256`
    /// (or the interrupted upload of the same key, when its parts are this file's and it was not
    /// started with another algorithm), every part with `UploadPart` from its range of the
    /// file (never held in memory; `Content-MD5` and `x-amz-checksum-sha256` on each, its ETag
    /// checked against the MD5; as many at once as the client has connections), then
    /// `CompleteMultipartUpload` listing each part's ETag and `ChecksumSHA256`, conditional on
    /// `condition` (checked with `HEAD` just before as well), whose ETag is checked against the
    /// parts' MD5s and whose composite checksum, where the reply gives one, against their
    /// SHA-256s. Other uploads of the key, and uploads under the prefix older than
    /// ``MultipartSettings/abandonedAfter``, are aborted. An upload that fails is left on the store for the next call to resume,
    /// except after a `412`, when it is aborted.
    ///
    /// - Throws: `versionOutOfDate` when the condition does not hold; `corruptData` when a
    ///   part's or the object's ETag or checksum is not what the bytes sent make, the store
    ///   refuses a part or the completion as damaged (`BadDigest`), or a reply is not the XML
    ///   expected; `insufficientQuota` for a file over 5 TiB; `localIOFailure` when the file
    ///   cannot be read or changes size; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    func putMultipart(_ contents: URL, size: Int64, at path: ItemPath, condition: String?) async throws(FileProviderError)
        -> MultipartOutcome
    {
        guard size <= MultipartSettings.maximumObjectSize else {
            throw FileProviderError(.insufficientQuota, "\(path.display) has \(size) bytes; an S3 object holds at most 5 TiB")
        }
        let objectKey = key(path)
        let ranges = multipart.parts(for: size)
        var kept: [Int: String] = [:]
        var uploadID: String?
        for pending in try await pendingUploads(prefix: objectKey)
        where pending.key == objectKey && !activeUploads.contains(pending.uploadID) {
            if uploadID == nil, pending.takesSHA256, let parts = try? await uploadedParts(key: objectKey, uploadID: pending.uploadID),
                parts.allSatisfy({ $0.number >= 1 && $0.number <= ranges.count && $0.size == Int64(ranges[$0.number - 1].count) })
            {
                uploadID = pending.uploadID
                for part in parts { kept[part.number] = part.etag }
            } else {
                try await abortUpload(key: objectKey, uploadID: pending.uploadID)
            }
        }
        let id: String
        if let uploadID { id = uploadID } else { id = try await createUpload(key: objectKey, display: path.display) }
        activeUploads.insert(id)
        defer { activeUploads.remove(id) }
        try await abortAbandonedUploads()

        let file = contents.path
        let width = max(1, min(client.settings.connections, ranges.count))
        var digests = [FileDigests](repeating: FileDigests(md5: []), count: ranges.count)
        var sent = 0
        do {
            try await withThrowingTaskGroup(of: (Int, FileDigests, Bool).self) { group in
                var next = 0
                func start() {
                    let number = next + 1
                    let range = ranges[next]
                    let previous = kept[number]
                    next += 1
                    group.addTask { [self] in
                        let digest = try await hashers.run { () throws -> FileDigests in
                            try FileDigests.of(file: file, range: range, sha256: true)
                        }
                        if previous == digest.md5Hex { return (number, digest, false) }
                        try await uploadPart(file: file, range: range, number: number, md5: digest, key: objectKey, uploadID: id, of: path)
                        return (number, digest, true)
                    }
                }
                while next < width { start() }
                while let (number, digest, didSend) = try await group.next() {
                    digests[number - 1] = digest
                    if didSend { sent += 1 }
                    if next < ranges.count { start() }
                }
            }
        } catch let error as FileProviderError {
            throw error
        } catch {
            throw FileProviderError(.localIOFailure, "uploading \(path.display): \(error)")
        }
        let expected = FileDigests.hex(FileDigests.md5(of: digests.flatMap(\.md5))) + "-\(ranges.count)"
        // Checked here too, just before: moto 5.2.1 ignores If-Match on CompleteMultipartUpload.
        if let condition, try await !conditionHolds(condition, at: path) {
            try? await abortUpload(key: objectKey, uploadID: id)
            throw FileProviderError(.versionOutOfDate, "\(path.display) changed in the bucket; the upload was not made")
        }
        let (etag, date, versionID) = try await completeUpload(
            key: objectKey, uploadID: id, partTags: digests.map(\.md5Hex),
            partChecksums: digests.map { Data($0.sha256 ?? []).base64EncodedString() }, expected: expected, condition: condition,
            of: path)
        return MultipartOutcome(
            etag: etag, date: date, versionID: versionID, uploadID: id, partsSent: sent, partsKept: ranges.count - sent)
    }

    /// Whether a write's condition holds now, by a `HEAD` of the key: `If-None-Match: *` that
    /// nothing is there, `If-Match: "etag"` that the object has that ETag.
    func conditionHolds(_ condition: String, at path: ItemPath) async throws(FileProviderError) -> Bool {
        let current = try await head(path)
        if condition.lowercased().hasPrefix("if-none-match:") { return current == nil }
        guard condition.lowercased().hasPrefix("if-match:"), let colon = condition.firstIndex(of: ":") else { return true }
        let wanted = HTTPText.unquotedETag(String(condition[condition.index(after: colon)...]))
        return current.map { S3ContentVersion($0.version).etag == wanted } ?? false
    }

    /// `CreateMultipartUpload`: a new upload of a key, its parts checked with SHA-256
    /// (`x-amz-checksum-algorithm: SHA256`) unless `checksummed` is false (a multipart copy,
    /// whose parts are copied on the store and whose completion lists no checksums); returns
    /// its id.
    ///
    /// - Throws: `corruptData` when the reply has no upload id; what
    ///   ``S3ErrorMapping/check(_:bucket:)`` throws.
    func createUpload(key objectKey: String, display: String, checksummed: Bool = true) async throws(FileProviderError) -> String {
        var request = HTTPRequest("POST", endpoint(key: objectKey, query: [("uploads", "")]))
        request.body = .data(Data(), contentType: "application/octet-stream")
        if checksummed { request.headers = ["x-amz-checksum-algorithm: SHA256"] }
        let reply = try await send(request)
        try check(reply)
        guard let records = S3Records.parse(reply.body), let id = records.fields["UploadId"], !id.isEmpty, id.utf8.count <= 1024
        else {
            throw FileProviderError(.corruptData, "starting the upload of \(display): the reply gave no upload id")
        }
        return id
    }

    /// `UploadPart`: one part from its range of the file, with `Content-MD5` and, when `md5`
    /// holds one, `x-amz-checksum-sha256`; its ETag is checked against the MD5 where it is one
    /// (not under SSE-KMS or SSE-C).
    ///
    /// - Throws: `corruptData` when the ETag is another MD5, or the store refuses the bytes as
    ///   not those hashed (`BadDigest`: damaged on the way); what
    ///   ``S3ErrorMapping/check(_:bucket:)`` throws.
    func uploadPart(
        file: String, range: Range<Int64>, number: Int, md5: FileDigests, key objectKey: String, uploadID: String, of path: ItemPath
    ) async throws(FileProviderError) {
        var request = HTTPRequest(
            "PUT", endpoint(key: objectKey, query: [("partNumber", String(number)), ("uploadId", uploadID)]))
        request.body = .filePart(path: file, offset: range.lowerBound, length: Int64(range.count))
        request.headers = ["Content-MD5: \(Data(md5.md5).base64EncodedString())"]
        if let sha256 = md5.sha256 { request.headers.append("x-amz-checksum-sha256: \(Data(sha256).base64EncodedString())") }
        let reply = try await send(request)
        try check(reply)
        let tag = reply.head["etag"].map(HTTPText.unquotedETag) ?? ""
        if Self.isPlainMD5(tag), Self.etagIsMD5(reply.head), tag.lowercased() != md5.md5Hex {
            throw FileProviderError(
                .corruptData, "part \(number) of \(path.display) was stored as other bytes (ETag \(tag), MD5 sent \(md5.md5Hex))")
        }
    }

    /// `CompleteMultipartUpload` of the parts with ETags `partTags` (unquoted, part 1 first)
    /// and, when given, SHA-256s `partChecksums` (base64), conditional on `condition`; returns
    /// the object's ETag (and its date and version id where the reply gives them), checked
    /// against `expected` (the MD5 of the parts' MD5s and their
    /// count) where it has that form, and the reply's composite checksum (`ChecksumSHA256`,
    /// the SHA-256 of the parts' SHA-256s, `-N`) against `partChecksums` where it gives one. A `412` aborts the upload. A retried request the store answers with
    /// `NoSuchUpload` (the first one completed, its reply was lost) is taken when the object
    /// has the ETag expected.
    ///
    /// - Throws: `versionOutOfDate` for a `412`; `corruptData` when the ETag or the composite
    ///   checksum is another, or the store finds a listed checksum is not its part's
    ///   (`BadDigest`);
    ///   `serverUnreachable` when a `200` carries an error; what
    ///   ``S3ErrorMapping/check(_:bucket:)`` throws.
    func completeUpload(
        key objectKey: String, uploadID: String, partTags: [String], partChecksums: [String]? = nil, expected: String?,
        condition: String?, of path: ItemPath
    ) async throws(FileProviderError) -> (String, Date?, String?) {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for (index, tag) in partTags.enumerated() {
            xml += "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\"\(tag)\"</ETag>"
            if let partChecksums, index < partChecksums.count { xml += "<ChecksumSHA256>\(partChecksums[index])</ChecksumSHA256>" }
            xml += "</Part>"
        }
        xml += "</CompleteMultipartUpload>"
        var request = HTTPRequest("POST", endpoint(key: objectKey, query: [("uploadId", uploadID)]))
        request.body = .data(Data(xml.utf8), contentType: "application/xml")
        if let condition { request.headers.append(condition) }
        request.finalStatuses = [412]
        let reply = try await send(request)
        if reply.status == 412 {
            try? await abortUpload(key: objectKey, uploadID: uploadID)
            throw FileProviderError(.versionOutOfDate, "\(path.display) changed in the bucket; the upload was not made")
        }
        let body = S3Records.parse(reply.body)
        if reply.status == 404 && body?.fields["Code"] == "NoSuchUpload" && reply.attempts > 1,
            let item = try await head(path), S3ContentVersion(item.version).etag == expected
        {
            return (expected ?? "", nil, S3ContentVersion(item.version).versionID)
        }
        try check(reply)
        if let body, body.root == "Error" {
            throw FileProviderError(
                .serverUnreachable,
                "completing the upload of \(path.display) failed: \(body.fields["Code"] ?? ""): \(body.fields["Message"] ?? "")")
        }
        guard let tag = body?.fields["ETag"].map(HTTPText.unquotedETag) ?? reply.head["etag"].map(HTTPText.unquotedETag), !tag.isEmpty,
            tag.utf8.count <= ItemVersion.maximumLength
        else {
            throw FileProviderError(.corruptData, "completing the upload of \(path.display): the reply gave no ETag")
        }
        if let expected, tag.contains("-"), tag.lowercased() != expected {
            throw FileProviderError(
                .corruptData, "the server assembled \(path.display) from other parts than those sent (ETag \(tag), not \(expected))")
        }
        if let partChecksums, let composite = body?.fields["ChecksumSHA256"], !composite.isEmpty {
            let wanted = Self.compositeSHA256(partChecksums)
            if composite.split(separator: "-").first.map(String.init) != wanted {
                throw FileProviderError(
                    .corruptData,
                    "the server assembled \(path.display) from other parts than those sent (checksum \(composite.prefix(80)), not \(wanted)-\(partChecksums.count))"
                )
            }
        }
        return (tag, reply.head["date"].flatMap(Self.httpDate), reply.head["x-amz-version-id"])
    }

    /// `AbortMultipartUpload`; an upload that is gone already is no error.
    func abortUpload(key objectKey: String, uploadID: String) async throws(FileProviderError) {
        let reply = try await send(HTTPRequest("DELETE", endpoint(key: objectKey, query: [("uploadId", uploadID)])))
        if reply.status == 404 { return }
        try check(reply)
    }

    /// The uploads in progress under a key prefix (`ListMultipartUploads`, every page).
    ///
    /// - Throws: `corruptData` for a reply that is not the XML expected, an upload outside the
    ///   prefix, or pages that do not move on; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    func pendingUploads(prefix listed: String) async throws(FileProviderError) -> [PendingUpload] {
        var uploads: [PendingUpload] = []
        var markers: (key: String, id: String)?
        for _ in 0..<1000 {
            var query: [(String, String)] = [("uploads", ""), ("prefix", listed)]
            if let markers { query += [("key-marker", markers.key), ("upload-id-marker", markers.id)] }
            var request = HTTPRequest("GET", HTTPClient.canonicalQuery(query))
            request.sink = .memory(limit: 16 << 20)
            let reply = try await send(request)
            try check(reply)
            guard let page = S3Records.parse(reply.body, record: "Upload"), page.root == "ListMultipartUploadsResult" else {
                throw FileProviderError(.corruptData, "the list of uploads under '\(listed)' is not a ListMultipartUploadsResult")
            }
            for record in page.records {
                guard let key = record["Key"], let id = record["UploadId"], key.utf8.starts(with: listed.utf8) else {
                    throw FileProviderError(.corruptData, "the list of uploads under '\(listed)' holds an upload outside it")
                }
                uploads.append(
                    PendingUpload(
                        key: key, uploadID: id, initiated: record["Initiated"].flatMap(Self.isoDate),
                        checksumAlgorithm: record["ChecksumAlgorithm"].flatMap { $0.isEmpty ? nil : $0 }))
            }
            guard page.fields["IsTruncated"]?.lowercased() == "true" else { return uploads }
            let next = (page.fields["NextKeyMarker"] ?? "", page.fields["NextUploadIdMarker"] ?? "")
            if next.0.isEmpty || (markers.map { $0.key == next.0 && $0.id == next.1 } ?? false) {
                throw FileProviderError(.corruptData, "the list of uploads under '\(listed)' does not move on to its next page")
            }
            markers = next
        }
        throw FileProviderError(.corruptData, "the list of uploads under '\(listed)' has more than 1,000 pages")
    }

    /// The parts an upload holds (`ListParts`, every page): number, ETag, size. (moto 5.2.1
    /// names the reply `ListPartsResponse`.)
    ///
    /// - Throws: `corruptData` for a reply that is not the XML expected or pages that do not
    ///   move on; what ``S3ErrorMapping/check(_:bucket:)`` throws.
    func uploadedParts(key objectKey: String, uploadID: String) async throws(FileProviderError) -> [(
        number: Int, etag: String, size: Int64
    )] {
        var parts: [(number: Int, etag: String, size: Int64)] = []
        var marker: String?
        for _ in 0..<100 {
            var query: [(String, String)] = [("uploadId", uploadID)]
            if let marker { query.append(("part-number-marker", marker)) }
            var request = HTTPRequest("GET", endpoint(key: objectKey, query: query))
            request.sink = .memory(limit: 16 << 20)
            let reply = try await send(request)
            try check(reply)
            guard let page = S3Records.parse(reply.body, record: "Part"), ["ListPartsResult", "ListPartsResponse"].contains(page.root)
            else {
                throw FileProviderError(.corruptData, "the parts of the upload of '\(objectKey)' are not a ListPartsResult")
            }
            for record in page.records {
                guard let number = record["PartNumber"].flatMap({ Int($0) }), let size = record["Size"].flatMap({ Int64($0) }) else {
                    throw FileProviderError(.corruptData, "the parts of the upload of '\(objectKey)' hold one without a number or size")
                }
                parts.append((number, HTTPText.unquotedETag(record["ETag"] ?? "").lowercased(), size))
            }
            guard page.fields["IsTruncated"]?.lowercased() == "true" else { return parts }
            guard let next = page.fields["NextPartNumberMarker"], !next.isEmpty, next != marker else {
                throw FileProviderError(.corruptData, "the parts of the upload of '\(objectKey)' do not move on to the next page")
            }
            marker = next
        }
        throw FileProviderError(.corruptData, "the parts of the upload of '\(objectKey)' fill more than 100 pages")
    }

    /// Aborts the uploads under the domain's prefix that were started more than
    /// ``MultipartSettings/abandonedAfter`` seconds ago and that this process is not sending;
    /// returns how many.
    ///
    /// - Throws: what ``pendingUploads(prefix:)`` and ``abortUpload(key:uploadID:)`` throw.
    @discardableResult
    public func abortAbandonedUploads() async throws(FileProviderError) -> Int {
        let cutoff = Date().addingTimeInterval(-multipart.abandonedAfter)
        var aborted = 0
        for upload in try await pendingUploads(prefix: prefix) where !activeUploads.contains(upload.uploadID) {
            guard let initiated = upload.initiated, initiated <= cutoff else { continue }
            try await abortUpload(key: upload.key, uploadID: upload.uploadID)
            aborted += 1
        }
        return aborted
    }

    /// The composite checksum of parts with SHA-256s `checksums` (base64): the base64 SHA-256 of
    /// their digests one after another (what S3 gives a multipart upload, before its `-N`).
    static func compositeSHA256(_ checksums: [String]) -> String {
        var digest = SHA256Digest()
        for checksum in checksums {
            let bytes = Data(base64Encoded: checksum) ?? Data()
            bytes.withUnsafeBytes { digest.update($0) }
        }
        return Data(digest.finishBytes()).base64EncodedString()
    }

    /// Whether a tag is 32 hex digits (the form of an MD5).
    static func isPlainMD5(_ tag: String) -> Bool {
        tag.utf8.count == 32 && tag.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }
    }

    /// Whether a reply's ETag may be taken as the MD5 of the bytes: not for objects encrypted
    /// with SSE-KMS or SSE-C, whose ETags are something else of the same form.
    static func etagIsMD5(_ head: ReplyHead) -> Bool {
        if head["x-amz-server-side-encryption-customer-algorithm"] != nil { return false }
        if let sse = head["x-amz-server-side-encryption"]?.lowercased(), sse.hasPrefix("aws:kms") { return false }
        return true
    }
}
