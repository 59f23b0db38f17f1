import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderTesting
import Testing

/// The media-servers the suites share, started on first use off the cooperative pool; each check
/// gets a fresh folder.
enum SharedServers {
    private static let extendedStartup = Task { try await offThePool { try MediaServer() } }
    private static let compatStartup = Task { try await offThePool { try MediaServer(compat: true) } }

    /// The media-server with the extended API.
    /// - Throws: why it could not be started.
    static func extended() async throws -> MediaServer { try await extendedStartup.value }

    /// The media-server in `--compat` mode (the original API).
    /// - Throws: why it could not be started.
    static func compat() async throws -> MediaServer { try await compatStartup.value }
}

@Suite("BackendConformance against media-server")
struct ConformanceTests {
    /// A media backend over a fresh folder of the extended media-server, with small pages so
    /// paging is exercised.
    static let media = BackendConformance(
        makeBackend: {
            let server = try await SharedServers.extended()
            let folder = try server.makeFolder()
            return try await MediaBackend(url: server.url, root: folder, pageSize: 64)
        },
        sameStore: secondBackend)

    /// A second backend over the server and root folder of `first` (another writer of its store).
    @Sendable static func secondBackend(_ first: any Backend) async throws -> any Backend {
        let first = try #require(first as? MediaBackend)
        return try await MediaBackend(url: first.baseURL, root: first.root, pageSize: first.pageSize)
    }

    @Test("MediaBackend (extended)", arguments: BackendConformance.checkNames)
    func media(_ name: String) async throws {
        try await Self.media.run(name)
    }

    /// The original API (media-server `--compat`): it lists only `.jpg`, `.jpeg` and `.png`
    /// files, so the suite's names get `.jpg`; what it cannot do is declared.
    static let original = BackendConformance(
        makeBackend: {
            let server = try await SharedServers.compat()
            let folder = try server.makeFolder()
            return try await MediaBackend(url: server.url, root: folder, pageSize: 64)
        },
        limitations: .init(
            cannot: [
                "contentVersionChangesWithContents":
                    "no ETag: a version is the size and Last-Modified in seconds, the same after a same-size edit within a second",
                "partialReadOfAChangedVersionThrows":
                    "no ETag: a version is the size and Last-Modified in seconds, the same after a same-size edit within a second",
                "nameOf255Bytes": "every name needs `.jpg` to be listed, which makes a 255-byte name too long",
            ], fileNameSuffix: ".jpg"),
        sameStore: secondBackend)

    @Test("MediaBackend (original API)", arguments: original.applicableCheckNames)
    func mediaOriginal(_ name: String) async throws {
        try await Self.original.run(name)
    }

    /// A store that lists only some files, run without a name suffix it lists, is refused with
    /// a message saying what to give the suite (its checks would fail for the wrong reason).
    @Test func aStoreThatListsOnlySomeFilesNeedsASuffix() async throws {
        let bare = BackendConformance(makeBackend: {
            let server = try await SharedServers.compat()
            return try await MediaBackend(url: server.url, root: try server.makeFolder(), pageSize: 64)
        })
        let failure = await #expect(throws: ConformanceFailure.self) { try await bare.run("createFolder") }
        #expect(failure?.message.contains("fileNameSuffix") == true, "\(String(describing: failure))")
    }

    @Test func extendedServerIsDiscovered() async throws {
        let backend = try await MediaBackend(url: try await SharedServers.extended().url)
        defer { Task { await backend.close() } }
        #expect(backend.dialect == .extended)
        #expect(backend.capabilities.supportsServerSideMove)
        #expect(backend.capabilities.supportsConditionalWrites)
        #expect(backend.capabilities.supportsThumbnails)
        #expect(backend.capabilities.maximumUploadSize == nil)
        #expect(!backend.capabilities.listsOnlySomeFiles)
    }
}
