import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderEngine
import ProviderTesting
import Testing

/// The media adapter and the engine against ``HostileMediaAPI``, a server with our extensions
/// that lies: numbers no item can have, a folder inside itself, downloads that disagree with
/// their headers. Apart from the conformance suite, which runs against media-server.
@Suite("Hostile media server", .timeLimit(.minutes(5)))
struct HostileMediaTests {
    static let refusedNames = ["big-date.txt", "early.txt", "fraction.bin", "huge.bin", "negative.bin", "over.bin"]
    static let keptNames = ["good.txt", "long.bin", "loop", "range.bin", "short.bin", "unknown-total.bin"]

    static func server() throws -> FaultServer {
        let api = HostileMediaAPI()
        return try FaultServer { api.answer($0) }
    }

    @Test func impossibleNumbersInAListingAreRefusedByTheAdapter() async throws {
        let server = try Self.server()
        let backend = try await MediaBackend(url: server.url, token: nil, timeout: 30, connections: 1, retries: 1)
        let items = try await backend.enumerateAllItems(in: .rootContainer)
        #expect(items.map(\.filename) == Self.keptNames)
        #expect(items.allSatisfy { $0.size >= 0 })
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(page.refused.map(\.filename).sorted() == Self.refusedNames)
        #expect(page.refused.first { $0.filename == "negative.bin" }?.reason == "its size -5 is negative")
        #expect(
            page.refused.first { $0.filename == "huge.bin" }?.reason.contains("is not a whole number of bytes up to 9007199254740992")
                == true)
        #expect(
            page.refused.first { $0.filename == "over.bin" }?.reason
                == "its size 9223372036854775808 is not a whole number of bytes up to 9007199254740992")
        await backend.close()
    }

    @Test func syncReportsTheLiesAndMaterializeFailsOnlyTheLyingDownloads() async throws {
        let server = try Self.server()
        let engine = try Engine()
        try await engine.manager.addDomain(
            name: "liar", kind: "media", options: ["url": server.url, "connections": "2", "retries": "1", "timeout": "20"])
        let controller = try await engine.manager.controller(for: "liar")
        let report = try await controller.sync()
        for name in Self.refusedNames {
            #expect(
                report.notices.contains { $0.hasPrefix("liar:/: skipped an item: \"\(name)\"") }, "\(name): \(report.notices.prefix(8))")
        }
        #expect(report.notices.contains { $0.contains("skipped an item: \"loop\" is 257 folders deep") }, "\(report.notices.suffix(2))")
        let records = try controller.list(at: "", recursive: true)
        #expect(records.allSatisfy { $0.size >= 0 })
        #expect(Set(records.filter { !$0.path.contains("/") }.map(\.path)) == Set(Self.keptNames))
        #expect(records.map { $0.path.split(separator: "/").count }.max() == 256)

        let outcomes = await controller.materialize(
            paths: ["good.txt", "long.bin", "range.bin", "short.bin", "unknown-total.bin"], recursive: false)
        let errors = Dictionary(uniqueKeysWithValues: outcomes.map { ($0.path, $0.error) })
        #expect(errors["liar:/good.txt"] == .some(nil))
        // Thirty bytes sent after a Content-Length of 10: only the ten announced are kept.
        #expect(errors["liar:/long.bin"] == .some(nil))
        #expect(try Data(contentsOf: controller.replica.url("long.bin")) == Data(repeating: 0x6c, count: 10))
        #expect(errors["liar:/range.bin"]??.code == .corruptData, "\(String(describing: errors["liar:/range.bin"]))")
        #expect(errors["liar:/short.bin"]??.code != nil)
        #expect(errors["liar:/unknown-total.bin"]??.code != nil)
        for name in ["range.bin", "short.bin", "unknown-total.bin"] {
            #expect(entry(at: controller.replica.url(name)) == .none, "\(name) never appears under its real name")
        }
        await engine.manager.close()
    }
}

extension HostileMediaTests {
    /// Ranged reads against answers that ignore the range (`200` with the whole file), start
    /// elsewhere, hold fewer bytes than they say, break off, send more than asked, or refuse a
    /// range inside the file: the right bytes or an error, and never a byte outside the range.
    @Test func rangedReadsWriteOnlyTheRangeWhateverTheServerSends() async throws {
        let server = try Self.server()
        let backend = try await MediaBackend(url: server.url, token: nil, timeout: 30, connections: 1, retries: 1)
        let contents = HostileMediaAPI.rangeContents
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-ranges-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        let pattern = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        let outcomes: [(String, FileProviderError.Code?)] = [
            ("whole.bin", nil), ("more.bin", nil), ("elsewhere.bin", .corruptData), ("fewer.bin", .corruptData),
            ("cut.bin", .serverUnreachable), ("refused.bin", .corruptData),
        ]
        for (name, expected) in outcomes {
            let item = try await backend.item(for: ItemIdentifier(name))
            for range: Range<Int64> in [10_000..<20_000, 0..<100, 99_000..<120_000] {
                try pattern.write(to: url)
                let what = "\(name) \(range.lowerBound)..<\(range.upperBound)"
                do {
                    let result = try await backend.fetchPartialContents(
                        for: item.identifier, version: item.version, range: range, into: url)
                    #expect(expected == nil, "\(what) succeeded")
                    let clamped = PartialContents.clamp(range, toSize: Int64(contents.count))
                    #expect(result.range == clamped, "\(what)")
                    let bounds = Int(clamped.lowerBound)..<Int(clamped.upperBound)
                    #expect(try Data(contentsOf: url)[bounds] == contents[bounds], "\(what): other bytes")
                } catch let error as FileProviderError {
                    #expect(error.code == expected, "\(what): \(error)")
                }
                let after = try Data(contentsOf: url)
                let lower = Int(range.lowerBound)
                let upper = Int(range.upperBound)
                #expect(after.count == pattern.count, "\(what) changed the file's size")
                #expect(after[..<lower] == pattern[..<lower] && after[upper...] == pattern[upper...], "\(what) wrote outside the range")
            }
        }
        await backend.close()
    }
}

/// Whether something is at a URL (not following symlinks).
private enum Entry { case none, some }

private func entry(at url: URL) -> Entry {
    var info = stat()
    return lstat(url.path, &info) == 0 ? .some : .none
}
