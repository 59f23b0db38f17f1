import Foundation
import ProviderCore
import ProviderEngine
import ProviderService
import ProviderStore
import ProviderTesting
import SFTPAdapter
import Testing

/// The real sshd goes away in the middle of a `serve` pass that uploads hundreds of files; edits
/// made while it is down stay queued; once sshd is back on the same port, serve (backing off)
/// resumes by itself and everything reaches the store, once.
@Suite struct SFTPOutageTests {
    /// Regular files below `root` by relative path, without the adapter's staging files.
    static func storeFiles(_ root: URL) -> [String: Data] {
        var result: [String: Data] = [:]
        for (path, data) in snapshot(of: root) {
            guard let data, !path.split(separator: "/").last!.hasPrefix(".fileprovider-staging-") else { continue }
            result[path] = data
        }
        return result
    }

    @Test(arguments: chaosSeeds(default: [7, 8]))
    func sshdStopsMidSyncAndServeUploadsEverythingOnceItIsBack(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        let server = try await SSHServer.started()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-sftp-outage-\(seed)-\(UUID().uuidString)")
            .resolvingSymlinksInPath()
        let root = folder.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("existing"), withIntermediateDirectories: true)
        var expected: [String: Data] = [:]
        for index in 0..<10 {
            let path = "existing/e\(index).txt"
            expected[path] = Data("base \(index)".utf8)
            try expected[path]!.write(to: root.appendingPathComponent(path))
        }

        let home = folder.appendingPathComponent("home")
        let registry = BackendRegistry([SFTPBackend.descriptor])
        let manager = try ProviderManager(home: home, registry: registry)
        try await manager.addDomain(name: "remote", kind: "sftp", options: server.options(root: root.path))
        let controller = try await manager.controller(for: "remote")
        try await controller.sync()
        #expect(await controller.materialize(paths: ["existing"], recursive: true).allSatisfy { $0.error == nil })
        func write(_ data: Data, _ path: String) throws {
            let url = controller.replica.url(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url, options: .atomic)
        }

        // Hundreds of new files and a few large ones, and edits of downloaded files.
        var uploads: [String] = []
        for index in 0..<300 {
            let path = "new/n\(index % 6)/file \(index).bin"
            let size = index % 75 == 0 ? 2 << 20 : Int.random(in: 0...4000, using: &rng)
            expected[path] = Data("new \(index) (seed \(seed))\n".utf8) + randomBytes(size, using: &rng)
            try write(expected[path]!, path)
            uploads.append(path)
        }
        for index in 0..<4 {
            let path = "existing/e\(index).txt"
            expected[path] = Data("edited before the outage \(index)".utf8)
            try write(expected[path]!, path)
        }

        // serve, on a second manager of the same home as a separate process would have, with
        // short backoff times; its first pass starts uploading at once.
        let serveManager = try ProviderManager(home: home, registry: registry, backoffPolicy: BackoffPolicy(base: 0.1, cap: 0.5, jitter: 0))
        let serve = quietServer(serveManager, "remote", ServeOptions(pollInterval: 3600, settleSeconds: 0, debounceSeconds: 0.05))
        let serving = Task { try await serve.run() }

        // sshd stops (killed with every session) after a seeded number of the new files arrived.
        let cut = Int.random(in: 20...150, using: &rng)
        func arrived() -> Int { uploads.filter { FileManager.default.fileExists(atPath: root.appendingPathComponent($0).path) }.count }
        // Generous: on a loaded machine (a full parallel run on 2 cores) serve's first pass can
        // take longer than 30 s to send the first files.
        #expect(await eventually(timeout: 180) { arrived() >= cut }, "seed \(seed): serve never uploaded \(cut) files")
        await server.stopped()
        let before = arrived()
        #expect(before < uploads.count, "seed \(seed): the pass finished before sshd stopped; nothing was interrupted")
        #expect(try await eventually { try serveManager.domain(named: "remote").failureCount >= 1 }, "seed \(seed): serve did not back off")
        let failed = try serveManager.domain(named: "remote")
        #expect(failed.lastError != nil && failed.nextRetryAt != nil, "seed \(seed)")

        // Edits while sshd is down: new files, an edit, a rename, a deletion. They stay queued.
        for index in 0..<5 {
            let path = "during/d\(index).txt"
            expected[path] = Data("written during the outage \(index) ".utf8) + randomBytes(100, using: &rng)
            try write(expected[path]!, path)
        }
        expected["existing/e5.txt"] = Data("edited during the outage".utf8)
        try write(expected["existing/e5.txt"]!, "existing/e5.txt")
        try FileManager.default.moveItem(at: controller.replica.url("existing/e6.txt"), to: controller.replica.url("existing/renamed.txt"))
        expected["existing/renamed.txt"] = expected.removeValue(forKey: "existing/e6.txt")
        try FileManager.default.removeItem(at: controller.replica.url("existing/e7.txt"))
        expected["existing/e7.txt"] = nil
        // serve keeps retrying by itself while sshd is down, and nothing is lost meanwhile.
        let failures = failed.failureCount
        #expect(try await eventually { try serveManager.domain(named: "remote").failureCount > failures }, "seed \(seed)")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("during").path))
        for (path, data) in expected {
            #expect(try Data(contentsOf: controller.replica.url(path)) == data, "seed \(seed): \(path) changed during the outage")
        }
        #expect(arrived() == before, "seed \(seed): files reached a stopped server")

        // sshd comes back on the same port: no signal, no manual sync.
        try await server.restarted()
        let converged = await eventually(timeout: 60) { Self.storeFiles(root) == expected }
        let store = Self.storeFiles(root)
        #expect(
            converged,
            "seed \(seed): missing \(Set(expected.keys).subtracting(store.keys).sorted()), extra \(Set(store.keys).subtracting(expected.keys).sorted()), different \(expected.keys.filter { store[$0] != nil && store[$0] != expected[$0] }.sorted())"
        )
        #expect(try await eventually { try serveManager.domain(named: "remote").failureCount == 0 }, "seed \(seed)")
        #expect(try await eventually { try manager.store.unfinishedOperations(domainID: controller.domainID).isEmpty }, "seed \(seed)")
        #expect(try serveManager.domain(named: "remote").lastError == nil, "seed \(seed)")
        serve.stop()
        try await serving.value

        // A last sync finds nothing to do: nothing was uploaded twice or left behind.
        let quiet = try await controller.sync()
        #expect(quiet.uploaded == 0 && quiet.conflicts == 0 && quiet.added == 0 && quiet.deleted == 0, "seed \(seed): \(quiet)")
        #expect(Self.storeFiles(root) == expected, "seed \(seed)")
        // Every file in the replica is downloaded or uploaded, so the replica equals the store.
        let replica = Self.storeFiles(controller.replica.root)
        #expect(replica == expected, "seed \(seed): the replica differs: \(Set(replica.keys).symmetricDifference(expected.keys).sorted())")
        #expect(try manager.store.integrityCheck() == "ok")
        let staging = snapshot(of: root).keys.filter { $0.split(separator: "/").last!.hasPrefix(".fileprovider-staging-") }
        print("sftp outage seed \(seed): sshd stopped after \(before) of \(uploads.count) uploads; staging files left on the server: \(staging.count)")

        await manager.close()
        await serveManager.close()
        await server.stopped()
        server.removeFiles()
        try? FileManager.default.removeItem(at: folder)
    }
}
