import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import WebDAVAdapter

/// A `PROPFIND` reply is never held in memory whole: it is spooled to a file and the parser
/// reads it back in chunks, however long the multistatus a (hostile) server sends. What the
/// test observes: no byte of the listing's body in memory, every byte of it through the
/// parser's reads, no read over 256 KiB.
@Suite("WebDAV listings in bounded memory")
struct ListingMemoryTests {
    static let count = 60_000

    /// A multistatus of the root and `count` files, with a few hostile entries among them.
    static let body: Data = {
        var entries = [ScriptedDAV.Entry(href: "/dav/", props: "<d:resourcetype><d:collection/></d:resourcetype>")]
        entries.reserveCapacity(count + 4)
        for index in 0..<count {
            entries.append(ScriptedDAV.file("file-\(index).txt", size: index))
        }
        entries += [
            ScriptedDAV.file("%2E%2E", size: 1), ScriptedDAV.file("negative", size: -5),
            ScriptedDAV.file("bad-date", size: 1, date: "yesterday"),
        ]
        return ScriptedDAV.multistatus(entries)
    }()

    static func server(firstListing: FaultServer.Action? = nil) throws -> FaultServer {
        let listings = StepCounter()
        return try ScriptedDAV.server { request in
            guard request.method == "PROPFIND", request.headers["depth"] == "1" else {
                return ScriptedDAV().answer(request) ?? .reply(status: 404, headers: [:], body: Data())
            }
            if listings.next() == 0, let firstListing { return firstListing }
            return .reply(status: 207, headers: ["Content-Type": "application/xml"], body: body)
        }
    }

    static func checkListing(_ page: ItemPage) {
        #expect(page.items.count == count)
        #expect(page.items.first?.filename == "file-0.txt")
        #expect(page.items.contains { $0.filename == "file-59999.txt" && $0.size == 59_999 })
        #expect(page.refused.count == 3, "\(page.refused.map(\.reason))")
    }

    @Test func aLongMultistatusIsParsedFromAFileInChunks() async throws {
        #expect(Self.body.count > 16 << 20, "the body should be far longer than any chunk: \(Self.body.count)")
        let server = try Self.server()
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: server.url + "/dav", timeout: 10, retries: 0)
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        Self.checkListing(page)
        let memory = backend.listingMemory
        #expect(memory.largestBodyInMemory == 0)
        #expect(memory.largestReply == Self.body.count)
        // The parser read every byte of the listing ...
        #expect(memory.reads.total == Int64(Self.body.count))
        // ... a chunk at a time.
        #expect(memory.reads.largest <= 256 << 10, "a read of \(memory.reads.largest) bytes")
        await backend.close()
    }

    /// A reply cut off mid-body is asked for again from its first byte (no `Range` on a
    /// `PROPFIND`), and the spool starts again empty: the listing is the whole second reply.
    @Test func aListingCutOffIsReadAgainFromTheStart() async throws {
        let server = try Self.server(
            firstListing: .truncate(body: Self.body, sent: Self.body.count / 2, status: 207, headers: ["Content-Type": "application/xml"]))
        defer { server.stop() }
        let backend = try await WebDAVBackend(url: server.url + "/dav", timeout: 10, retries: 1)
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        Self.checkListing(page)
        let listings = server.requests.filter { $0.method == "PROPFIND" && $0.headers["depth"] == "1" }
        #expect(listings.count == 2)
        #expect(listings.allSatisfy { $0.headers["range"] == nil })
        await backend.close()
    }
}
