import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// The flat listing (`ListObjectsV2` without a delimiter, 1,000 keys a request) of a deep tree
/// gives the same items as the folder-by-folder walk with `delimiter=/`, on SeaweedFS and
/// moto, and says how long each took; a server that pages forever is stopped. The tree has
/// `S3_FLAT_LISTING_KEYS` files (2,000 by default; Docs/Adapters/S3.md has the numbers for
/// 10,000) in 10 × 10 × 5 folders.
@Suite("S3 flat listing")
struct FlatListingTests {
    static var keyCount: Int { Int(ProcessInfo.processInfo.environment["S3_FLAT_LISTING_KEYS"] ?? "") ?? 2000 }

    /// What a listing says of an item, to compare two listings.
    struct Seen: Hashable {
        var identifier: String
        var parent: String
        var kind: ItemKind
        var size: Int64
        var version: Data
    }

    static func seen(_ item: Item) -> Seen {
        Seen(
            identifier: item.identifier.rawValue, parent: item.parentIdentifier.rawValue, kind: item.kind, size: item.size,
            version: item.version.content)
    }

    /// Writes `count` small objects in `10 × 10 × 5` folders below the backend's prefix, eight
    /// at once; returns their keys' paths.
    static func fill(_ backend: S3Backend, count: Int) async throws {
        let perFolder = max(1, count / 500)
        let paths = (0..<count).map { index in
            let folder = index / perFolder
            return "d\(folder / 50)/e\(folder / 5 % 10)/f\(folder % 5)/file-\(index).txt"
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func start() {
                let path = paths[next]
                next += 1
                group.addTask {
                    var request = HTTPRequest("PUT", backend.endpoint(key: backend.prefix + path))
                    request.body = .data(Data(path.utf8), contentType: "text/plain")
                    try backend.check(try await backend.send(request))
                }
            }
            while next < min(8, paths.count) { start() }
            while try await group.next() != nil { if next < paths.count { start() } }
        }
    }

    @Test(arguments: MultipartTests.Server.allCases)
    func aFlatListingGivesWhatTheWalkGives(_ server: MultipartTests.Server) async throws {
        let backend = try await MultipartTests.backend(server)
        let count = Self.keyCount
        let filled = Date()
        try await Self.fill(backend, count: count)
        let fillSeconds = Date().timeIntervalSince(filled)

        let walkStarted = Date()
        var walked = Set<Seen>()
        var folders: [ItemIdentifier] = [.rootContainer]
        var listings = 0
        while let folder = folders.popLast() {
            let listing = try await backend.listAllItems(in: folder)
            listings += 1
            for item in listing.items {
                walked.insert(Self.seen(item))
                if item.kind == .folder { folders.append(item.identifier) }
            }
        }
        let walkSeconds = Date().timeIntervalSince(walkStarted)

        let flatStarted = Date()
        var flat = Set<Seen>()
        var page = Page.initialPageSortedByName
        var pages = 0
        while true {
            let items = try await backend.enumerateAllItems(startingAt: page)
            pages += 1
            #expect(items.refused.isEmpty)
            for item in items.items { flat.insert(Self.seen(item)) }
            guard let next = items.nextPage else { break }
            page = next
        }
        let flatSeconds = Date().timeIntervalSince(flatStarted)

        #expect(walked.filter { $0.kind == .file }.count == count)
        #expect(flat == walked)
        #expect(pages == (count + S3Backend.pageSize - 1) / S3Backend.pageSize)
        print(
            "S3 \(server.rawValue): \(count) keys written in \(fillSeconds.formatted(.number.precision(.fractionLength(1)))) s; "
                + "delimiter walk: \(listings) folders in \(walkSeconds.formatted(.number.precision(.fractionLength(2)))) s; "
                + "flat listing: \(pages) pages in \(flatSeconds.formatted(.number.precision(.fractionLength(2)))) s")
        await backend.close()
    }

    @Test func unsafeNamesInAFlatListingAreRefusedWithTheKeysBelowThem() async throws {
        let (backend, server) = try await HostileServerTests.backend(root: { request in
            HostileServerTests.ok(
                HostileServerTests.listing(
                    prefix: "", contents: [("ok/a.txt", "1"), ("../escape.txt", "1"), ("ok/sub/", "0"), ("x//y.txt", "2")]))
        })
        defer { server.stop() }
        let page = try await backend.enumerateAllItems(startingAt: .initialPageSortedByName)
        #expect(Set(page.items.map(\.identifier.rawValue)) == ["ok", "ok/a.txt", "ok/sub", "x"])
        #expect(page.items.first { $0.identifier.rawValue == "ok/sub" }?.kind == .folder)
        #expect(page.refused.count == 2)
    }

    @Test func aServerSendingTheSamePageUnderNewTokensIsStopped() async throws {
        let (backend, server) = try await HostileServerTests.backend(root: { _ in
            HostileServerTests.ok(HostileServerTests.listing(prefix: "", contents: [("a/b.txt", "1")], next: UUID().uuidString))
        })
        defer { server.stop() }
        var page = Page.initialPageSortedByName
        let error = await #expect(throws: FileProviderError.self) {
            for _ in 0..<10 {
                guard let next = try await backend.enumerateAllItems(startingAt: page).nextPage else { return }
                page = next
            }
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("same page again") == true, "\(error?.message ?? "")")
        #expect(server.requests.filter { $0.query["list-type"] == "2" && $0.query["max-keys"] == "1000" }.count == 2)
    }

    @Test func aPageThisBackendDidNotMakeIsExpired() async throws {
        let (backend, server) = try await HostileServerTests.backend(root: { _ in
            HostileServerTests.ok(HostileServerTests.listing(prefix: ""))
        })
        defer { server.stop() }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateAllItems(startingAt: Page(Data("t:token".utf8)))
        }
        #expect(error?.code == .pageExpired)
    }
}
