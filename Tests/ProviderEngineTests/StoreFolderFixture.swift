import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import SFTPAdapter
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A store folder (served by the local backend, or by a real sshd over SFTP) and a manager of
/// a home of its own, for the suites that run the same checks over both stores (file modes,
/// content hashes and `verify`).
struct StoreFolderFixture {
    /// The fixture's own temporary folder: the home, the replicas and the local store.
    let folder: URL
    /// The store's folder (in ``folder``, or in the SFTP server's tree).
    let store: URL
    let manager: ProviderManager
    /// The backend: `local` or `sftp`.
    let kind: String
    let options: [String: String]
    let registry = BackendRegistry([LocalBackend.descriptor, SFTPBackend.descriptor])

    /// A fixture whose folders are named after `label`, over `server` (SFTP) or the local
    /// backend when it is `nil`.
    /// - Throws: when the folders cannot be made, or the manager cannot open its home.
    init(_ label: String, sftp server: SSHServer? = nil) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-\(label)-\(UUID().uuidString)")
            .resolvingSymlinksInPath()
        if let server {
            store = URL(fileURLWithPath: try server.makeFolder("\(label)-\(UUID().uuidString)"))
            kind = "sftp"
            options = server.options(root: store.path)
        } else {
            store = folder.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            kind = "local"
            options = ["root": store.path]
        }
        manager = try ProviderManager(home: folder.appendingPathComponent("home"), registry: registry)
    }

    /// Another manager of the same home, as another command's: it has no controller, so it
    /// knows the store's capabilities only from the backend's descriptor.
    func otherManager() throws -> ProviderManager {
        try ProviderManager(home: folder.appendingPathComponent("home"), registry: registry)
    }

    /// Adds the domain `name` on the store, its replica in ``folder``, and returns its controller.
    func addDomain(_ name: String = "d", mode: ReplicaMode = .placeholderFiles) async throws -> DomainController {
        try await manager.addDomain(
            name: name, kind: kind, options: options, replicaPath: folder.appendingPathComponent("replica-\(name)").path, mode: mode)
        return try await manager.controller(for: name)
    }

    /// Writes a file of the store (its folders made on the way).
    func write(_ path: String, _ data: Data) throws {
        let url = store.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    /// Writes a file of the store holding `text`, with the permission bits `mode`.
    func write(_ path: String, _ text: String, mode: mode_t) throws {
        try write(path, Data(text.utf8))
        #expect(chmod(store.appendingPathComponent(path).path, mode) == 0)
    }

    /// Runs `body` with a new fixture, then closes its manager and removes its folders, also
    /// when `body` throws.
    static func with(_ label: String, sftp server: SSHServer? = nil, _ body: (StoreFolderFixture) async throws -> Void) async throws {
        let fixture = try StoreFolderFixture(label, sftp: server)
        defer {
            try? FileManager.default.removeItem(at: fixture.folder)
            if server != nil { try? FileManager.default.removeItem(at: fixture.store) }
        }
        do {
            try await body(fixture)
        } catch {
            await fixture.manager.close()
            throw error
        }
        await fixture.manager.close()
    }
}
