import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Synchronization
import Testing

@testable import S3Adapter

/// The folders a backend saw a moment ago (``KnownFolders``): new files in a folder check it
/// once, and a folder deleted or moved through the backend is never trusted afterwards.
@Suite("S3 known folders")
struct KnownFoldersTests {
    static func folder(_ name: String, in parent: ItemIdentifier = .rootContainer) -> Item {
        Item.template(identifier: ItemIdentifier("tmp-\(name)"), parent: parent, filename: name, kind: .folder)
    }

    static func file(_ name: String, in parent: ItemIdentifier, size: Int) -> Item {
        Item.template(identifier: ItemIdentifier("tmp-\(name)"), parent: parent, filename: name, kind: .file, size: Int64(size))
    }

    /// Creates `a.txt`, `b.txt` and `c.txt` in the root from `contents` (10 bytes). Returns how
    /// many requests the server had seen before, and when they started.
    static func createThreeFiles(from contents: URL, with backend: S3Backend, on server: FaultServer) async throws -> (
        before: Int, started: ContinuousClock.Instant
    ) {
        let before = server.requests.count
        let started = ContinuousClock.now
        for name in ["a.txt", "b.txt", "c.txt"] {
            _ = try await backend.createItem(
                basedOn: Self.file(name, in: .rootContainer, size: 10), fields: [.contents], contents: contents, options: [])
        }
        return (before, started)
    }

    @Test func aFolderDeletedOrMovedHereIsNoLongerTrustedForNewFiles() async throws {
        let backend = try await SharedSeaweedFS.backend()
        let scratch = try MultipartTests.Scratch()
        let (contents, _) = try scratch.file("small", size: 100, seed: 3)
        let made = try await backend.createItem(basedOn: Self.folder("a"), fields: [], contents: nil, options: [])
        let inside = try await backend.createItem(
            basedOn: Self.folder("b", in: made.item.identifier), fields: [], contents: nil, options: [])
        _ = try await backend.createItem(
            basedOn: Self.file("x", in: made.item.identifier, size: 100), fields: [.contents], contents: contents, options: [])
        _ = try await backend.createItem(
            basedOn: Self.file("y", in: inside.item.identifier, size: 100), fields: [.contents], contents: contents, options: [])
        // (The folders are remembered for 5 s only: on a loaded machine they may be forgotten
        // already, and the checks below then hold by the listings alone.)

        // Moved away: the old folder and the one below it are gone, and new files there refused.
        var renamed = made.item
        renamed.filename = "c"
        let moved = try await backend.modifyItem(
            renamed, baseVersion: made.item.version, changedFields: [.filename], contents: nil, options: [])
        for parent in [made.item.identifier, inside.item.identifier] {
            await #expect(throws: FileProviderError.self) {
                _ = try await backend.createItem(
                    basedOn: Self.file("z", in: parent, size: 100), fields: [.contents], contents: contents, options: [])
            }
        }
        #expect(try await backend.item(at: ItemPath(components: ["a"])) == nil, "creating in the old folder made it again")

        // Deleted: the same.
        try await backend.deleteItem(identifier: moved.item.identifier, baseVersion: moved.item.version, options: [.recursive])
        do {
            _ = try await backend.createItem(
                basedOn: Self.file("w", in: moved.item.identifier, size: 100), fields: [.contents], contents: contents, options: [])
            Issue.record("a file was created in a folder this backend deleted")
        } catch {
            #expect(error.code == .noSuchItem, "\(error)")
        }
        #expect(try await backend.item(at: ItemPath(components: ["c"])) == nil)
    }

    /// New files in one folder: one listing of the folder tells which names its folders have;
    /// no listing per file. A folder made here is a name taken at once; one deleted here frees it.
    @Test func newFilesAreCheckedAgainstTheFoldersOfOneListing() async throws {
        let markers = Mutex<[String]>([])
        let server = try FaultServer { request in
            if request.method == "PUT" && request.path.hasSuffix("/") {
                markers.withLock { $0.append(String(request.path.dropFirst("/bkt/".count))) }
            }
            let conditional = request.headers.keys.contains { $0.lowercased() == "if-match" }
            if request.method == "PUT" && conditional && request.path.contains("fileprovider-probe") {
                return .reply(status: 412, headers: [:], body: Data())
            }
            if request.path == "/bkt" && request.query["list-type"] == "2" {
                let prefix = request.query["prefix"] ?? ""
                if prefix.isEmpty {
                    return HostileServerTests.ok(
                        HostileServerTests.listing(
                            prefix: "", contents: [("old.txt", "1")], prefixes: ["taken/"] + markers.withLock { $0 }))
                }
                return HostileServerTests.ok(HostileServerTests.listing(prefix: prefix))
            }
            if request.method == "PUT" || request.method == "DELETE" {
                return .reply(status: request.method == "PUT" ? 200 : 204, headers: ["ETag": "\"e1\""], body: Data())
            }
            return .reply(status: 404, headers: [:], body: Data())
        }
        defer { server.stop() }
        let backend = try await S3Backend(
            endpoint: server.url, bucket: "bkt", pathStyle: true, credentials: ("key", "secret", nil), http: HTTPOptionsForTests.quick)
        let scratch = try MultipartTests.Scratch()
        let (contents, _) = try scratch.file("small", size: 10, seed: 1)
        let (before, started) = try await Self.createThreeFiles(from: contents, with: backend, on: server)
        let taken = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(
                basedOn: Self.file("taken", in: .rootContainer, size: 10), fields: [.contents], contents: contents, options: [])
        }
        #expect(taken?.code == .filenameCollision, "\(String(describing: taken))")
        let listings = server.requests.dropFirst(before).filter { $0.query["list-type"] == "2" }
        // (Folders are remembered for 5 s: on a machine so loaded that the four files took
        // longer, the folder was listed again, and the count is not checked.)
        let quick = ContinuousClock.now - started < KnownFolders.lifetime
        if quick { #expect(listings.map { $0.query["prefix"] ?? "" } == [""], "one listing of the folder, none per file") }
        #expect(!listings.contains { ($0.query["prefix"] ?? "").hasSuffix(".txt/") }, "no listing of a file's name as a folder")

        // A folder made here takes its name at once; deleted here, the name is free again.
        let made = try await backend.createItem(basedOn: Self.folder("new"), fields: [], contents: nil, options: [])
        let clash = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(
                basedOn: Self.file("new", in: .rootContainer, size: 10), fields: [.contents], contents: contents, options: [])
        }
        #expect(clash?.code == .filenameCollision, "\(String(describing: clash))")
        _ = made

        // The names a folder's entry holds, as folders are made and forgotten in it.
        let known = KnownFolders()
        known.insert("p/", subfolders: ["taken"])
        known.addSubfolder("new", in: "p/")
        #expect(known.subfolders(of: "p/") == ["taken", "new"])
        known.forget(below: "p/new/")
        #expect(known.subfolders(of: "p/") == ["taken"])
        known.insert("p/")  // seen again by a listing of one key: the names are kept
        #expect(known.subfolders(of: "p/") == ["taken"])
        #expect(KnownFolders.parentAndName(of: "a/b/") == ("a/", "b"))
        #expect(KnownFolders.parentAndName(of: "b/") == ("", "b"))
    }

    /// A folder with more entries than one listing page (here the root) is listed once, not
    /// once per new file: each file's name is then checked with a listing of one key.
    @Test func aFolderOfMoreThanAPageIsListedOnceForNewFiles() async throws {
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "", contents: [("old.txt", "1")], next: "more")) },
            other: { request in
                if request.method == "PUT" && !request.path.contains("fileprovider-probe") {
                    return .reply(status: 200, headers: ["ETag": "\"e1\""], body: Data())
                }
                return .reply(status: 404, headers: [:], body: Data())
            })
        defer { server.stop() }
        let scratch = try MultipartTests.Scratch()
        let (contents, _) = try scratch.file("small", size: 10, seed: 1)
        let (before, started) = try await Self.createThreeFiles(from: contents, with: backend, on: server)
        let listings = server.requests.dropFirst(before).filter { $0.query["list-type"] == "2" }
        let pages = listings.filter { $0.query["max-keys"] != "1" }
        // (Folders are remembered for 5 s: on a machine so loaded that the three files took
        // longer, the root was listed again, and the count is not checked.)
        if ContinuousClock.now - started < KnownFolders.lifetime {
            #expect(pages.count == 1, "one page of the root, not one per file: \(pages.map(\.query))")
        }
        #expect(
            listings.filter { $0.query["max-keys"] == "1" }.map { $0.query["prefix"] ?? "" } == ["a.txt/", "b.txt/", "c.txt/"],
            "each name checked for a folder")
    }

    @Test func theBackendAsksForAsManyTransfersAsItHasConnections() async throws {
        let (cluster, bucket) = try await SharedSeaweedFS.cluster()
        var http = HTTPOptions()
        http.connections = 16
        let backend = try await S3Backend(
            endpoint: cluster.endpoint, bucket: bucket, prefix: "store-\(UUID().uuidString)", region: cluster.region,
            pathStyle: true, credentials: (cluster.accessKey, cluster.secretKey, nil), http: http)
        #expect(backend.capabilities.concurrentTransfers == 16)
    }
}
