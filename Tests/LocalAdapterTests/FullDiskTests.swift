import Foundation
import LocalAdapter
import ProviderCore
import ProviderTesting
import Testing

/// A download whose destination's disk is full: the local disk, not the store, is out of space.
@Suite("LocalBackend full disk")
struct FullDiskTests {
    @Test func aFullDiskWhileFetchingIsFileWriteOutOfSpace() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try bytes(3 << 20).write(to: folder.url.appendingPathComponent("big.bin"))
        let backend = try LocalBackend(rootPath: folder.path)
        try await SmallFileSystem.with(size: 1 << 20) { disk in
            let destination = disk.root.appendingPathComponent("big.bin.part")
            let error = await #expect(throws: FileProviderError.self) {
                try await backend.fetchContents(for: "big.bin", version: nil, to: destination, offset: 0, progress: nil)
            }
            #expect(error?.code == .fileWriteOutOfSpace, "\(error?.code.name ?? ""): \(error?.message ?? "")")
            #expect(error?.message.contains(destination.path) == true)
        }
        await backend.close()
    }

    private func bytes(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) }) }
}
