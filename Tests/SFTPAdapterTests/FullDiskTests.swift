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
}
