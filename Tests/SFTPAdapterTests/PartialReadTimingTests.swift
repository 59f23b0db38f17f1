import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// How fast ranged reads are against the test sshd: 1,000 random 64 KiB reads of a 1 GiB file
/// and the whole file read in growing ranges (64 KiB doubling up to 64 MiB), as the engine reads
/// a dataless file. Runs only with `FPK_PARTIAL_TIMING=1` (it writes 2 GiB to the temporary
/// folder); prints the figures. `FPK_PARTIAL_TIMING_MIB` makes the file smaller.
@Suite("SFTP ranged read timing", .enabled(if: ProcessInfo.processInfo.environment["FPK_PARTIAL_TIMING"] != nil))
struct PartialReadTimingTests {
    static func seconds(_ start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }

    @Test func randomAndSequentialRangesOfALargeFile() async throws {
        let mebibytes = Int(ProcessInfo.processInfo.environment["FPK_PARTIAL_TIMING_MIB"] ?? "") ?? 1024
        let size = Int64(mebibytes) << 20
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let block = ConformanceTestData.block
        let source = URL(fileURLWithPath: folder).appendingPathComponent("big.bin")
        _ = FileManager.default.createFile(atPath: source.path, contents: nil)
        let writer = try FileHandle(forWritingTo: source)
        for _ in 0..<mebibytes { try writer.write(contentsOf: block) }
        try writer.close()
        let scratch = try TestServer.scratch()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let destination = scratch.appendingPathComponent("big.bin")
        _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
        let handle = try FileHandle(forWritingTo: destination)
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()

        let backend = try TestServer.backend(server, root: folder)
        let item = try await backend.item(for: "big.bin")
        #expect(item.size == size)
        _ = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: 0..<65536, into: destination)

        var generator = SystemRandomNumberGenerator()
        let offsets = (0..<1000).map { _ in Int64.random(in: 0..<(size - 65536), using: &generator) }
        let random = DispatchTime.now()
        for offset in offsets {
            _ = try await backend.fetchPartialContents(
                for: item.identifier, version: item.version, range: offset..<(offset + 65536), into: destination)
        }
        let randomSeconds = Self.seconds(random)

        let sequential = DispatchTime.now()
        var offset: Int64 = 0
        var chunk: Int64 = 65536
        var calls = 0
        while offset < size {
            let result = try await backend.fetchPartialContents(
                for: item.identifier, version: item.version, range: offset..<(offset + chunk), into: destination)
            offset = result.range.upperBound
            chunk = min(chunk * 2, 64 << 20)
            calls += 1
        }
        let sequentialSeconds = Self.seconds(sequential)

        // For comparison: the whole file in one download (several connections, ranges).
        let whole = scratch.appendingPathComponent("whole.bin")
        _ = FileManager.default.createFile(atPath: whole.path, contents: nil)
        let download = DispatchTime.now()
        _ = try await backend.fetchContents(for: item.identifier, version: item.version, to: whole, offset: 0, progress: nil)
        let downloadSeconds = Self.seconds(download)
        try? FileManager.default.removeItem(at: whole)

        // The bytes are the file's.
        let written = try FileHandle(forReadingFrom: destination)
        for probe in [Int64(0), size / 3 / 4096 * 4096, size - 4096] {
            try written.seek(toOffset: UInt64(probe))
            let bytes = try written.read(upToCount: 4096) ?? Data()
            let start = Int(probe % Int64(block.count))
            #expect(bytes == block[start..<(start + 4096)])
        }
        try written.close()
        await backend.close()
        print(
            String(
                format:
                    "ranged reads over SFTP: 1000 random 64 KiB reads of %d MiB in %.3f s (%.0f µs each); the whole file in %d growing reads in %.3f s (%.0f MiB/s); fetchContents of the whole file %.3f s",
                mebibytes, randomSeconds, randomSeconds * 1000, calls, sequentialSeconds, Double(mebibytes) / sequentialSeconds,
                downloadSeconds))
    }
}

enum ConformanceTestData {
    /// 1 MiB of random bytes, the block a large test file repeats (4096-byte reads at any offset
    /// that is a multiple of 4096 stay inside it).
    static let block: Data = {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }()
}
