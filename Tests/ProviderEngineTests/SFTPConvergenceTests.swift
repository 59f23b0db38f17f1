import Foundation
import ProviderCore
import ProviderEngine
import ProviderTesting
import SFTPAdapter
import Testing

extension ChaosStore {
    /// A folder under `folder`, served by `server` (a real OpenSSH sshd) and reached by `sftp`
    /// domains.
    static func sftp(_ server: SSHServer, in folder: URL) throws -> ChaosStore {
        let root = folder.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let options = server.options(root: root.path)
        let backend = try SFTPBackend(configuration: try SFTPBackend.descriptor.validate(options))
        return ChaosStore(
            label: "sftp", root: root, kind: "sftp", options: options, registry: BackendRegistry([SFTPBackend.descriptor]),
            backend: backend, secondsOnlyVersions: true)
    }
}

/// The two-device experiment of ``ConvergenceTests`` over SFTP: two homes with `sftp` domains on
/// one folder of a real sshd, and the store actor editing that folder directly. Same steps, same
/// checks: both replicas equal the store, nothing written is lost, no temporary files, an
/// intact database and an empty journal.
@Suite struct SFTPConvergenceTests {
    static let seeds = chaosSeeds(default: [101, 102])

    @Test(arguments: seeds)
    func twoDevicesOnAnSFTPStoreConverge(seed: UInt64) async throws {
        let server = try await SSHServer.shared()
        try await ChaosWorld.experiment(seed: seed, steps: chaosSetting("CHAOS_STEPS", default: 200)) { try ChaosStore.sftp(server, in: $0) }
    }
}
