import Foundation
import JSONStoreBackend
import ProviderCore
import ProviderTesting
import Testing

/// The whole opt-in: every check of the shared suite against a fresh store file per check.
@Suite struct ConformanceTests {
    static let conformance = BackendConformance(
        makeBackend: { try JSONStoreBackend(file: try TemporaryFolder("json-store").url("store.json"), pageSize: 7) },
        tearDown: { backend in
            if let store = backend as? JSONStoreBackend { try? FileManager.default.removeItem(at: store.file.deletingLastPathComponent()) }
        })

    @Test(arguments: BackendConformance.checkNames)
    func conformance(_ name: String) async throws {
        try await Self.conformance.run(name)
    }

    /// The descriptor: a domain names its store file with `--file`, a path the engine stores
    /// absolute and keeps apart from replicas (`isStoreLocation`).
    @Test func descriptorValidatesAndMakesABackend() async throws {
        let folder = try TemporaryFolder("json-store")
        defer { folder.remove() }
        let registry = BackendRegistry([JSONStoreBackend.descriptor])
        let backend = try await registry.makeBackend(kind: "jsonstore", values: ["file": folder.url("s.json").path])
        let root = try await backend.item(for: .rootContainer)
        #expect(root.kind == .folder)
        await backend.close()
        #expect(JSONStoreBackend.descriptor.options.first { $0.name == "file" }?.isStoreLocation == true)
        #expect(throws: FileProviderError.self) { try JSONStoreBackend.descriptor.validate([:]) }
    }
}
