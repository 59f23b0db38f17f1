import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// An S3 server that lies, scripted reply by reply on 127.0.0.1 (``FaultServer``): endless or
/// repeated continuation tokens, keys outside the prefix, a prefix listing itself, impossible
/// sizes, bodies cut short, wrong checksums. Each is refused with a clear error or a skipped
/// entry; nothing loops and nothing wrong is written as a file's contents.
@Suite("S3 against a hostile server")
struct HostileServerTests {
    static func listing(prefix: String, contents: [(key: String, size: String)] = [], prefixes: [String] = [], next: String? = nil)
        -> Data
    {
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        xml += "<Name>bkt</Name><Prefix>\(prefix)</Prefix><IsTruncated>\(next != nil)</IsTruncated>"
        if let next { xml += "<NextContinuationToken>\(next)</NextContinuationToken>" }
        for item in contents {
            xml += "<Contents><Key>\(item.key)</Key><ETag>\"e1\"</ETag><Size>\(item.size)</Size>"
            xml += "<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
        }
        for common in prefixes { xml += "<CommonPrefixes><Prefix>\(common)</Prefix></CommonPrefixes>" }
        xml += "</ListBucketResult>"
        return Data(xml.utf8)
    }

    static func ok(_ body: Data) -> FaultServer.Action {
        .reply(status: 200, headers: ["Content-Type": "application/xml"], body: body)
    }

    /// A backend over a server whose listings of the root come from `root`, every other
    /// request answered by `other` (404 by default).
    static func backend(
        root: @escaping @Sendable (FaultServer.Request) -> FaultServer.Action,
        other: @escaping @Sendable (FaultServer.Request) -> FaultServer.Action = { _ in .reply(status: 404, headers: [:], body: Data()) }
    ) async throws -> (S3Backend, FaultServer) {
        let server = try FaultServer { request in
            if request.path == "/bkt" && request.query["list-type"] == "2" {
                if request.query["max-keys"] == "1" { return ok(listing(prefix: request.query["prefix"] ?? "")) }
                return root(request)
            }
            return other(request)
        }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil),
            http: HTTPOptionsForTests.quick)
        return (backend, server)
    }

    @Test func aContinuationTokenGivenBackIsRefusedNotFollowedForever() async throws {
        let (backend, server) = try await Self.backend(root: { _ in
            Self.ok(Self.listing(prefix: "", contents: [("a.txt", "1")], next: "again"))
        })
        defer { server.stop() }
        let error = await #expect(throws: FileProviderError.self) { try await backend.listAllItems(in: .rootContainer) }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("continuation token") == true, "\(error?.message ?? "")")
        #expect(server.requests.count < 10)
    }

    @Test func endlessEmptyPagesAreRefused() async throws {
        let (backend, server) = try await Self.backend(root: { _ in
            Self.ok(Self.listing(prefix: "", next: UUID().uuidString))
        })
        defer { server.stop() }
        let error = await #expect(throws: FileProviderError.self) { try await backend.listAllItems(in: .rootContainer) }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("nothing on it") == true, "\(error?.message ?? "")")
    }

    @Test func keysOutsideThePrefixAndAPrefixListingItselfAreNotItems() async throws {
        let (outside, server) = try await Self.backend(root: { _ in
            Self.ok(Self.listing(prefix: "", contents: [("a.txt", "1")]))
        })
        defer { server.stop() }
        // The folder "docs" exists (its listing of one key says so), then lists a key of another
        // folder.
        server.setHandler { request in
            if request.query["list-type"] == "2" {
                let prefix = request.query["prefix"] ?? ""
                if prefix == "docs/" && request.query["max-keys"] == "1" {
                    return Self.ok(Self.listing(prefix: "docs/", contents: [("docs/x", "1")]))
                }
                if prefix == "docs/" { return Self.ok(Self.listing(prefix: "docs/", contents: [("other/secret", "1")])) }
                // The root lists itself as its own folder, and an empty name.
                return Self.ok(Self.listing(prefix: "", contents: [("ok.txt", "3")], prefixes: ["/", "docs/"]))
            }
            return .reply(status: 404, headers: [:], body: Data())
        }
        let error = await #expect(throws: FileProviderError.self) {
            try await outside.listAllItems(in: ItemIdentifier("docs"))
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("outside") == true, "\(error?.message ?? "")")

        let root = try await outside.listAllItems(in: .rootContainer)
        #expect(Set(root.items.map(\.filename)) == ["ok.txt", "docs"])
        #expect(root.refused.count == 1)
    }

    @Test func impossibleSizesAreRefusedEntries() async throws {
        let (backend, server) = try await Self.backend(root: { _ in
            Self.ok(Self.listing(prefix: "", contents: [("good.txt", "5"), ("negative.txt", "-1"), ("huge.txt", "99999999999999999999")]))
        })
        defer { server.stop() }
        let listing = try await backend.listAllItems(in: .rootContainer)
        #expect(listing.items.map(\.filename) == ["good.txt"])
        #expect(Set(listing.refused.map(\.filename)) == ["negative.txt", "huge.txt"])
    }

    @Test func aBodyCutShortOrAWrongChecksumIsNeverTakenAsTheContents() async throws {
        let contents = Data("the real contents\n".utf8)
        let wrong = Data(repeating: 0x42, count: 32).base64EncodedString()
        let (backend, server) = try await Self.backend(
            root: { _ in Self.ok(Self.listing(prefix: "")) },
            other: { request in
                if request.path == "/bkt/short.txt" {
                    return .truncate(body: contents, sent: 5, status: 200, headers: ["ETag": "\"e1\""])
                }
                if request.path == "/bkt/wrong.txt" {
                    return .reply(status: 200, headers: ["ETag": "\"e1\"", "x-amz-checksum-sha256": wrong], body: contents)
                }
                return .reply(status: 404, headers: [:], body: Data())
            })
        defer { server.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("s3-hostile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let short = folder.appendingPathComponent("short")
        let cut = await #expect(throws: FileProviderError.self) {
            try await backend.fetchContents(for: ItemIdentifier("short.txt"), version: nil, to: short, offset: 0, progress: nil)
        }
        #expect(cut?.code == .serverUnreachable || cut?.code == .corruptData, "\(cut?.message ?? "")")

        let checked = folder.appendingPathComponent("wrong")
        let mismatch = await #expect(throws: FileProviderError.self) {
            try await backend.fetchContents(for: ItemIdentifier("wrong.txt"), version: nil, to: checked, offset: 0, progress: nil)
        }
        #expect(mismatch?.code == .corruptData)
        #expect(mismatch?.message.contains("x-amz-checksum-sha256") == true, "\(mismatch?.message ?? "")")
    }
}

/// Connection options that give up fast (the hostile server's faults are not worth waiting for).
enum HTTPOptionsForTests {
    static let quick = HTTPOptions(connectTimeout: 5, timeout: 5, connections: 2, retries: 1)
}
