import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import WebDAVAdapter

/// Large downloads in ranges over several connections (`RangedDownload`): the first 16 MiB,
/// then, with more than 32 MiB left, the rest in 16 MiB ranges at once. The files are just
/// large enough for three ranges after the first; the backends send four at once (on this
/// machine's two cores, with the servers on loopback, a download would use one).
@Suite("WebDAV downloads in ranges")
struct RangedDownloadTests {
    static let mib = 1 << 20
    /// 16 MiB, then 40 MiB and a bit: ranges at 16, 32 and 48 MiB.
    static let size = 56 * mib + 12_345
    static let version = ItemVersion(content: Data("e\"e1\"".utf8), metadata: Data())

    /// Bytes in which every 4-byte word holds its own index (plus `seed`), so a piece written
    /// at the wrong place shows.
    static func pattern(_ count: Int, seed: UInt32 = 0) -> Data {
        var data = Data(count: (count + 3) / 4 * 4)
        data.withUnsafeMutableBytes { raw in
            let words = raw.bindMemory(to: UInt32.self)
            for index in words.indices { words[index] = UInt32(truncatingIfNeeded: index) &+ seed }
        }
        return data.prefix(count)
    }

    static func staging() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("webdav-ranged-\(UUID().uuidString)")
    }

    static func sha256(_ data: Data) -> String {
        var digest = FastSHA256()
        data.withUnsafeBytes { digest.update($0) }
        return digest.finish()
    }

    static func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? Int) ?? -1
    }

    /// The first and last byte a `Range: bytes=a-b` (or `bytes=a-`) header asks for, in a
    /// resource of `count` bytes; `nil` without one.
    static func requested(_ header: String?, count: Int) -> (Int, Int)? {
        guard let header, header.hasPrefix("bytes=") else { return nil }
        let bounds = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = Int(bounds[0]) else { return nil }
        return (start, min(count - 1, Int(bounds[1]) ?? count - 1))
    }

    /// A server at `/dav/` whose `GET /dav/big.bin` answers from `data` as a server that honours
    /// `Range` does (`206` and `Content-Range`, `416` past the end), with the ETag `etag` gives
    /// for the first byte asked for; `fault` may answer a `GET` in its place (given its first
    /// and last byte and the normal headers).
    static func server(
        _ data: Data, etag: @escaping (Int) -> String = { _ in "\"e1\"" },
        fault: @escaping (FaultServer.Request, Int, Int, [String: String]) -> FaultServer.Action? = { _, _, _, _ in nil }
    ) throws -> FaultServer {
        try ScriptedDAV.server { request in
            guard request.method == "GET", request.path == "/dav/big.bin" else {
                return ScriptedDAV().answer(request) ?? .reply(status: 404, headers: [:], body: Data())
            }
            guard let (start, last) = requested(request.headers["range"], count: data.count) else {
                let headers = ["ETag": etag(0), "Last-Modified": ScriptedDAV.date]
                return fault(request, 0, data.count - 1, headers) ?? .reply(status: 200, headers: headers, body: data)
            }
            guard start < data.count else {
                return .reply(status: 416, headers: ["Content-Range": "bytes */\(data.count)"], body: Data())
            }
            let headers = [
                "ETag": etag(start), "Last-Modified": ScriptedDAV.date, "Content-Range": "bytes \(start)-\(last)/\(data.count)",
            ]
            return fault(request, start, last, headers)
                ?? .reply(status: 206, headers: headers, body: data.subdata(in: start..<(last + 1)))
        }
    }

    /// A backend over `server`'s `/dav/` whose large downloads send four ranged `GET`s at once.
    static func backend(_ server: FaultServer, timeout: Double = 2, retries: Int = 2) async throws -> WebDAVBackend {
        try await WebDAVBackend(url: server.url + "/dav", timeout: timeout, retries: retries, streamsPerDownload: 4)
    }

    /// Downloads `big.bin` from `server` and checks it is `data`.
    static func expectWhole(_ data: Data, from server: FaultServer) async throws {
        let backend = try await Self.backend(server)
        let staging = Self.staging()
        defer { try? FileManager.default.removeItem(at: staging) }
        let item = try await backend.fetchContents(
            for: ItemIdentifier("big.bin"), version: Self.version, to: staging, offset: 0, progress: nil)
        #expect(item.size == Int64(data.count))
        #expect(try Data(contentsOf: staging) == data)
        await backend.close()
    }

    /// Downloads `big.bin` from `server`, which serves `data`, expecting it to fail with
    /// `code`; the file then holds the first range and at most `limit` bytes, a prefix of
    /// `data` (what was written without a gap), and no prefix record.
    static func expectFailure(
        _ code: FileProviderError.Code, from server: FaultServer, of data: Data, keepingAtMost limit: Int
    ) async throws {
        let backend = try await Self.backend(server)
        let staging = Self.staging()
        defer { try? FileManager.default.removeItem(at: staging) }
        await FaultTests.expectCode(code) {
            _ = try await backend.fetchContents(
                for: ItemIdentifier("big.bin"), version: Self.version, to: staging, offset: 0, progress: nil)
        }
        let kept = Self.fileSize(staging)
        #expect(kept >= 16 * Self.mib && kept <= limit, "\(kept) bytes kept")
        #expect(try Data(contentsOf: staging) == data.prefix(kept))
        #expect(PrefixRecord.recorded(atPath: staging.path) == nil)
        await backend.close()
    }

    static func gets(_ server: FaultServer) -> [FaultServer.Request] {
        server.requests.filter { $0.method == "GET" && $0.path == "/dav/big.bin" }
    }

    /// Apache serves a file larger than the threshold in four ranged `GET`s (`206` each), the
    /// bytes are the file's, the engine's hash of the pieces written out of order is the file's
    /// SHA-256, and the item is the one a single `GET` gives. Small and empty files come in one
    /// `GET`.
    @Test func aLargeFileFromApacheComesInRangesByteIdentical() async throws {
        let server = try await SharedApache.server()
        let folder = try server.makeFolder()
        let name = try #require(URL(string: folder)?.lastPathComponent)
        let data = Self.pattern(Self.size)
        try server.writeFile("\(name)/big.bin", data)
        try server.writeFile("\(name)/small.bin", Self.pattern(100_000, seed: 3))
        try server.writeFile("\(name)/empty.bin", Data())
        let backend = try await WebDAVBackend(url: folder, streamsPerDownload: 4)
        let staging = Self.staging()
        defer { try? FileManager.default.removeItem(at: staging) }
        // The engine's sink (libcrypto's SHA-256), as a materialize installs it.
        let sink = FastSHA256.sink()
        let reports = Recorder<Int64>()
        let item = try await ContentSink.feeding([staging: sink]) { () async throws(FileProviderError) -> Item in
            try await backend.fetchContents(
                for: ItemIdentifier("big.bin"), version: nil, to: staging, offset: 0,
                progress: { done, _ in reports.add(done) })
        }
        let streamed = await sink.finish(size: item.size)
        #expect(Self.fileSize(staging) == Self.size)
        #expect(try Data(contentsOf: staging) == data)
        #expect(streamed == Self.sha256(data), "the engine's hash of the pieces")
        #expect(PrefixRecord.recorded(atPath: staging.path) == nil, "the finished file keeps the record")
        let done = reports.values
        #expect(done == done.sorted(), "progress went back")
        #expect(done.last == Int64(Self.size))
        #expect(done.allSatisfy { $0 <= Int64(Self.size) })
        // The item is the one one GET gives (its head: version, size, date) and the listing's.
        let other = Self.staging()
        _ = FileManager.default.createFile(atPath: other.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: other) }
        let single = try await backend.fetchPartialContents(
            for: ItemIdentifier("big.bin"), version: item.version, range: 0..<1, into: other)
        #expect(single.item == item)
        let listed = try await backend.item(for: ItemIdentifier("big.bin"))
        #expect(listed.version.content == item.version.content)
        #expect(listed.size == item.size)
        for (file, size) in [("small.bin", 100_000), ("empty.bin", 0)] {
            let target = Self.staging()
            defer { try? FileManager.default.removeItem(at: target) }
            let small = try await backend.fetchContents(for: ItemIdentifier(file), version: nil, to: target, offset: 0, progress: nil)
            #expect(small.size == Int64(size))
            #expect(Self.fileSize(target) == size)
        }
        let mark = server.mark()
        #expect(await eventually(timeout: 10) { server.requests().contains { $0.path == mark } })
        let requests = server.requests()
        let bigGets = requests.filter { $0.method == "GET" && $0.path == "/\(name)/big.bin" }
        // Four for the download, one for the partial read.
        #expect(bigGets.count == 5, "\(bigGets)")
        #expect(bigGets.allSatisfy { $0.status == 206 }, "\(bigGets)")
        #expect(requests.filter { $0.method == "GET" && $0.path == "/\(name)/small.bin" }.count == 1)
        #expect(requests.filter { $0.method == "GET" && $0.path == "/\(name)/empty.bin" }.count <= 2)
        await backend.close()
    }

    /// A server that ignores `Range` answers the first request with the whole file (`200`): it
    /// is taken whole, in that one `GET`.
    @Test func aServerThatIgnoresRangeGivesTheWholeFileInOneGET() async throws {
        let data = Self.pattern(Self.size, seed: 1)
        let server = try Self.server(
            data,
            fault: { _, _, _, _ in
                .reply(status: 200, headers: ["ETag": "\"e1\"", "Last-Modified": ScriptedDAV.date], body: data)
            })
        defer { server.stop() }
        try await Self.expectWhole(data, from: server)
        #expect(Self.gets(server).count == 1)
        #expect(Self.gets(server).first?.headers["range"] == "bytes=0-\(16 * Self.mib - 1)")
    }

    /// The range from 32 MiB comes with another ETag (the file changed between ranges): the
    /// download fails as `versionNoLongerAvailable` and the file keeps no more than the
    /// prefix written without a gap, which is the file's, and no record.
    @Test func anETagThatChangesBetweenRangesIsVersionNoLongerAvailable() async throws {
        let data = Self.pattern(Self.size, seed: 2)
        let server = try Self.server(data, etag: { $0 == 32 * Self.mib ? "\"e2\"" : "\"e1\"" })
        defer { server.stop() }
        try await Self.expectFailure(.versionNoLongerAvailable, from: server, of: data, keepingAtMost: 32 * Self.mib)
    }

    /// A range whose `Content-Range` gives another size for the same ETag is a server that
    /// lies: `corruptData`, and the file is cut back to its prefix.
    @Test func aRangeThatGivesAnotherSizeIsCorruptData() async throws {
        let data = Self.pattern(Self.size, seed: 4)
        let server = try Self.server(
            data,
            fault: { _, start, last, headers in
                guard start == 48 * Self.mib else { return nil }
                var lying = headers
                lying["Content-Range"] = "bytes \(start)-\(last)/\(data.count + 1000)"
                return .reply(status: 206, headers: lying, body: data.subdata(in: start..<(last + 1)))
            })
        defer { server.stop() }
        try await Self.expectFailure(.corruptData, from: server, of: data, keepingAtMost: 48 * Self.mib)
    }

    /// A connection reset in the middle of the range from 32 MiB: the client asks for the rest
    /// of that range, and the file comes whole.
    @Test func aResetInTheMiddleOfARangeIsResumed() async throws {
        let data = Self.pattern(Self.size, seed: 5)
        let cuts = StepCounter()
        let server = try Self.server(
            data,
            fault: { _, start, last, headers in
                guard start == 32 * Self.mib, cuts.next() == 0 else { return nil }
                return .truncate(body: data.subdata(in: start..<(last + 1)), sent: 1_000_000, status: 206, headers: headers)
            })
        defer { server.stop() }
        try await Self.expectWhole(data, from: server)
        let ranges = Self.gets(server).compactMap { $0.headers["range"] }
        #expect(ranges.contains("bytes=\(32 * Self.mib + 1_000_000)-\(48 * Self.mib - 1)"), "\(ranges)")
        #expect(ranges.count == 5, "\(ranges)")
    }

    /// What a killed ranged download leaves (a recorded prefix, then a gap and a range written
    /// ahead; the file longer than the prefix): the engine resumes at the file's size, and the
    /// download starts again at the recorded prefix.
    @Test func aResumeAfterAKilledRangedDownloadStartsAtTheRecordedPrefix() async throws {
        let data = Self.pattern(Self.size, seed: 6)
        let server = try Self.server(data)
        defer { server.stop() }
        let backend = try await Self.backend(server)
        let staging = Self.staging()
        defer { try? FileManager.default.removeItem(at: staging) }
        let prefix = 20 * Self.mib + 100
        var partial = data.prefix(prefix)
        partial.append(Data(count: 16 * Self.mib))
        partial.append(Data(repeating: 0xee, count: 5000))
        try partial.write(to: staging)
        #expect(PrefixRecord.record(Int64(prefix), atPath: staging.path))
        let reports = Recorder<Int64>()
        let item = try await backend.fetchContents(
            for: ItemIdentifier("big.bin"), version: Self.version, to: staging, offset: Int64(partial.count),
            progress: { done, _ in reports.add(done) })
        #expect(item.size == Int64(Self.size))
        #expect(try Data(contentsOf: staging) == data)
        #expect(reports.values.first == Int64(prefix))
        #expect(Self.gets(server).first?.headers["range"] == "bytes=\(prefix)-\(prefix + 16 * Self.mib - 1)")
        #expect(PrefixRecord.recorded(atPath: staging.path) == nil)
        await backend.close()
    }

    /// Cancelling the task stops every range at once (the servers never answer the ranges
    /// after the first); the file keeps the first range, and no record.
    @Test func cancellationStopsEveryRange() async throws {
        let data = Self.pattern(Self.size, seed: 7)
        let server = try Self.server(data, fault: { _, start, _, _ in start == 0 ? nil : .silence })
        defer { server.stop() }
        let backend = try await Self.backend(server, timeout: 60, retries: 0)
        let staging = Self.staging()
        defer { try? FileManager.default.removeItem(at: staging) }
        let download = Task {
            try await backend.fetchContents(
                for: ItemIdentifier("big.bin"), version: Self.version, to: staging, offset: 0, progress: nil)
        }
        #expect(await eventually(timeout: 20) { Self.gets(server).count == 4 })
        let cancelled = ContinuousClock.now
        download.cancel()
        await FaultTests.expectCode(.cancelled) { _ = try await download.value }
        // Not the 60 s stall timeout the silent ranges would run into (a second alone; up to
        // 15 s seen with every adapter suite running at once on two cores).
        #expect(ContinuousClock.now - cancelled < .seconds(30))
        #expect(Self.fileSize(staging) == 16 * Self.mib)
        #expect(PrefixRecord.recorded(atPath: staging.path) == nil)
        await backend.close()
    }
}
