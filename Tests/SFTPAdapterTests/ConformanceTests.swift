import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

@Suite("BackendConformance over SFTP")
struct ConformanceTests {
    /// A backend over a fresh folder of the shared sshd, with small pages so paging is exercised.
    static let sftp = BackendConformance(
        makeBackend: { try TestServer.backend(try await TestServer.shared(), pageSize: 64) },
        sameStore: { first in
            try TestServer.backend(try await TestServer.shared(), root: try #require(first as? SFTPBackend).rootFolder, pageSize: 64)
        },
        tearDown: { backend in
            if let sftp = backend as? SFTPBackend { try? FileManager.default.removeItem(atPath: sftp.rootFolder) }
        })

    @Test("SFTPBackend", arguments: BackendConformance.checkNames)
    func conformance(_ name: String) async throws {
        try await Self.sftp.run(name)
    }

    @Test func runsEveryCheck() {
        #expect(BackendConformance.checkNames.count == 86)
    }
}
