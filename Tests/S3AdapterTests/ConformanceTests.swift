import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// The SeaweedFS cluster the suites share (one master, two volume servers with replication
/// 001, a filer, the S3 gateway), started on first use off the cooperative pool, with one
/// bucket; each check gets a fresh prefix in it.
enum SharedSeaweedFS {
    private static let startup = Task { () throws -> (SeaweedFSCluster, String) in
        try await offThePool {
            let cluster = try SeaweedFSCluster()
            return (cluster, try cluster.makeBucket())
        }
    }

    /// - Throws: why the cluster could not be started.
    static func cluster() async throws -> (cluster: SeaweedFSCluster, bucket: String) { try await startup.value }

    /// A backend over a fresh, empty prefix of the shared bucket.
    static func backend(prefix: String = "store-\(UUID().uuidString)") async throws -> S3Backend {
        let (cluster, bucket) = try await cluster()
        return try await S3Backend(
            endpoint: cluster.endpoint, bucket: bucket, prefix: prefix, region: cluster.region, pathStyle: true,
            credentials: (cluster.accessKey, cluster.secretKey, nil))
    }
}

@Suite("BackendConformance against SeaweedFS (S3)")
struct ConformanceTests {
    static let s3 = BackendConformance(
        makeBackend: { try await SharedSeaweedFS.backend() },
        sameStore: { first in try await SharedSeaweedFS.backend(prefix: try #require(first as? S3Backend).prefix) })

    @Test("S3Backend", arguments: s3.applicableCheckNames)
    func conformance(_ name: String) async throws {
        try await Self.s3.run(name)
    }
}

/// moto's server mode, the second implementation (Python, in memory; it checks no
/// signature), started on first use; one bucket, a fresh prefix per check.
enum SharedMoto {
    private static let startup = Task { () throws -> (MotoS3Server, String) in
        try await offThePool {
            let server = try MotoS3Server()
            return (server, try server.makeBucket())
        }
    }

    /// - Throws: why the server could not be started.
    static func server() async throws -> (server: MotoS3Server, bucket: String) { try await startup.value }

    /// A backend over a fresh, empty prefix of the shared bucket.
    static func backend(prefix: String = "store-\(UUID().uuidString)") async throws -> S3Backend {
        let (server, bucket) = try await startup.value
        return try await S3Backend(
            endpoint: server.endpoint, bucket: bucket, prefix: prefix, region: server.region, pathStyle: true,
            credentials: (server.accessKey, server.secretKey, nil))
    }
}

@Suite("BackendConformance against moto (S3)")
struct MotoConformanceTests {
    static let s3 = BackendConformance(
        makeBackend: { try await SharedMoto.backend() },
        limitations: .init(cannot: [
            "nameWithNewline": "moto's web server (werkzeug) answers 404 to any request whose path holds a newline (%0A)"
        ]),
        sameStore: { first in try await SharedMoto.backend(prefix: try #require(first as? S3Backend).prefix) })

    @Test("S3Backend", arguments: s3.applicableCheckNames)
    func conformance(_ name: String) async throws {
        try await Self.s3.run(name)
    }
}
