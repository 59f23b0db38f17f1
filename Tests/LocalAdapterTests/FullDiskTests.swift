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
        let (error, destination) = try await SmallFileSystem.fetchError(of: "big.bin", from: backend)
        #expect(error?.code == .fileWriteOutOfSpace, "\(error?.code.name ?? ""): \(error?.message ?? "")")
        #expect(error?.message.contains(destination) == true)
        let partial = try await SmallFileSystem.partialFetchError(of: "big.bin", from: backend)
        #expect(partial?.code == .fileWriteOutOfSpace, "\(partial?.code.name ?? ""): \(partial?.message ?? "")")
        await backend.close()
    }

    private func bytes(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) }) }
}
