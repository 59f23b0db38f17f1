import Foundation
import ProviderCore

extension BackendConformance {
    /// A file of `size` bytes filled with a pattern, to read ranges into: the bytes a read must
    /// not touch are known.
    static func prefilled(_ c: ConformanceContext, size: Int) throws -> (URL, Data) {
        let url = try c.destination()
        let data = ConformanceContext.pattern(size, seed: 99)
        try data.write(to: url)
        return (url, data)
    }

    /// Reads `range` of `item` into `url` and checks the outcome: the range written is the
    /// requested one clamped to the file, its bytes are the file's (`contents`), every other
    /// byte of `url` is still `before`'s, and the file's size did not change.
    static func expectPartialRead(
        _ c: ConformanceContext, _ item: Item, _ range: Range<Int64>, contents: Data, into url: URL, before: Data
    ) async throws {
        let what = "a ranged read of \(range.lowerBound)..<\(range.upperBound) of \(contents.count) bytes"
        let result = try await c.backend.fetchPartialContents(
            for: item.identifier, version: item.version, range: range, into: url)
        let expected = PartialContents.clamp(range, toSize: Int64(contents.count))
        try c.expect(
            result.range == expected,
            "\(what) says it wrote \(result.range.lowerBound)..<\(result.range.upperBound), not \(expected.lowerBound)..<\(expected.upperBound)"
        )
        try c.expect(result.item.version.content == item.version.content, "\(what) returned another content version")
        try c.expect(result.item.size == Int64(contents.count), "\(what) returned size \(result.item.size)")
        let after = try Data(contentsOf: url)
        try c.expect(after.count == before.count, "\(what) changed the destination's size from \(before.count) to \(after.count)")
        let lower = Int(expected.lowerBound)
        let upper = Int(expected.upperBound)
        try c.expect(
            after[lower..<upper] == contents[lower..<upper], "\(what) wrote other bytes than the file's at those offsets")
        try c.expect(
            after[0..<lower] == before[0..<lower] && after[upper...] == before[upper...],
            "\(what) wrote outside the range")
    }

    /// Checks that a backend without ranged reads declines one with `notSupported`; `true` when
    /// it has them (the check goes on).
    static func rangedReadsOrDeclined(_ c: ConformanceContext) async throws -> Bool {
        if c.capabilities.supportsRangedReads { return true }
        let item = try await c.createFile("no-ranges", Data("contents".utf8))
        let url = try c.destination()
        try await c.expectError(.notSupported, "a ranged read without supportsRangedReads") {
            try await c.backend.fetchPartialContents(for: item.identifier, version: item.version, range: 0..<4, into: url)
        }
        return false
    }

    static let rangeChecks: [Check] = [
        (
            "partialReadsAtStartMiddleAndEnd",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let size = 3 * (1 << 20) + 13
                let item = try await c.createFile("ranges.bin", ConformanceContext.pattern(size, seed: 40))
                // The reference is what a whole download gives.
                let contents = try await c.fetch(item.identifier)
                try c.expect(contents.count == size, "the whole download has \(contents.count) bytes, not \(size)")
                let (url, before) = try prefilled(c, size: size)
                let ranges: [Range<Int64>] = [
                    0..<1, 0..<4096, 1_000_003..<1_700_000, 2 * (1 << 20)..<(2 * (1 << 20) + 65536),
                    Int64(size - 5000)..<Int64(size),
                ]
                var expected = before
                for range in ranges {
                    try await expectPartialRead(c, item, range, contents: contents, into: url, before: expected)
                    let bounds = Int(range.lowerBound)..<Int(range.upperBound)
                    expected.replaceSubrange(bounds, with: contents[bounds])
                }
            }
        ),
        (
            "partialReadCrossingTheEndIsClamped",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let contents = ConformanceContext.pattern(300_000, seed: 41)
                let item = try await c.createFile("clamped.bin", contents)
                // The destination is longer than the file: nothing past the file's end is written.
                let (url, before) = try prefilled(c, size: 310_000)
                try await expectPartialRead(c, item, 299_000..<305_000, contents: contents, into: url, before: before)
                let (whole, wholeBefore) = try prefilled(c, size: 300_000)
                try await expectPartialRead(c, item, 0..<Int64.max, contents: contents, into: whole, before: wholeBefore)
            }
        ),
        (
            "partialReadPastTheEndIsEmpty",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let contents = ConformanceContext.pattern(10_000, seed: 42)
                let item = try await c.createFile("short.bin", contents)
                let (url, before) = try prefilled(c, size: 20_000)
                try await expectPartialRead(c, item, 10_000..<10_001, contents: contents, into: url, before: before)
                try await expectPartialRead(c, item, 15_000..<16_000, contents: contents, into: url, before: before)
                let empty = try await c.createFile("empty", Data())
                try await expectPartialRead(c, empty, 0..<4096, contents: Data(), into: url, before: before)
            }
        ),
        (
            "partialReadOfAChangedVersionThrows",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let first = try await c.createFile("changing.bin", ConformanceContext.pattern(70_000, seed: 43))
                let (url, _) = try prefilled(c, size: 70_000)
                // A read of the current version first (a backend may keep the file open for the next).
                _ = try await c.backend.fetchPartialContents(for: first.identifier, version: first.version, range: 0..<1000, into: url)
                let newContents = ConformanceContext.pattern(70_000, seed: 44)
                let second = try await c.setContents(first, newContents)
                try c.expect(second.version.content != first.version.content, "the content version did not change with the contents")
                let (stale, staleBefore) = try prefilled(c, size: 70_000)
                try await c.expectError(.versionNoLongerAvailable, "a ranged read of a replaced version") {
                    try await c.backend.fetchPartialContents(for: first.identifier, version: first.version, range: 1000..<2000, into: stale)
                }
                let staleAfter = try Data(contentsOf: stale)
                try c.expect(
                    staleAfter[0..<1000] == staleBefore[0..<1000] && staleAfter[2000...] == staleBefore[2000...],
                    "a failed ranged read wrote outside its range")
                try await expectPartialRead(c, second, 1000..<60_000, contents: newContents, into: url, before: try Data(contentsOf: url))
            }
        ),
        (
            "partialReadOfAFolderOrABadRangeThrowsInvalidArgument",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let folder = try await c.createFolder("folder")
                let url = try c.destination()
                try await c.expectError(.invalidArgument, "a ranged read of a folder") {
                    try await c.backend.fetchPartialContents(for: folder.identifier, version: folder.version, range: 0..<10, into: url)
                }
                let file = try await c.createFile("file", Data("0123456789".utf8))
                try await c.expectError(.invalidArgument, "a ranged read of an empty range") {
                    try await c.backend.fetchPartialContents(for: file.identifier, version: file.version, range: 5..<5, into: url)
                }
                try await c.expectError(.invalidArgument, "a ranged read starting below 0") {
                    try await c.backend.fetchPartialContents(for: file.identifier, version: file.version, range: -1..<5, into: url)
                }
            }
        ),
        (
            "partialReadOfAMissingItemThrowsNoSuchItem",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let file = try await c.createFile("gone", Data("bye".utf8))
                try await c.backend.deleteItem(identifier: file.identifier, baseVersion: nil, options: [])
                let url = try c.destination()
                try await c.expectError(.noSuchItem, "a ranged read of a deleted file") {
                    try await c.backend.fetchPartialContents(for: file.identifier, version: file.version, range: 0..<3, into: url)
                }
            }
        ),
        (
            "sequentialPartialReadsRebuildTheFile",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let contents = ConformanceContext.pattern(2 * (1 << 20) + 4097, seed: 45)
                let item = try await c.createFile("sequential.bin", contents)
                let (url, _) = try prefilled(c, size: contents.count)
                // Growing chunks, as a reader that reads ahead more the longer it goes on.
                var offset: Int64 = 0
                var chunk: Int64 = 4096
                while offset < Int64(contents.count) {
                    let result = try await c.backend.fetchPartialContents(
                        for: item.identifier, version: item.version, range: offset..<(offset + chunk), into: url)
                    try c.expect(
                        result.range == PartialContents.clamp(offset..<(offset + chunk), toSize: Int64(contents.count)),
                        "a ranged read of \(offset)..<\(offset + chunk) wrote \(result.range)")
                    offset = result.range.upperBound
                    chunk *= 2
                }
                try c.expect(try Data(contentsOf: url) == contents, "the file read in growing ranges differs from the store's")
            }
        ),
        (
            "concurrentPartialReadsOfOneFile",
            { c in
                guard try await rangedReadsOrDeclined(c) else { return }
                let contents = ConformanceContext.pattern(1 << 20, seed: 46)
                let item = try await c.createFile("parallel.bin", contents)
                let (url, _) = try prefilled(c, size: contents.count)
                let backend = c.backend
                let piece: Int64 = 65536
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<16 {
                        let range = Int64(index) * piece..<Int64(index + 1) * piece
                        group.addTask {
                            _ = try await backend.fetchPartialContents(
                                for: item.identifier, version: item.version, range: range, into: url)
                        }
                    }
                    try await group.waitForAll()
                }
                try c.expect(try Data(contentsOf: url) == contents, "16 concurrent ranged reads of one file gave other bytes")
            }
        ),
    ]
}
