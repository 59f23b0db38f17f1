import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing
import WebDAVAdapter

/// The Nextcloud emulation the suites share (`NextcloudDAVServer`, an emulation of the dialect,
/// not Nextcloud), started on first use off the cooperative pool; each check gets a fresh folder.
enum SharedNextcloud {
    private static let startup = Task { try await offThePool { try NextcloudDAVServer() } }

    /// - Throws: why the emulation could not be started.
    static func server() async throws -> NextcloudDAVServer { try await startup.value }

    /// A `--vendor nextcloud` backend over a fresh, empty collection of the shared server; files
    /// over 4 KiB go up in chunks.
    static func backend() async throws -> WebDAVBackend {
        let server = try await server()
        return try await WebDAVBackend(url: try server.makeFolder(), vendor: .nextcloud, chunkSize: 4096)
    }
}

@Suite("BackendConformance against the Nextcloud emulation (--vendor nextcloud)")
struct NextcloudConformanceTests {
    static let webdav = BackendConformance(makeBackend: { try await SharedNextcloud.backend() })

    @Test("WebDAVBackend", arguments: BackendConformance.checkNames)
    func conformance(_ name: String) async throws {
        try await Self.webdav.run(name)
    }
}

@Suite("WebDAV --vendor nextcloud")
struct NextcloudTests {
    /// A `nextcloud` WebDAV domain named `nc` over `url`, its state in `scratch/home` (the
    /// caller removes `scratch`): the manager, the domain's controller and the home.
    static func domain(url: String, in scratch: URL) async throws -> (ProviderManager, DomainController, URL) {
        let home = scratch.appendingPathComponent("home")
        let manager = try ProviderManager(home: home, registry: BackendRegistry([WebDAVBackend.descriptor]))
        try await manager.addDomain(name: "nc", kind: "webdav", options: ["url": url, "vendor": "nextcloud"])
        return (manager, try await manager.controller(for: "nc"), home)
    }

    static func upload(_ data: Data) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-nc-\(UUID().uuidString)")
        try data.write(to: url)
        return url
    }

    /// The code of the error `body` throws; `nil` when it succeeds.
    static func errorCode(_ body: () async throws -> Void) async -> FileProviderError.Code? {
        do {
            try await body()
            return nil
        } catch let error as FileProviderError {
            return error.code
        } catch {
            return nil
        }
    }

    static func fetch(_ backend: WebDAVBackend, _ item: Item) async throws -> Data {
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-nc-get-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        _ = try await backend.fetchContents(for: item.identifier, version: item.version, to: destination, offset: 0, progress: nil)
        return try Data(contentsOf: destination)
    }

    @Test func identifiersAreFileIDsAndSurviveAMoveMadeOnTheServer() async throws {
        let server = try await SharedNextcloud.server()
        let url = try server.makeFolder()
        let backend = try await WebDAVBackend(url: url, vendor: .nextcloud)
        #expect(!backend.capabilities.identifiersArePathDerived)
        let folder = try await backend.createItem(
            basedOn: Item(identifier: ItemIdentifier("t1"), parentIdentifier: .rootContainer, filename: "docs", kind: .folder),
            fields: [], contents: nil, options: []
        ).item
        let source = try Self.upload(Data("hello".utf8))
        defer { try? FileManager.default.removeItem(at: source) }
        let file = try await backend.createItem(
            basedOn: Item(identifier: ItemIdentifier("t2"), parentIdentifier: folder.identifier, filename: "a.txt", kind: .file),
            fields: [], contents: source, options: []
        ).item
        #expect(file.identifier.rawValue.hasPrefix("fileid-"))
        #expect(file.parentIdentifier == folder.identifier)

        // Another client (path-addressed) renames the folder and moves the file out of it.
        let other = try await WebDAVBackend(url: url)
        let otherFolder = try await other.item(for: ItemIdentifier("docs"))
        var renamed = otherFolder
        renamed.filename = "papers"
        _ = try await other.modifyItem(renamed, baseVersion: otherFolder.version, changedFields: [.filename], contents: nil, options: [])
        let otherFile = try await other.item(for: ItemIdentifier("papers/a.txt"))
        var moved = otherFile
        moved.parentIdentifier = .rootContainer
        moved.filename = "b.txt"
        _ = try await other.modifyItem(
            moved, baseVersion: otherFile.version, changedFields: [.filename, .parentItemIdentifier], contents: nil, options: [])
        await other.close()

        // The same identifiers, at their new places: for this backend (its places are stale)
        // and for a fresh one (which has seen nothing yet).
        let fresh = try await WebDAVBackend(url: url, vendor: .nextcloud)
        for candidate in [backend, fresh] {
            let now = try await candidate.item(for: file.identifier)
            #expect(now.filename == "b.txt")
            #expect(now.parentIdentifier == .rootContainer)
            #expect(try await Self.fetch(candidate, now) == Data("hello".utf8))
            let papers = try await candidate.enumerateItems(in: folder.identifier, startingAt: .initialPageSortedByName)
            #expect(papers.items.isEmpty)
            #expect(try await candidate.item(for: folder.identifier).filename == "papers")
        }
        await backend.close()
        await fresh.close()
    }

    /// Through the engine: a file moved on the server keeps its identifier, so the replica
    /// moves it with its downloaded contents instead of deleting it and listing a new one.
    @Test func theEngineSeesAMoveOnTheServerAsAMove() async throws {
        let server = try await SharedNextcloud.server()
        let url = try server.makeFolder()
        let setup = try await WebDAVBackend(url: url)
        let source = try Self.upload(Data("moved, not copied".utf8))
        defer { try? FileManager.default.removeItem(at: source) }
        let docs = try await setup.createItem(
            basedOn: Item(identifier: ItemIdentifier("docs"), parentIdentifier: .rootContainer, filename: "docs", kind: .folder),
            fields: [], contents: nil, options: []
        ).item
        _ = try await setup.createItem(
            basedOn: Item(identifier: ItemIdentifier("docs/a.txt"), parentIdentifier: docs.identifier, filename: "a.txt", kind: .file),
            fields: [], contents: source, options: [])

        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-nc-engine-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (manager, controller, home) = try await NextcloudTests.domain(url: url, in: scratch)
        _ = try await controller.sync()
        let outcomes = await controller.materialize(paths: ["docs/a.txt"], recursive: false)
        #expect(outcomes.allSatisfy { $0.error == nil })
        let before = try #require(try controller.list(at: "docs", recursive: false).first)

        // Another client moves it on the server.
        let file = try await setup.item(for: ItemIdentifier("docs/a.txt"))
        var moved = file
        moved.parentIdentifier = .rootContainer
        moved.filename = "b.txt"
        _ = try await setup.modifyItem(
            moved, baseVersion: file.version, changedFields: [.filename, .parentItemIdentifier], contents: nil, options: [])
        await setup.close()

        _ = try await controller.sync()
        let replica = home.appendingPathComponent("domains/nc")
        let after = try #require(try controller.list(at: "", recursive: false).first { $0.path == "b.txt" })
        #expect(after.identifier == before.identifier)
        #expect(after.state == .materialized)
        #expect(try String(contentsOf: replica.appendingPathComponent("b.txt"), encoding: .utf8) == "moved, not copied")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("docs/a.txt").path))
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("docs/a.txt.placeholder").path))
        await manager.close()
    }

    @Test func uploadsSendTheirSHA1AndDownloadsAreChecked() async throws {
        let data = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let source = try Self.upload(data)
        defer { try? FileManager.default.removeItem(at: source) }
        let server = try await SharedNextcloud.server()
        let url = try server.makeFolder()
        let backend = try await WebDAVBackend(url: url, vendor: .nextcloud)
        let template = Item(identifier: ItemIdentifier("t"), parentIdentifier: .rootContainer, filename: "blob", kind: .file)
        // The emulation refuses an upload whose OC-Checksum does not match and keeps the one given.
        let item = try await backend.createItem(basedOn: template, fields: [], contents: source, options: []).item
        #expect(try await Self.fetch(backend, item) == data)
        await backend.close()

        // What is sent: the SHA-1 of the file (checked against a digest made by sha1sum).
        let digest = try ChildProcess.capture("/usr/bin/sha1sum", [source.path])
        let expected = String(decoding: digest.output.prefix(40), as: UTF8.self)
        let scripted = try ScriptedDAV.server { request in
            if request.method == "PUT" { return .reply(status: 201, headers: [:], body: Data()) }
            if request.method == "PROPFIND", request.path == "/dav/blob" {
                return ScriptedDAV.propfindOf(
                    ScriptedDAV.Entry(
                        href: "/dav/blob",
                        props:
                            "<d:resourcetype/><d:getcontentlength>\(data.count)</d:getcontentlength><d:getetag>\"e\"</d:getetag><oc:fileid xmlns:oc=\"http://owncloud.org/ns\">7</oc:fileid>"
                    ))
            }
            return ScriptedDAV().answer(request) ?? .reply(status: 404, headers: [:], body: Data())
        }
        defer { scripted.stop() }
        let sender = try await WebDAVBackend(url: scripted.url + "/dav", vendor: .owncloud)
        let sent = try await sender.createItem(basedOn: template, fields: [], contents: source, options: []).item
        #expect(sent.identifier == ItemIdentifier("fileid-7"))
        #expect(scripted.puts.last?.headers["oc-checksum"] == "SHA1:" + expected)
        await sender.close()
    }

    /// Nextcloud is sent the file's SHA-256 (`OC-Checksum: SHA256:<hex>`, checked against
    /// sha256sum), in one `PUT` and on a chunked upload's `MOVE`; the checksum it gives back
    /// with the file becomes the item's `contentHash`.
    @Test func uploadsSendTheirSHA256ToNextcloud() async throws {
        let server = try await offThePool { try NextcloudDAVServer() }
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: try server.makeFolder(), vendor: .nextcloud, chunkSize: 65536)
        for (name, size) in [("small.bin", 1000), ("chunked.bin", 200_000)] {
            let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) })
            let source = try Self.upload(data)
            defer { try? FileManager.default.removeItem(at: source) }
            let sum = try ChildProcess.capture("/usr/bin/sha256sum", [source.path])
            let expected = String(decoding: sum.output.prefix(64), as: UTF8.self)
            let template = Item(identifier: ItemIdentifier("t"), parentIdentifier: .rootContainer, filename: name, kind: .file)
            let item = try await backend.createItem(basedOn: template, fields: [], contents: source, options: []).item
            let received = server.receivedChecksums.filter { $0.path.hasSuffix("/" + name) }
            #expect(received.map(\.checksum) == ["SHA256:" + expected], "\(name): \(server.receivedChecksums)")
            let destination = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-nc-get-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: destination) }
            let fetched = try await backend.fetchContents(
                for: item.identifier, version: item.version, to: destination, offset: 0, progress: nil)
            #expect(fetched.contentHash == "sha256:" + expected)
            #expect(try Data(contentsOf: destination) == data)
        }
        await backend.close()
    }

    /// Through the engine: a download whose bytes do not match the `OC-Checksum: SHA256:` the
    /// server sends is refused (checked against the hash computed as the bytes were written),
    /// fetched once more, and never placed; the item's last error says why.
    @Test func theEngineRefusesADownloadThatDoesNotMatchItsSHA256() async throws {
        let server = try await offThePool { try NextcloudDAVServer(fault: .badChecksum) }
        defer { server.stop() }
        let url = try server.makeFolder()
        let setup = try await WebDAVBackend(url: url, vendor: .nextcloud)
        let source = try Self.upload(Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 3) }))
        defer { try? FileManager.default.removeItem(at: source) }
        _ = try await setup.createItem(
            basedOn: Item(identifier: ItemIdentifier("t"), parentIdentifier: .rootContainer, filename: "c.bin", kind: .file),
            fields: [], contents: source, options: [])
        await setup.close()
        #expect(server.receivedChecksums.last?.checksum.hasPrefix("SHA256:") == true)

        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("webdav-nc-sha256-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (manager, controller, home) = try await NextcloudTests.domain(url: url, in: scratch)
        _ = try await controller.sync()
        let outcomes = await controller.materialize(paths: ["c.bin"], recursive: false)
        let error = try #require(outcomes.first?.error)
        #expect(error.code == .corruptData, "\(error)")
        #expect(error.message.contains("store's hash"), "\(error)")
        let replica = home.appendingPathComponent("domains/nc")
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("c.bin").path), "never placed")
        let record = try #require(try controller.list(at: "", recursive: false).first { $0.path == "c.bin" })
        #expect(record.state == .placeholder)
        #expect(record.lastError?.contains("store's hash") == true, "\(String(describing: record.lastError))")
        await manager.close()
    }

    /// A file over the chunk size goes up in numbered chunks, assembled by a MOVE of `.file`
    /// that carries the conditions: a replace with a stale base version is refused, nothing is
    /// left in the uploads folder.
    @Test func largeFilesGoUpInChunks() async throws {
        // A server of its own: the shared one has other checks' uploads in progress.
        let server = try await offThePool { try NextcloudDAVServer() }
        defer { server.stop() }
        let url = try server.makeFolder()
        let name = URL(string: url)!.lastPathComponent
        let backend = try await WebDAVBackend(url: url, vendor: .nextcloud, chunkSize: 65536)
        let data = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) })
        let source = try Self.upload(data)
        defer { try? FileManager.default.removeItem(at: source) }
        let template = Item(identifier: ItemIdentifier("t"), parentIdentifier: .rootContainer, filename: "big file.bin", kind: .file)
        let item = try await backend.createItem(basedOn: template, fields: [], contents: source, options: []).item
        #expect(item.size == Int64(data.count))
        #expect(try Data(contentsOf: server.root.appendingPathComponent("\(name)/big file.bin")) == data)
        #expect(server.assembledUploads.contains { $0.path == "\(name)/big%20file.bin" && $0.chunks == 5 })
        // A second create of the name: If-None-Match on the MOVE refuses it.
        await #expect(throws: FileProviderError.self) {
            _ = try await backend.createItem(basedOn: template, fields: [], contents: source, options: [])
        }
        // A replace on the current version works; on the old one it is versionOutOfDate.
        let changed = try Self.upload(Data(data.reversed()))
        defer { try? FileManager.default.removeItem(at: changed) }
        let replaced = try await backend.modifyItem(
            item, baseVersion: item.version, changedFields: [.contents], contents: changed, options: []
        ).item
        #expect(replaced.identifier == item.identifier)
        #expect(try await Self.fetch(backend, replaced) == Data(data.reversed()))
        let stale = await Self.errorCode {
            _ = try await backend.modifyItem(item, baseVersion: item.version, changedFields: [.contents], contents: source, options: [])
        }
        #expect(stale == .versionOutOfDate)
        #expect((try FileManager.default.contentsOfDirectory(atPath: server.uploads.path)).isEmpty)
        await backend.close()
    }

    /// An upload whose bytes arrive changed is refused by the server with Sabre's `BadRequest`
    /// error body (as ownCloud answers), in one `PUT` and through the chunked upload's `MOVE`:
    /// `corruptData`, and nothing is stored.
    @Test func anUploadTheServerReceivedChangedIsCorruptData() async throws {
        let server = try await offThePool { try NextcloudDAVServer(fault: .corruptUpload) }
        defer { server.stop() }
        let url = try server.makeFolder()
        let name = URL(string: url)!.lastPathComponent
        let backend = try await WebDAVBackend(url: url, vendor: .nextcloud, chunkSize: 65536)
        for (filename, size) in [("small.txt", 1000), ("large.bin", 200_000)] {
            let source = try Self.upload(Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }))
            let template = Item(identifier: ItemIdentifier("t"), parentIdentifier: .rootContainer, filename: filename, kind: .file)
            var refusal: FileProviderError?
            do {
                _ = try await backend.createItem(basedOn: template, fields: [], contents: source, options: [])
            } catch {
                refusal = error
            }
            try? FileManager.default.removeItem(at: source)
            #expect(refusal?.code == .corruptData, "\(filename): \(String(describing: refusal))")
            #expect(refusal?.message.contains("OC-Checksum") == true, "\(filename): \(String(describing: refusal))")
            #expect(!FileManager.default.fileExists(atPath: server.root.appendingPathComponent("\(name)/\(filename)").path))
        }
        await backend.close()
    }

    /// A `SHA1:` checksum on `GET` (what ownCloud keeps) is checked by the adapter itself.
    @Test func aDownloadThatDoesNotMatchItsChecksumIsCorruptData() async throws {
        let server = try await offThePool { try NextcloudDAVServer(fault: .badChecksum) }
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: try server.makeFolder(), vendor: .owncloud)
        let source = try Self.upload(Data("contents".utf8))
        defer { try? FileManager.default.removeItem(at: source) }
        let item = try await backend.createItem(
            basedOn: Item(identifier: ItemIdentifier("t"), parentIdentifier: .rootContainer, filename: "c.txt", kind: .file),
            fields: [], contents: source, options: []
        ).item
        do {
            _ = try await Self.fetch(backend, item)
            Issue.record("a download that does not match its OC-Checksum was accepted")
        } catch let error as FileProviderError {
            #expect(error.code == .corruptData)
            #expect(error.message.contains("OC-Checksum"), "\(error)")
        }
        await backend.close()
    }

    @Test func hostileFileIDsAndChecksumsAreRefused() async throws {
        // The emulation's first listed entry has the oc:fileid "../../etc": refused, the others listed.
        let server = try await offThePool { try NextcloudDAVServer(fault: .badFileID) }
        defer { server.stop() }
        let url = try server.makeFolder()
        try Data("a".utf8).write(to: server.root.appendingPathComponent(URL(string: url)!.lastPathComponent + "/a.txt"))
        try Data("b".utf8).write(to: server.root.appendingPathComponent(URL(string: url)!.lastPathComponent + "/b.txt"))
        let backend = try await WebDAVBackend(url: url, vendor: .nextcloud)
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(page.items.map(\.filename) == ["b.txt"])
        #expect(page.refused.map(\.filename) == ["a.txt"])
        #expect(page.refused.first?.reason.contains("oc:fileid") == true)
        await backend.close()

        // Two entries with one oc:fileid: the second is refused; an OC-Checksum that is not 40 hex digits is corruptData.
        var dav = ScriptedDAV()
        let oc = "<oc:fileid xmlns:oc=\"http://owncloud.org/ns\">42</oc:fileid>"
        dav.entries = [ScriptedDAV.file("one", size: 1), ScriptedDAV.file("two", size: 1)].map { entry in
            var entry = entry
            entry.props += oc
            return entry
        }
        let scripted = try ScriptedDAV.server { request in
            if request.method == "GET" {
                return .reply(
                    status: 200, headers: ["ETag": "\"e1\"", "OC-Checksum": "SHA1:../../etc MD5:00"], body: Data("x".utf8))
            }
            return dav.answer(request) ?? .reply(status: 404, headers: [:], body: Data())
        }
        defer { scripted.stop() }
        let other = try await WebDAVBackend(url: scripted.url + "/dav", vendor: .nextcloud)
        let listed = try await other.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(listed.items.map(\.filename) == ["one"])
        #expect(listed.refused.map(\.filename) == ["two"])
        let one = try #require(listed.items.first)
        do {
            _ = try await Self.fetch(other, one)
            Issue.record("a malformed OC-Checksum was accepted")
        } catch let error as FileProviderError {
            #expect(error.code == .corruptData, "\(error)")
        }
        await other.close()

        // A SHA256 value that is not 64 hex digits: corruptData too.
        let sha256Server = try ScriptedDAV.server { request in
            if request.method == "GET" {
                return .reply(status: 200, headers: ["ETag": "\"e1\"", "OC-Checksum": "SHA256:../../etc"], body: Data("x".utf8))
            }
            return dav.answer(request) ?? .reply(status: 404, headers: [:], body: Data())
        }
        defer { sha256Server.stop() }
        let third = try await WebDAVBackend(url: sha256Server.url + "/dav", vendor: .nextcloud)
        let first = try #require(try await third.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName).items.first)
        do {
            _ = try await Self.fetch(third, first)
            Issue.record("a malformed SHA256 OC-Checksum was accepted")
        } catch let error as FileProviderError {
            #expect(error.code == .corruptData && error.message.contains("OC-Checksum"), "\(error)")
        }
        await third.close()
    }

    @Test func theVendorOptionIsChecked() async throws {
        await #expect(throws: FileProviderError.self) {
            _ = try await WebDAVBackend.descriptor.factory(BackendConfiguration(["url": "http://127.0.0.1:1/dav", "vendor": "dropbox"]))
        }
        #expect(WebDAVBackend.descriptor.options.contains { $0.name == "vendor" && $0.defaultValue == "other" })
    }
}
