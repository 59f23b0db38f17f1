import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// The probe of conditional writes when a backend connects: SeaweedFS 4.48 (`412`) and moto
/// 5.2.1 (`404 NoSuchKey`) honour `If-Match` on `PutObject`, so their backends declare
/// conditional writes (and the conformance suite races two writers on them); a store that
/// ignores it writes the probe object, which is deleted again, and the backend declares none.
@Suite("S3 conditional writes probe")
struct ConditionalWriteProbeTests {
    @Test(arguments: MultipartTests.Server.allCases)
    func realStoresHonourIfMatchAndNothingIsLeft(_ server: MultipartTests.Server) async throws {
        let backend = try await MultipartTests.backend(server)
        #expect(backend.capabilities.supportsConditionalWrites)
        let objects = try await backend.allKeys(below: .root)
        #expect(objects.isEmpty, "the probe left \(objects.map(\.key))")
        await backend.close()
    }

    @Test func aStoreIgnoringIfMatchIsDeclaredWithoutConditionalWritesAndTheProbeDeleted() async throws {
        let (backend, server) = try await HostileServerTests.backend(
            root: { _ in HostileServerTests.ok(HostileServerTests.listing(prefix: "")) },
            other: { request in
                if request.method == "PUT" || request.method == "DELETE" {
                    return .reply(status: request.method == "PUT" ? 200 : 204, headers: ["ETag": "\"e1\""], body: Data())
                }
                return .reply(status: 404, headers: [:], body: Data())
            })
        defer { server.stop() }
        #expect(!backend.capabilities.supportsConditionalWrites)
        let put = try #require(server.requests.first { $0.method == "PUT" })
        #expect(put.headers["if-match"] != nil)
        #expect(server.requests.contains { $0.method == "DELETE" && $0.path == put.path })
    }
}
