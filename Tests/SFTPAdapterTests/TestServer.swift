import Foundation
import ProviderCore
import ProviderTesting

@testable import SFTPAdapter

/// The sshd shared by the tests that do not stop or restart it, started on first use.
enum TestServer {
    /// The shared server.
    /// - Throws: why it could not be started.
    static func shared() async throws -> SSHServer { try await SSHServer.shared() }

    /// A backend over a fresh, empty folder of `server`.
    static func backend(
        _ server: SSHServer, root: String? = nil, extra: [String: String] = [:], pageSize: Int = 2000,
        streamsPerTransfer: Int? = nil, readHandleIdleTime: UInt64 = SFTPBackend.readHandleIdleTime
    ) throws -> SFTPBackend {
        var options = server.options(root: try root ?? server.makeFolder())
        options.merge(extra) { $1 }
        let configuration = try SFTPBackend.descriptor.validate(options)
        return try SFTPBackend(
            target: ConnectionTarget(request: try SFTPBackend.request(configuration)),
            connections: try configuration.integer("connections") ?? 4, pageSize: pageSize,
            streamsPerTransfer: streamsPerTransfer, readHandleIdleTime: readHandleIdleTime)
    }

    /// The folder of this process's scratch folders, removed when the process exits.
    private static let scratchFolder: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sftp-tests-\(getpid())")
        atexit { try? FileManager.default.removeItem(at: TestServer.scratchFolder) }
        return url
    }()

    /// A scratch folder on the local disk for one test.
    static func scratch() throws -> URL {
        let url = scratchFolder.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

extension SFTPBackend {
    /// The root folder the backend was made with.
    var rootFolder: String { target.request?.rootPath ?? resolvedSettings?.rootPath ?? "." }
}
