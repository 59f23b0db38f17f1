import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderTesting
import Testing

/// One media-server (extended) for the conformance checks; each check gets a fresh folder.
enum SharedServers {
    static let extended: MediaServer = {
        do {
            return try MediaServer()
        } catch {
            fatalError("cannot start media-server: \(error)")
        }
    }()

    static let compat: MediaServer = {
        do {
            return try MediaServer(compat: true)
        } catch {
            fatalError("cannot start media-server --compat: \(error)")
        }
    }()
}

@Suite("BackendConformance against media-server")
struct ConformanceTests {
    /// A media backend over a fresh folder of the extended media-server, with small pages so
    /// paging is exercised.
    static let media = BackendConformance(
        makeBackend: {
            let server = SharedServers.extended
            let folder = try server.makeFolder()
            return try await MediaBackend(url: server.url, root: folder, pageSize: 64)
        })

    @Test("MediaBackend (extended)", arguments: BackendConformance.checkNames)
    func media(_ name: String) async throws {
        try await Self.media.run(name)
    }

    @Test func extendedServerIsDiscovered() async throws {
        let backend = try await MediaBackend(url: SharedServers.extended.url)
        defer { Task { await backend.close() } }
        #expect(backend.dialect == .extended)
        #expect(backend.capabilities.supportsServerSideMove)
        #expect(backend.capabilities.supportsConditionalWrites)
        #expect(backend.capabilities.supportsThumbnails)
        #expect(backend.capabilities.maximumUploadSize == nil)
        #expect(!backend.capabilities.listsOnlySomeFiles)
    }
}
