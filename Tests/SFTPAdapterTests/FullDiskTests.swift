import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// A download whose destination's disk is full: the local disk, not the store, is out of space.
@Suite("SFTP full disk")
struct FullDiskTests {
    @Test func aFullDiskWhileFetchingIsFileWriteOutOfSpace() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        try Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: root + "/big.bin"))
        let backend = try TestServer.backend(server, root: root)
        let (error, destination) = try await SmallFileSystem.fetchError(of: "big.bin", from: backend)
        #expect(error?.code == .fileWriteOutOfSpace, "\(error?.code.name ?? ""): \(error?.message ?? "")")
        #expect(error?.message.contains(destination) == true)
        let partial = try await SmallFileSystem.partialFetchError(of: "big.bin", from: backend)
        #expect(partial?.code == .fileWriteOutOfSpace, "\(partial?.code.name ?? ""): \(partial?.message ?? "")")
        await backend.close()
    }
}
