import AdapterKit
import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

@testable import S3Adapter

/// An engine sync of an `s3` domain on a SeaweedFS cluster (two volume servers, replication
/// 001) loses one volume server (`SIGKILL` by pid) in the middle: once a number of its
/// uploads, or of its downloads, have finished, seen through ``TransferWatchingBackend``. The
/// sync finishes or fails with a clear error; what the database records is true of the
/// bucket and the replica (every recorded file is in the bucket with the recorded ETag, every
/// downloaded file holds the bucket's bytes); no local file is lost or changed. Once the
/// server is back, a second sync (a new manager on the same state folder, as a new process
/// would be) finishes without problems, and then every byte of the replica is the bucket's
/// and every local file is in the bucket.
@Suite("S3 engine sync losing a volume server", .timeLimit(.minutes(10)))
struct SyncVolumeLossTests {
    enum Moment: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case duringUploads, duringDownloads
        var testDescription: String { rawValue }
    }

    static let remoteCount = 40
    static let localCount = 40
    /// Transfers finished when the volume server is stopped.
    static let stopAfter = 8

    /// The bytes of file `index` of a set: sizes from 2 KB to 400 KB, different for each.
    static func contents(_ index: Int, seed: UInt8) -> Data {
        let size = 2_000 + index * 9_973
        var state = UInt32(index + 1) &* 2_654_435_761 ^ UInt32(seed)
        var bytes = [UInt8](repeating: 0, count: size)
        for offset in 0..<size {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            bytes[offset] = UInt8(truncatingIfNeeded: state)
        }
        return Data(bytes)
    }

    /// A registry with one kind, `s3-watched`: the S3 backend of `cluster`'s bucket (option
    /// `bucket`) behind ``TransferWatchingBackend``.
    static func registry(_ cluster: SeaweedFSCluster, watch: TransferWatchingBackend.Watch, http: HTTPOptions) -> BackendRegistry {
        BackendRegistry([
            BackendDescriptor(
                kind: "s3-watched", summary: "an S3 bucket on the test's SeaweedFS cluster, its transfers counted",
                options: [BackendOption(name: "bucket", help: "the bucket", isRequired: true)],
                factory: { configuration in
                    let backend = try await S3Backend(
                        endpoint: cluster.endpoint, bucket: try configuration.string("bucket"), region: cluster.region, pathStyle: true,
                        credentials: (cluster.accessKey, cluster.secretKey, nil), http: http)
                    return TransferWatchingBackend(forwardee: backend, watch: watch)
                })
        ])
    }

    @Test(arguments: Moment.allCases)
    func aSyncThatLosesAVolumeServerRecordsOnlyWhatIsTrueAndTheNextSyncFinishes(_ moment: Moment) async throws {
        let (cluster, bucket) = try await offThePool { () throws -> (SeaweedFSCluster, String) in
            let cluster = try SeaweedFSCluster()
            return (cluster, try cluster.makeBucket())
        }
        defer { cluster.stop() }
        let scratch = try MultipartTests.Scratch()
        let verifier = try await S3Backend(
            endpoint: cluster.endpoint, bucket: bucket, region: cluster.region, pathStyle: true,
            credentials: (cluster.accessKey, cluster.secretKey, nil), http: HTTPOptions(retries: 8))

        // The store's files, written by another client (curl) in two folders.
        var remote: [String: Data] = [:]
        for index in 0..<Self.remoteCount {
            remote["remote/\(index % 2 == 0 ? "even" : "odd")/file-\(index).bin"] = Self.contents(index, seed: 1)
        }
        let toPut = remote
        try await offThePool {
            for (key, data) in toPut.sorted(by: { $0.key < $1.key }) { try cluster.putObject(bucket: bucket, key: key, data) }
        }

        let home = scratch.url.appendingPathComponent("home")
        let replica = scratch.url.appendingPathComponent("replica")
        let stopped = TransferWatchingBackend.Watch(
            kind: moment == .duringUploads ? .upload : .download, after: Self.stopAfter,
            action: { cluster.stopVolumeServer(0) })
        // SeaweedFS 4.48 holds a write it cannot place without answering: a backend that gives
        // up after 5 s without a byte moving, retried once, keeps the first sync short.
        let manager = try ProviderManager(
            home: home, registry: Self.registry(cluster, watch: stopped, http: HTTPOptions(timeout: 5, retries: 1)))
        try await manager.addDomain(name: "bucket", kind: "s3-watched", options: ["bucket": bucket], replicaPath: replica.path)
        let controller = try await manager.controller(for: "bucket")
        // Everything downloaded by the sync itself.
        let pinned = await controller.pin(paths: [""])
        #expect(pinned.allSatisfy { $0.error == nil }, "\(pinned)")

        // The local files, sent by the same sync.
        var local: [String: Data] = [:]
        try FileManager.default.createDirectory(at: replica.appendingPathComponent("local"), withIntermediateDirectories: true)
        for index in 0..<Self.localCount {
            let path = "local/up-\(index).bin"
            local[path] = Self.contents(index, seed: 2)
            try local[path]!.write(to: replica.appendingPathComponent(path))
        }

        let firstError = await Self.syncOnce(controller, moment)
        #expect(
            stopped.hasFired, "the volume server was not stopped: \(stopped.count(.upload)) uploads, \(stopped.count(.download)) downloads")
        if let firstError {
            #expect([.serverUnreachable, .insufficientQuota].contains(firstError.code), "\(firstError)")
            #expect(!firstError.message.isEmpty)
        }
        // The loss came in the middle: the sync went on past it (the downloads from the other
        // copy) or failed on it.
        if moment == .duringDownloads && firstError == nil {
            #expect(stopped.count(.download) == Self.remoteCount)
        } else {
            #expect(firstError != nil || stopped.count(.upload) == Self.localCount)
        }
        // With one volume server gone (reads still come from the other copy).
        try await Self.checkRecordsAreTrue(controller, replica: replica, cluster: cluster, bucket: bucket, verifier: verifier)
        for (path, data) in local {
            #expect(try Data(contentsOf: replica.appendingPathComponent(path)) == data, "\(path) changed in the replica")
            if let stored = try await offThePool({ try cluster.getObject(bucket: bucket, key: path) }) {
                #expect(stored == data, "\(path) is in the bucket with other bytes")
            }
        }
        await manager.close()

        try await offThePool { try cluster.restartVolumeServer(0) }
        let unwatched = TransferWatchingBackend.Watch(kind: .upload, after: .max, action: {})
        let again = try ProviderManager(home: home, registry: Self.registry(cluster, watch: unwatched, http: HTTPOptions(retries: 8)))
        let second = try await again.controller(for: "bucket")
        let report = try await second.sync()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.notSent == 0 && report.skipped == 0)

        let records = try await Self.checkRecordsAreTrue(second, replica: replica, cluster: cluster, bucket: bucket, verifier: verifier)
        for (path, data) in remote {
            #expect(records[path]?.state == .materialized, "\(path) is not downloaded")
            #expect((try? Data(contentsOf: replica.appendingPathComponent(path))) == data, "\(path) is not the store's bytes")
        }
        for (path, data) in local {
            #expect(records[path]?.state == .materialized, "\(path) is not recorded as in the store")
            #expect(try await offThePool({ try cluster.getObject(bucket: bucket, key: path) }) == data, "\(path) did not reach the store")
        }
        let keys = try await verifier.allKeys(below: .root).filter { !$0.key.hasSuffix("/") }.map(\.key)
        #expect(Set(keys) == Set(remote.keys).union(local.keys))
        await again.close()
        await verifier.close()
    }

    /// Runs a sync and returns the error it failed with, if it did.
    static func syncOnce(_ controller: DomainController, _ moment: Moment) async -> FileProviderError? {
        do throws(FileProviderError) {
            let report = try await controller.sync()
            print(
                "S3 sync losing a volume server \(moment.rawValue): finished: \(report.uploaded) sent, \(report.downloaded) downloaded, \(report.notSent) not sent, \(report.skipped) skipped"
            )
            return nil
        } catch {
            print("S3 sync losing a volume server \(moment.rawValue): failed: \(error.code): \(error.message)")
            return error
        }
    }

    /// Checks that every file the database records is in the bucket with the recorded ETag,
    /// and that every one recorded as downloaded holds the bucket's bytes in the replica;
    /// returns the records by path.
    @discardableResult
    static func checkRecordsAreTrue(
        _ controller: DomainController, replica: URL, cluster: SeaweedFSCluster, bucket: String, verifier: S3Backend
    ) async throws -> [String: ItemRecord] {
        var byPath: [String: ItemRecord] = [:]
        for record in try controller.list(at: "", recursive: true) {
            byPath[record.path] = record
            guard record.kind == .file else { continue }
            let path = record.path
            let stored = try await offThePool { try cluster.getObject(bucket: bucket, key: path) }
            guard let stored else {
                Issue.record("\(path) is recorded, but the bucket does not hold it")
                continue
            }
            let head = try await verifier.head(ItemPath(components: path.split(separator: "/").map(String.init)))
            #expect(head?.version.content == record.contentVersion, "\(path): the recorded version is not the bucket's")
            #expect(record.size == Int64(stored.count), "\(path): the recorded size is not the bucket's")
            if record.state == .materialized {
                #expect(record.localContentVersion == record.contentVersion, "\(path)")
                #expect(
                    (try? Data(contentsOf: replica.appendingPathComponent(path))) == stored,
                    "\(path) is recorded as downloaded, but the replica does not hold the bucket's bytes")
            }
        }
        return byPath
    }
}
