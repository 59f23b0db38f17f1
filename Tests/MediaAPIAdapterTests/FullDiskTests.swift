import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderTesting
import Testing

/// A download whose destination's disk is full: the local disk, not the server, is out of space.
@Suite("Media API full disk")
struct FullDiskTests {
    @Test func aFullDiskWhileFetchingIsFileWriteOutOfSpace() async throws {
        let data = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let api = OriginalAPI(files: ["big.bin": data])
        let server = try FaultServer { request in api.answer(request) ?? api.full(request) }
        let backend = try await MediaBackend(url: server.url, token: nil, timeout: 30, connections: 1, retries: 3)
        let (error, _) = try await SmallFileSystem.fetchError(of: "big.bin", from: backend)
        #expect(error?.code == .fileWriteOutOfSpace, "\(error?.code.name ?? ""): \(error?.message ?? "")")
        #expect(error?.message.contains("No space left on device") == true, "\(error?.message ?? "")")
        await backend.close()
    }

    @Test func aFullDiskDuringARangedReadIsFileWriteOutOfSpace() async throws {
        let server = try await SharedServers.extended()
        let folder = try server.makeFolder()
        try server.put("big.bin", Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }), in: folder)
        let backend = try await MediaBackend(url: server.url, root: folder, connections: 1, retries: 1)
        let error = try await SmallFileSystem.partialFetchError(of: "big.bin", from: backend)
        #expect(error?.code == .fileWriteOutOfSpace, "\(error?.code.name ?? ""): \(error?.message ?? "")")
        await backend.close()
    }
}
