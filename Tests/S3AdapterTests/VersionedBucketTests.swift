import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Synchronization
import Testing

@testable import S3Adapter

/// A bucket with versioning enabled, on the SeaweedFS cluster and on moto: the listing, a
/// `HEAD` and an upload give one object the same version (its ETag and version id); another
/// client's overwrite with the same bytes is a new version; a download asks for the version it
/// was given, so an overwrite between the listing and the download, or during it, never mixes
/// the two; a deleted version is a clean `versionNoLongerAvailable`; a folder whose keys were
/// all deleted is not listed.
@Suite("S3 versioned buckets")
struct VersionedBucketTests {
    enum Server: String, CaseIterable, Sendable { case seaweedfs, moto }

    /// Another client of the store: `curl --aws-sigv4` on a bucket of its own.
    struct OtherClient: Sendable {
        struct Failure: Error, CustomStringConvertible {
            var description: String
        }

        var endpoint: String
        var region: String
        var accessKey: String
        var secretKey: String
        var bucket: String

        /// Runs curl; returns the status and the headers.
        @discardableResult
        func curl(_ arguments: [String], path: String) throws -> (status: Int, headers: String, body: String) {
            let headers = FileManager.default.temporaryDirectory.appendingPathComponent("s3-versions-\(UUID().uuidString)")
            let body = headers.appendingPathExtension("body")
            defer {
                try? FileManager.default.removeItem(at: headers)
                try? FileManager.default.removeItem(at: body)
            }
            let result = try ChildProcess.capture(
                "/usr/bin/curl",
                ["-sS", "--aws-sigv4", "aws:amz:\(region):s3", "-u", "\(accessKey):\(secretKey)", "-o", body.path, "-D", headers.path]
                    + ["-w", "%{http_code}"] + arguments + ["\(endpoint)/\(bucket)\(path)"])
            guard result.ending == .exited(0), let status = Int(String(decoding: result.output, as: UTF8.self)) else {
                throw Failure(description: "curl \(path) failed: \(String(decoding: result.errorOutput, as: UTF8.self))")
            }
            return (
                status, (try? String(contentsOf: headers, encoding: .utf8)) ?? "", (try? String(contentsOf: body, encoding: .utf8)) ?? ""
            )
        }

        func enableVersioning() throws {
            let body =
                "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Status>Enabled</Status></VersioningConfiguration>"
            let reply = try curl(
                // SeaweedFS checks the body's hash, which curl 7.88 signs but does not send.
                [
                    "-X", "PUT", "-H", "Content-Type: application/xml", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--data-binary",
                    body,
                ],
                path: "?versioning=")
            guard reply.status == 200 else { throw Failure(description: "enabling versioning: \(reply.status) \(reply.body)") }
        }

        /// Writes `contents` at `key`; returns the new version id.
        @discardableResult
        func put(_ key: String, _ contents: Data) throws -> String? {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("s3-versions-\(UUID().uuidString)")
            try contents.write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let reply = try curl(["-T", file.path], path: "/" + key)
            guard reply.status == 200 else { throw Failure(description: "putting \(key): \(reply.status)") }
            for line in reply.headers.split(separator: "\r\n") where line.lowercased().hasPrefix("x-amz-version-id:") {
                return line.dropFirst("x-amz-version-id:".count).trimmingCharacters(in: .whitespaces)
            }
            return nil
        }

        func delete(_ key: String, versionID: String? = nil) throws {
            let query = versionID.map { "?versionId=\($0)" } ?? ""
            let reply = try curl(["-X", "DELETE"], path: "/" + key + query)
            guard reply.status == 204 || reply.status == 200 else { throw Failure(description: "deleting \(key): \(reply.status)") }
        }
    }

    /// A backend over a fresh prefix of a new bucket with versioning enabled, and the other
    /// client of that bucket.
    static func backend(_ server: Server) async throws -> (S3Backend, OtherClient) {
        let prefix = "versions-\(UUID().uuidString)"
        let client: OtherClient
        switch server {
        case .seaweedfs:
            let (cluster, _) = try await SharedSeaweedFS.cluster()
            let bucket = try await offThePool { try cluster.makeBucket() }
            client = OtherClient(
                endpoint: cluster.endpoint, region: cluster.region, accessKey: cluster.accessKey, secretKey: cluster.secretKey,
                bucket: bucket)
        case .moto:
            let (moto, _) = try await SharedMoto.server()
            let bucket = try await offThePool { try moto.makeBucket() }
            client = OtherClient(
                endpoint: moto.endpoint, region: moto.region, accessKey: moto.accessKey, secretKey: moto.secretKey, bucket: bucket)
        }
        try await offThePool { try client.enableVersioning() }
        let backend = try await S3Backend(
            endpoint: client.endpoint, bucket: client.bucket, prefix: prefix, region: client.region, pathStyle: true,
            credentials: (client.accessKey, client.secretKey, nil))
        return (backend, client)
    }

    final class Scratch: Sendable {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("s3-versions-\(UUID().uuidString)")
        init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(at: url) }

        func file(_ contents: Data) throws -> URL {
            let file = url.appendingPathComponent("up-\(UUID().uuidString)")
            try contents.write(to: file)
            return file
        }

        func download(
            _ backend: S3Backend, _ identifier: ItemIdentifier, version: ItemVersion?, progress: ProgressHandler? = nil
        ) async throws -> (Item, Data) {
            let destination = url.appendingPathComponent("down-\(UUID().uuidString)")
            _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
            let item = try await backend.fetchContents(for: identifier, version: version, to: destination, offset: 0, progress: progress)
            return (item, try Data(contentsOf: destination))
        }
    }

    static func bytes(_ count: Int, seed: UInt8) -> Data {
        var state = UInt32(seed) &* 2_654_435_761 | 1
        return Data(
            (0..<count).map { _ in
                state ^= state << 13
                state ^= state >> 17
                state ^= state << 5
                return UInt8(truncatingIfNeeded: state)
            })
    }

    @Test(arguments: Server.allCases)
    func theListingAHeadAndAnUploadGiveOneVersionWithItsId(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        #expect(backend.versioned)
        let scratch = try Scratch()
        let created = try await backend.createItem(
            basedOn: Item(identifier: ItemIdentifier("a.txt"), parentIdentifier: .rootContainer, filename: "a.txt", kind: .file),
            fields: [], contents: try scratch.file(Data("first\n".utf8)), options: [])
        let uploaded = S3ContentVersion(created.item.version)
        #expect(uploaded.versionID != nil, "the upload's x-amz-version-id is the recorded one")
        let otherID = try await offThePool { try other.put(backend.prefix + "b.txt", Data("other\n".utf8)) }

        let listed = try await backend.listAllItems(in: .rootContainer).items
        let headed = try await backend.item(for: ItemIdentifier("a.txt"))
        #expect(listed.first { $0.filename == "a.txt" }?.version == created.item.version)
        #expect(headed.version == created.item.version)
        let listedB = try #require(listed.first { $0.filename == "b.txt" })
        #expect(S3ContentVersion(listedB.version).versionID == otherID)
        #expect(try await backend.item(for: ItemIdentifier("b.txt")).version == listedB.version)

        // Flat listings give the same versions.
        let flat = try await backend.enumerateAllItems(startingAt: .initialPageSortedByName).items
        #expect(flat.first { $0.filename == "a.txt" }?.version == created.item.version)
        #expect(flat.first { $0.filename == "b.txt" }?.version == listedB.version)

        // A change made here on the listed version goes through, and records the new id.
        let modified = try await backend.modifyItem(
            headed, baseVersion: listed.first { $0.filename == "a.txt" }!.version, changedFields: [.contents],
            contents: try scratch.file(Data("second\n".utf8)), options: [])
        let newVersion = S3ContentVersion(modified.item.version)
        #expect(newVersion.versionID != nil && newVersion.versionID != uploaded.versionID)
        #expect(try await backend.item(for: ItemIdentifier("a.txt")).version == modified.item.version)
        try await backend.deleteItem(identifier: ItemIdentifier("a.txt"), baseVersion: modified.item.version, options: [])
        #expect(try await backend.listAllItems(in: .rootContainer).items.map(\.filename) == ["b.txt"])
    }

    @Test(arguments: Server.allCases)
    func anOverwriteWithTheSameBytesIsANewVersion(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        let key = backend.prefix + "same.txt"
        _ = try await offThePool { try other.put(key, Data("same bytes\n".utf8)) }
        let before = try #require(try await backend.listAllItems(in: .rootContainer).items.first)
        _ = try await offThePool { try other.put(key, Data("same bytes\n".utf8)) }
        let after = try #require(try await backend.listAllItems(in: .rootContainer).items.first)
        #expect(S3ContentVersion(after.version).etag == S3ContentVersion(before.version).etag)
        #expect(after.version != before.version, "a remote overwrite is a new version, even with the same ETag")
        // A change made here on the version listed before is refused, not written over the other.
        let scratch = try Scratch()
        let refused = await #expect(throws: FileProviderError.self) {
            try await backend.modifyItem(
                before, baseVersion: before.version, changedFields: [.contents], contents: try scratch.file(Data("mine\n".utf8)),
                options: [])
        }
        #expect(refused?.code == .versionOutOfDate, "\(String(describing: refused))")
    }

    @Test(arguments: Server.allCases)
    func aDownloadGetsTheListedVersionAfterAnOverwrite(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        let scratch = try Scratch()
        let key = backend.prefix + "doc.bin"
        let old = Self.bytes(300_000, seed: 1)
        let new = Self.bytes(200_000, seed: 2)
        _ = try await offThePool { try other.put(key, old) }
        let listed = try #require(try await backend.listAllItems(in: .rootContainer).items.first)
        // Another client writes the key between the listing and the download.
        _ = try await offThePool { try other.put(key, new) }
        let (item, bytes) = try await scratch.download(backend, listed.identifier, version: listed.version)
        #expect(bytes == old, "the download is the listed version's bytes, not the overwrite's")
        #expect(item.version == listed.version)
        // A ranged read of the listed version too.
        let partial = scratch.url.appendingPathComponent("partial")
        _ = FileManager.default.createFile(atPath: partial.path, contents: nil)
        _ = try await backend.fetchPartialContents(for: listed.identifier, version: listed.version, range: 1000..<2000, into: partial)
        #expect(try Data(contentsOf: partial)[1000..<2000] == old[1000..<2000])
        // Without a version: the current one.
        let (current, currentBytes) = try await scratch.download(backend, listed.identifier, version: nil)
        #expect(currentBytes == new)
        #expect(current.version != listed.version)
    }

    @Test(arguments: Server.allCases)
    func anOverwriteDuringADownloadNeverMixesTwoVersions(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        let scratch = try Scratch()
        let key = backend.prefix + "big.bin"
        let old = Self.bytes(12 << 20, seed: 3)
        let new = Self.bytes(12 << 20, seed: 4)
        _ = try await offThePool { try other.put(key, old) }
        let listed = try #require(try await backend.listAllItems(in: .rootContainer).items.first)
        // The first bytes that arrive make the other client overwrite the key, while the rest come.
        let overwritten = Mutex(false)
        let (item, bytes) = try await scratch.download(
            backend, listed.identifier, version: listed.version,
            progress: { completed, _ in
                guard completed > 0,
                    overwritten.withLock({ done in
                        defer { done = true }
                        return !done
                    })
                else { return }
                _ = try? other.put(key, new)
            })
        #expect(overwritten.withLock { $0 })
        #expect(bytes == old, "the download holds the listed version's bytes only")
        #expect(item.version == listed.version)
        #expect(try await backend.item(for: listed.identifier).version != listed.version)
    }

    @Test(arguments: Server.allCases)
    func aDeletedVersionIsNoLongerAvailable(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        let scratch = try Scratch()
        let key = backend.prefix + "gone.txt"
        let firstID = try #require(try await offThePool { try other.put(key, Data("v1\n".utf8)) })
        let listed = try #require(try await backend.listAllItems(in: .rootContainer).items.first)
        try await offThePool {
            try other.put(key, Data("v2\n".utf8))
            try other.delete(key, versionID: firstID)
        }
        let error = await #expect(throws: FileProviderError.self) {
            try await scratch.download(backend, listed.identifier, version: listed.version)
        }
        #expect(error?.code == .versionNoLongerAvailable, "\(String(describing: error))")
    }

    @Test(arguments: Server.allCases)
    func aFolderWhoseKeysWereDeletedIsNotListed(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        try await offThePool {
            try other.put(backend.prefix + "kept/a.txt", Data("a\n".utf8))
            try other.put(backend.prefix + "gone/b.txt", Data("b\n".utf8))
            try other.delete(backend.prefix + "gone/b.txt")
        }
        let root = try await backend.listAllItems(in: .rootContainer)
        #expect(root.items.map(\.filename) == ["kept"])
        let error = await #expect(throws: FileProviderError.self) { try await backend.listAllItems(in: ItemIdentifier("gone")) }
        #expect(error?.code == .noSuchItem, "\(String(describing: error))")
        #expect(try await backend.listAllItems(in: ItemIdentifier("kept")).items.map(\.filename) == ["a.txt"])
        let flat = try await backend.enumerateAllItems(startingAt: .initialPageSortedByName).items
        #expect(Set(flat.map { $0.identifier.rawValue }) == ["kept", "kept/a.txt"])
    }

    @Test(arguments: Server.allCases)
    func manyVersionsOfOneKeyPageThrough(_ server: Server) async throws {
        let (backend, other) = try await Self.backend(server)
        defer { Task { await backend.close() } }
        try await offThePool {
            for round in 0..<4 { try other.put(backend.prefix + "m.txt", Data("round \(round)\n".utf8)) }
            try other.put(backend.prefix + "n.txt", Data("n\n".utf8))
        }
        // Pages of two entries: the history of m.txt fills pages with no current object on them.
        var token: String?
        var names: [String] = []
        var pages = 0
        repeat {
            let listing = try await backend.listPage(prefix: backend.prefix, delimiter: true, token: token, maxKeys: 2, versions: true)
            names += listing.objects.filter(\.isCurrentObject).map(\.key)
            pages += 1
            token = listing.isTruncated ? listing.nextContinuationToken : nil
        } while token != nil && pages < 20
        #expect(names == [backend.prefix + "m.txt", backend.prefix + "n.txt"])
        #expect(pages >= 3)
    }
}
