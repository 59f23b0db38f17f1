import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

@testable import WebDAVAdapter

/// A server the suites of one kind share, started on first use off the cooperative pool; each
/// check gets a fresh folder of it.
final class SharedDAV<Server: LoopbackDAVServer>: Sendable {
    private let startup: Task<Server, any Error>

    init(_ make: @escaping @Sendable () throws -> Server) { startup = Task { try await offThePool(make) } }

    /// - Throws: why the server could not be started.
    func server() async throws -> Server { try await startup.value }

    /// A backend over a fresh, empty collection of the server.
    func backend() async throws -> WebDAVBackend {
        let server = try await server()
        return try await WebDAVBackend(url: try server.makeFolder())
    }
}

/// The servers people run beside Apache and rclone (issue #36), started by the tests.
enum SharedServers {
    static let nginx = SharedDAV { try NginxDAVServer() }
    static let lighttpd = SharedDAV { try LighttpdDAVServer() }
    static let wsgidav = SharedDAV { try WsgiDAVServer() }

    /// A second backend over the store of the one given.
    static let sameStore: BackendConformance.SameStore = { first in
        try await WebDAVBackend(url: try #require(first as? WebDAVBackend).baseURL)
    }
}

/// nginx 1.22 with dav-ext: no `getetag` in listings (versions are stamps of date and size),
/// `If-Match` and `If-None-Match` ignored on writes (checked by the adapter just before).
@Suite("BackendConformance against nginx + dav-ext")
struct NginxConformanceTests {
    static let webdav = BackendConformance(
        makeBackend: { try await SharedServers.nginx.backend() },
        limitations: .init(cannot: [
            "moveIntoMissingFolderThrowsNoSuchItem":
                "its dav module makes the missing folders of a MOVE's destination, so the move succeeds",
            "contentVersionChangesWithContents":
                "its listings have no getetag: versions are date-and-size stamps in whole seconds, and the check's same-size edit, made within the same second, keeps the stamp",
            "partialReadOfAChangedVersionThrows":
                "its listings have no getetag: versions are date-and-size stamps in whole seconds, and the check's same-size edit, made within the same second, keeps the stamp",
        ]),
        sameStore: SharedServers.sameStore)

    @Test("WebDAVBackend", arguments: webdav.applicableCheckNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }
}

/// lighttpd 1.4 with mod_webdav (and mod_staticfile, for ETags on `GET`).
@Suite("BackendConformance against lighttpd mod_webdav")
struct LighttpdConformanceTests {
    static let webdav = BackendConformance(
        makeBackend: { try await SharedServers.lighttpd.backend() },
        limitations: .init(cannot: [
            "nameWithNewline": "it refuses a URL with a control character (400 Bad Request)",
            "nameOf255Bytes":
                "it writes an upload to a temporary file named after the file plus a suffix, which a 255-byte name leaves over the file system's limit (500)",
        ]),
        sameStore: SharedServers.sameStore)

    @Test("WebDAVBackend", arguments: webdav.applicableCheckNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }
}

/// wsgidav 4 (cheroot): `getetag` unquoted in listings, quoted on `GET`.
@Suite("BackendConformance against wsgidav")
struct WsgiDAVConformanceTests {
    static let webdav = BackendConformance(
        makeBackend: { try await SharedServers.wsgidav.backend() },
        limitations: .init(cannot: [
            "partialReadOfAChangedVersionThrows":
                "its ETag is inode-mtime-size with the time in whole seconds: a change of the same size within the same second keeps the ETag",
            "contentVersionChangesWithContents":
                "its ETag is inode-mtime-size with the time in whole seconds: the check's same-size edit, made within the same second, keeps the ETag",
        ]),
        sameStore: SharedServers.sameStore)

    @Test("WebDAVBackend", arguments: webdav.applicableCheckNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }
}

@Suite("WebDAV versions as servers give them")
struct VersionFormTests {
    @Test func entityTagsAreReadIntoOneForm() {
        #expect(EntityTag.parse("\"3-5f1c\"") == .tag(EntityTag(quoted: "\"3-5f1c\"", isWeak: false)))
        #expect(EntityTag.parse("W/\"3-5f1c\"") == .tag(EntityTag(quoted: "\"3-5f1c\"", isWeak: true)))
        #expect(EntityTag.parse("3-5f1c") == .tag(EntityTag(quoted: "\"3-5f1c\"", isWeak: false)))
        #expect(EntityTag.parse("W/3-5f1c") == .tag(EntityTag(quoted: "\"3-5f1c\"", isWeak: true)))
        #expect(EntityTag.parse("  \"a\" ") == .tag(EntityTag(quoted: "\"a\"", isWeak: false)))
        #expect(EntityTag.parse(nil) == EntityTag.Parsed.none)
        #expect(EntityTag.parse("") == EntityTag.Parsed.none)
        #expect(EntityTag.parse("\"\"") == EntityTag.Parsed.none)
        for bad in ["a\"b", "a b", "\u{7}", "é", String(repeating: "a", count: 126)] {
            guard case .invalid = EntityTag.parse(bad) else {
                Issue.record("\(bad.debugDescription) was taken")
                continue
            }
        }
        #expect(DAVVersion(DAVVersion.etag("\"x\"").content) == .etag("\"x\""))
        #expect(DAVVersion(DAVVersion.stamp(seconds: 1_700_000_000, size: 12).content) == .stamp(seconds: 1_700_000_000, size: 12))
        #expect(DAVVersion(Data("folder".utf8)) == nil)
        // A version stored from wsgidav's unquoted getetag before ETags had one form.
        #expect(DAVVersion(Data("e16228881-1796424990-5".utf8)) == .etag("\"16228881-1796424990-5\""))
    }

    static func fetch(_ backend: WebDAVBackend, _ item: Item, version: ItemVersion?) async throws -> (Item, Data) {
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-get-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let fetched = try await backend.fetchContents(
            for: item.identifier, version: version, to: destination, offset: 0, progress: nil)
        return (fetched, try Data(contentsOf: destination))
    }

    /// wsgidav lists `getetag` unquoted and sends it quoted on `GET`: both are one version.
    @Test func wsgidavListingAndGetGiveOneVersion() async throws {
        let server = try await SharedServers.wsgidav.server()
        let url = try server.makeFolder()
        let name = String(url.split(separator: "/").last!)
        try server.writeFile("\(name)/a.txt", Data("hello".utf8))
        let backend = try await WebDAVBackend(url: url)
        let listed = try #require(try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName).items.first)
        #expect(WebDAVBackend.etag(of: listed.version)?.hasPrefix("\"") == true)
        let (fetched, data) = try await Self.fetch(backend, listed, version: listed.version)
        #expect(data == Data("hello".utf8))
        #expect(fetched.version == listed.version)
        let (unasked, _) = try await Self.fetch(backend, listed, version: nil)
        #expect(unasked.version == listed.version)
        #expect(try await backend.item(for: listed.identifier).version == listed.version)
        await backend.close()
    }

    /// nginx's listings give no ETag: a file's version is its date and size, from a listing and
    /// a `GET` alike (though the `GET` has an ETag), and writes check it just before.
    @Test func nginxFilesGetStampsAndWritesCheckThem() async throws {
        let server = try await SharedServers.nginx.server()
        let url = try server.makeFolder()
        let name = String(url.split(separator: "/").last!)
        try server.writeFile("\(name)/a.txt", Data("hello".utf8))
        let backend = try await WebDAVBackend(url: url)
        let listed = try #require(try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName).items.first)
        #expect(WebDAVBackend.isStamp(listed.version))
        let (fetched, data) = try await Self.fetch(backend, listed, version: listed.version)
        #expect(data == Data("hello".utf8) && fetched.version == listed.version)
        // A new backend downloads before any listing: it learns the form first.
        let fresh = try await WebDAVBackend(url: url)
        let (unasked, _) = try await Self.fetch(fresh, listed, version: nil)
        #expect(unasked.version == listed.version)
        await fresh.close()

        let source = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-put-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: source) }
        try Data("hello, world".utf8).write(to: source)
        let written = try await backend.modifyItem(
            listed, baseVersion: listed.version, changedFields: [.contents], contents: source, options: []
        ).item
        #expect(written.size == 12 && written.version != listed.version)
        // Another writer changes the size: a write from the old version is refused.
        try server.writeFile("\(name)/a.txt", Data("another writer".utf8))
        await #expect(throws: FileProviderError.self) {
            _ = try await backend.modifyItem(
                written, baseVersion: written.version, changedFields: [.contents], contents: source, options: [])
        }
        #expect(try Data(contentsOf: server.root.appendingPathComponent("\(name)/a.txt")) == Data("another writer".utf8))
        await backend.close()
    }
}

@Suite("WebDAV probe of conditional writes")
struct ProbeMemoryTests {
    /// The probe (a `PUT` of `.fileprovider-probe-<UUID>`) runs at the first open of a
    /// collection only; a memory that cannot be read is ignored and the server probed again.
    @Test func theProbeRunsOncePerCollection() async throws {
        let server = try await SharedServers.nginx.server()
        let url = try server.makeFolder()
        let name = String(url.split(separator: "/").last!)
        let memory = try TemporaryFolder("webdav-probe")
        defer { memory.remove() }
        func probes() async -> Int {
            let mark = server.mark()
            _ = await eventually(timeout: 10) { server.requests().contains { $0.path == mark } }
            // Only this collection's: other tests probe their own collections of the server meanwhile.
            return server.requests().filter { $0.method == "PUT" && $0.path.hasPrefix("/\(name)/.fileprovider-probe-") }.count
        }
        let before = await probes()
        for _ in 0..<3 { try await WebDAVBackend(url: url, probeFolder: memory.path).close() }
        #expect(await probes() == before + 1, "\(server.requests().suffix(12))")
        let entry = ProbeMemory(folder: memory.path).file(url: url, user: nil)
        #expect(ProbeMemory(folder: memory.path).recall(url: url, user: nil) == false)
        try Data("not json".utf8).write(to: URL(fileURLWithPath: entry))
        try await WebDAVBackend(url: url, probeFolder: memory.path).close()
        #expect(await probes() == before + 2)
        #expect(ProbeMemory(folder: memory.path).recall(url: url, user: nil) == false)
        // Another user of the same URL is another entry.
        #expect(ProbeMemory(folder: memory.path).recall(url: url, user: "alice") == nil)
    }
}

extension ProbeMemoryTests {
    /// The memory keeps at most `maximumEntries`: the least recently written go.
    @Test func theMemoryKeepsTheNewestEntries() throws {
        let folder = try TemporaryFolder("webdav-probe-prune")
        defer { folder.remove() }
        let old = Date(timeIntervalSinceNow: -86_400)
        for index in 0..<(ProbeMemory.maximumEntries + 5) {
            let path = folder.url("old-\(index).json")
            try Data("{}".utf8).write(to: path)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path.path)
        }
        let memory = ProbeMemory(folder: folder.path)
        memory.remember(true, url: "http://127.0.0.1:1/dav", user: nil)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(names.count == ProbeMemory.maximumEntries)
        #expect(memory.recall(url: "http://127.0.0.1:1/dav", user: nil) == true)
    }
}

@Suite("WebDAV two-way sync against each server")
struct ServerTwoWaySyncTests {
    static func server(_ kind: String) async throws -> LoopbackDAVServer {
        switch kind {
        case "nginx": try await SharedServers.nginx.server()
        case "lighttpd": try await SharedServers.lighttpd.server()
        case "wsgidav": try await SharedServers.wsgidav.server()
        case "apache": try await SharedApache.server()
        default: try await SharedRclone.server()
        }
    }

    /// The transfers (`GET`, `PUT`) in `collection` a server logged while `body` ran; `nil` for
    /// a server without a request log.
    static func transfers(on server: LoopbackDAVServer, in collection: String, during body: () async throws -> Void)
        async throws -> [String]?
    {
        guard let logging = server as? LoggingDAVServer else {
            try await body()
            return nil
        }
        func settled() async -> Int {
            let mark = logging.mark()
            let logged = await eventually(timeout: 10) { logging.requests().contains { $0.path == mark } }
            #expect(
                logged,
                "the server did not log \(mark): \(logging.requests().suffix(3)) \((try? String(contentsOf: logging.requestLog, encoding: .utf8))?.suffix(300) ?? "no log")"
            )
            return logging.requests().count
        }
        let before = await settled()
        try await body()
        _ = await settled()
        return logging.requests().dropFirst(before).filter {
            // Only this collection's: other tests use their own collections of the server meanwhile.
            ($0.method == "GET" || $0.method == "PUT") && $0.path.hasPrefix("/\(collection)/")
        }.map {
            "\($0.method) \($0.path)"
        }
    }

    /// An edit in the replica replaces the server's file (no conflicted copy), a new file and
    /// folder go up once, an idle sync afterwards transfers nothing, a rename and a deletion
    /// reach the server; opened again, the backend does not probe the server again.
    @Test(arguments: ["nginx", "lighttpd", "wsgidav", "apache", "rclone"])
    func editRenameDeleteAndIdle(_ kind: String) async throws {
        let server = try await Self.server(kind)
        let url = try server.makeFolder()
        let name = String(url.split(separator: "/").last!)
        let store = server.root.appendingPathComponent(name)
        _ = try server.makeFolder("\(name)/docs")
        try server.writeFile("\(name)/hello.txt", Data("hello".utf8))
        try server.writeFile("\(name)/docs/a.txt", Data("a".utf8))
        let home = try TemporaryFolder("webdav-twoway")
        defer { home.remove() }
        let manager = try ProviderManager(home: home.url, registry: BackendRegistry([WebDAVBackend.descriptor]))
        try await manager.addDomain(name: "dav", kind: "webdav", options: ["url": url])
        let controller = try await manager.controller(for: "dav")
        _ = try await controller.sync()
        let materialized = await controller.materialize(paths: ["hello.txt", "docs/a.txt"], recursive: false)
        #expect(materialized.allSatisfy { $0.error == nil }, "\(materialized)")
        let replica = home.url.appendingPathComponent("domains/dav")
        #expect(FileManager.default.contents(atPath: replica.appendingPathComponent("hello.txt").path) == Data("hello".utf8))

        // An idle sync: nothing moves.
        let idle = try await Self.transfers(on: server, in: name) {
            let report = try await controller.sync()
            #expect(report.downloaded == 0 && report.uploaded == 0 && report.updated == 0, "\(report)")
        }
        #expect(idle?.isEmpty ?? true, "\(idle ?? [])")

        // An edit replaces the server's file; a new file and folder go up.
        try Data("hello, edited".utf8).write(to: replica.appendingPathComponent("hello.txt"))
        try FileManager.default.createDirectory(at: replica.appendingPathComponent("new"), withIntermediateDirectories: true)
        try Data("new".utf8).write(to: replica.appendingPathComponent("new/made.txt"))
        let edit = try await controller.sync()
        #expect(edit.uploaded >= 2 && edit.conflicts == 0 && edit.unsent == 0, "\(edit)")
        #expect(try Data(contentsOf: store.appendingPathComponent("hello.txt")) == Data("hello, edited".utf8))
        #expect(try Data(contentsOf: store.appendingPathComponent("new/made.txt")) == Data("new".utf8))
        let names = try FileManager.default.contentsOfDirectory(atPath: store.path).sorted()
        #expect(names == ["docs", "hello.txt", "new"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: replica.path).filter { $0.contains("conflicted") }.isEmpty)

        // Idle again after the upload.
        let after = try await Self.transfers(on: server, in: name) {
            let report = try await controller.sync()
            #expect(report.downloaded == 0 && report.uploaded == 0 && report.updated == 0, "\(report)")
        }
        #expect(after?.isEmpty ?? true, "\(after ?? [])")

        // A rename and a deletion reach the server.
        try FileManager.default.moveItem(
            at: replica.appendingPathComponent("docs/a.txt"), to: replica.appendingPathComponent("docs/b.txt"))
        try FileManager.default.removeItem(at: replica.appendingPathComponent("hello.txt"))
        let changes = try await controller.sync()
        #expect(changes.unsent == 0, "\(changes)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.appendingPathComponent("docs").path) == ["b.txt"])
        #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("hello.txt").path))
        let last = try await Self.transfers(on: server, in: name) {
            let report = try await controller.sync()
            #expect(report.downloaded == 0 && report.uploaded == 0, "\(report)")
        }
        #expect(last?.isEmpty ?? true, "\(last ?? [])")
        await manager.close()

        // As another process would: the backend opened again neither probes (its answer is
        // remembered) nor transfers anything at an idle sync.
        let reopened = try await Self.transfers(on: server, in: name) {
            let again = try ProviderManager(home: home.url, registry: BackendRegistry([WebDAVBackend.descriptor]))
            let report = try await again.controller(for: "dav").sync()
            #expect(report.downloaded == 0 && report.uploaded == 0, "\(report)")
            await again.close()
        }
        #expect(reopened?.isEmpty ?? true, "\(reopened ?? [])")
    }
}
