import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// A memory store whose ranged reads lie about what they wrote.
private struct LyingRanges: ForwardingBackend {
    let memory: MemoryBackend
    let lie: @Sendable (PartialContents) -> PartialContents
    var forwardee: any Backend { memory }

    func fetchPartialContents(
        for identifier: ItemIdentifier, version: ItemVersion, range: Range<Int64>, into destination: URL
    ) async throws(FileProviderError) -> PartialContents {
        lie(try await memory.fetchPartialContents(for: identifier, version: version, range: range, into: destination))
    }
}

/// ``CheckedBackend`` on ranged reads: a backend that says it wrote another range than the one
/// asked for clamped to the file, or returns another item or version, is `corruptData`.
@Suite("CheckedBackend ranged reads")
struct CheckedBackendTests {
    static func store() throws -> (MemoryBackend, Item, URL) {
        let memory = MemoryBackend()
        let item = try memory.write(path: "f.bin", data: Data(repeating: 7, count: 1000))
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("checked-\(UUID().uuidString)")
        try Data(count: 1000).write(to: url)
        return (memory, item, url)
    }

    @Test func anHonestReadPassesThrough() async throws {
        let (memory, item, url) = try Self.store()
        defer { try? FileManager.default.removeItem(at: url) }
        let checked = CheckedBackend(memory)
        let inside = try await checked.fetchPartialContents(for: item.identifier, version: item.version, range: 10..<20, into: url)
        #expect(inside.range == 10..<20)
        let crossing = try await checked.fetchPartialContents(for: item.identifier, version: item.version, range: 990..<2000, into: url)
        #expect(crossing.range == 990..<1000)
        let past = try await checked.fetchPartialContents(for: item.identifier, version: item.version, range: 5000..<6000, into: url)
        #expect(past.range == 1000..<1000)
        await memory.close()
    }

    @Test(arguments: [
        "wider", "shifted", "shorter", "past the end", "other version", "impossible size",
    ])
    func aLyingReadIsCorruptData(_ lie: String) async throws {
        let (memory, item, url) = try Self.store()
        defer { try? FileManager.default.removeItem(at: url) }
        let liar = LyingRanges(memory: memory) { result in
            var result = result
            switch lie {
            case "wider": result.range = (result.range.lowerBound - 1)..<result.range.upperBound
            case "shifted": result.range = (result.range.lowerBound + 1)..<(result.range.upperBound + 1)
            case "shorter": result.range = result.range.lowerBound..<(result.range.upperBound - 1)
            case "past the end": result.range = result.range.lowerBound..<(result.item.size + 10)
            case "other version": result.item.version = ItemVersion(content: Data("other".utf8), metadata: Data())
            default: result.item.size = -1
            }
            return result
        }
        let checked = CheckedBackend(liar)
        let error = await #expect(throws: FileProviderError.self) {
            try await checked.fetchPartialContents(for: item.identifier, version: item.version, range: 100..<1000, into: url)
        }
        #expect(error?.code == .corruptData, "\(lie): \(String(describing: error))")
        await memory.close()
    }

    @Test func aBadRangeNeverReachesTheBackend() async throws {
        let (memory, item, url) = try Self.store()
        defer { try? FileManager.default.removeItem(at: url) }
        let checked = CheckedBackend(memory)
        for range in [5..<5, -3..<10] as [Range<Int64>] {
            let error = await #expect(throws: FileProviderError.self) {
                try await checked.fetchPartialContents(for: item.identifier, version: item.version, range: range, into: url)
            }
            #expect(error?.code == .invalidArgument)
        }
        #expect(memory.callCount(.fetchPartialContents) == 0)
        await memory.close()
    }
}
