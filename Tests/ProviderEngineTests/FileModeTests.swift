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

/// The permission bits of a file, not following symlinks; `nil` when there is none.
private func mode(_ path: String) -> mode_t? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o7777
}

/// Runs `command` with `/bin/sh -c` in `folder`; its exit status.
private func run(_ command: String, in folder: String) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    process.currentDirectoryURL = URL(fileURLWithPath: folder)
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// Modes (the executable bit, `Item.fileSystemFlags`) from the store reach the replica file
/// and stay across eviction and re-download, in both replica modes.
@Suite struct FileModeTests {
    static let script = "#!/bin/sh\nexit 0\n"

    @Test(arguments: [ReplicaMode.placeholderFiles, .dataless])
    func aStoreModeSurvivesMaterializeEvictionAndRedownload(mode replicaMode: ReplicaMode) async throws {
        try await StoreFolderFixture.with("modes") { f in try await Self.storeModeSurvives(f, mode: replicaMode) }
    }

    /// The same over SFTP (a real sshd on loopback): the permissions attribute.
    @Test(.enabled(if: SSHServer.isAvailable), arguments: [ReplicaMode.placeholderFiles, .dataless])
    func anSFTPStoreModeSurvivesMaterializeEvictionAndRedownload(mode replicaMode: ReplicaMode) async throws {
        let server = try await SSHServer.shared()
        try await StoreFolderFixture.with("modes", sftp: server) { f in try await Self.storeModeSurvives(f, mode: replicaMode) }
    }

    private static func storeModeSurvives(_ f: StoreFolderFixture, mode replicaMode: ReplicaMode) async throws {
        try f.write("run.sh", Self.script, mode: 0o755)
        try f.write("plain.txt", "plain", mode: 0o644)
        try f.write("private.sh", Self.script, mode: 0o700)
        let controller = try await f.addDomain(mode: replicaMode)
        try await controller.sync()
        let replica = controller.replica
        let stored = try #require(try f.manager.store.item(domainID: controller.domainID, path: "run.sh"))
        #expect(stored.flags.contains(.userExecutable))
        #expect(try f.manager.store.item(domainID: controller.domainID, path: "plain.txt")?.flags == .plainFile)
        if replicaMode == .dataless {
            // The dataless file has the x bits before a byte is downloaded.
            #expect(mode(replica.path("run.sh")) == 0o755)
            #expect(mode(replica.path("plain.txt")) == 0o644)
        }
        for round in 0..<2 {
            let outcomes = await controller.materialize(paths: ["run.sh", "plain.txt", "private.sh"], recursive: false)
            #expect(outcomes.allSatisfy { $0.error == nil }, "round \(round): \(outcomes)")
            #expect(mode(replica.path("run.sh")) == 0o755, "round \(round)")
            #expect(mode(replica.path("plain.txt")) == 0o644, "round \(round)")
            // Only the executable bit is the item's: the rest is the replica's (the umask's).
            #expect(mode(replica.path("private.sh")) == 0o755, "round \(round)")
            #expect(try run("./run.sh", in: replica.root.path) == 0, "round \(round)")
            #expect(try run("./private.sh", in: replica.root.path) == 0, "round \(round)")
            let evicted = await controller.evict(paths: ["run.sh", "plain.txt", "private.sh"], recursive: false)
            #expect(evicted.allSatisfy { $0.error == nil }, "round \(round): \(evicted)")
            if replicaMode == .dataless {
                #expect(mode(replica.path("run.sh")) == 0o755, "round \(round)")
                #expect(mode(replica.path("plain.txt")) == 0o644, "round \(round)")
            } else {
                #expect(mode(replica.path("run.sh")) == nil, "round \(round)")
            }
        }
    }

    /// A `chmod` in the store is a metadata change: the next sync gives the downloaded file
    /// the new mode.
    @Test func aChmodInTheStoreReachesADownloadedFile() async throws {
        try await StoreFolderFixture.with("modes") { f in
            try f.write("tool", Self.script, mode: 0o644)
            let controller = try await f.addDomain(mode: .placeholderFiles)
            try await controller.sync()
            _ = await controller.materialize(paths: ["tool"], recursive: false)
            #expect(mode(controller.replica.path("tool")) == 0o644)
            #expect(chmod(f.store.appendingPathComponent("tool").path, 0o755) == 0)
            try await controller.sync()
            #expect(mode(controller.replica.path("tool")) == 0o755)
            #expect(try run("./tool", in: controller.replica.root.path) == 0)
        }
    }

    /// A row written before the flags were kept (a plain file's, the default of migration
    /// v17) of an executable file downloaded as 0644: the next sync records the store's bit
    /// and gives it to the file, with no change in the store's versions.
    @Test func rowsFromBeforeTheFlagsLearnThemAtTheNextSync() async throws {
        try await StoreFolderFixture.with("modes") { f in
            try f.write("run.sh", Self.script, mode: 0o755)
            let controller = try await f.addDomain(mode: .placeholderFiles)
            // One-shot syncs, as the CLI's (and the first of each process): listings, not the
            // local store's feed of this process.
            try await controller.sync(followChanges: false)
            _ = await controller.materialize(paths: ["run.sh"], recursive: false)
            let local = controller.replica.path("run.sh")
            var record = try #require(try f.manager.store.item(domainID: controller.domainID, path: "run.sh"))
            record.fileSystemFlags = FileSystemFlags.plainFile.rawValue
            try f.manager.store.save(record)
            #expect(chmod(local, 0o644) == 0)
            let report = try await controller.sync(followChanges: false)
            #expect(report.uploaded == 0, "\(report)")
            #expect(mode(local) == 0o755)
            #expect(try f.manager.store.item(domainID: controller.domainID, path: "run.sh")?.isExecutable == true)
        }
    }

    /// An `evict` right after a local chmod, before a sync sent it, is refused (`unsyncedEdits`)
    /// where the store keeps the bit: the eviction would undo it.
    @Test func anEvictionBeforeTheChmodWentUpIsRefused() async throws {
        try await StoreFolderFixture.with("modes") { f in
            try f.write("tool", Self.script, mode: 0o644)
            let controller = try await f.addDomain(mode: .placeholderFiles)
            try await controller.sync()
            _ = await controller.materialize(paths: ["tool"], recursive: false)
            let local = controller.replica.path("tool")
            #expect(chmod(local, 0o755) == 0)
            let refused = await controller.evict(paths: ["tool"], recursive: false)
            #expect(refused.first?.error?.code == .unsyncedEdits, "\(refused)")
            #expect(mode(local) == 0o755)
            #expect(try await controller.sync().uploaded == 1)
            let evicted = await controller.evict(paths: ["tool"], recursive: false)
            #expect(evicted.allSatisfy { $0.error == nil }, "\(evicted)")
            _ = await controller.materialize(paths: ["tool"], recursive: false)
            #expect(mode(local) == 0o755)
        }
    }

    /// A local `chmod +x` of a downloaded file goes up as a metadata change (`modifyItem` of
    /// `.fileSystemFlags`) and outlives an eviction; `chmod -x` goes up too.
    @Test(arguments: [ReplicaMode.placeholderFiles, .dataless])
    func aChmodInTheReplicaReachesALocalStore(mode replicaMode: ReplicaMode) async throws {
        try await StoreFolderFixture.with("modes") { f in try await Self.chmodReachesTheStore(f, mode: replicaMode) }
    }

    /// The same over SFTP (a real sshd on loopback): the permissions attribute.
    @Test(.enabled(if: SSHServer.isAvailable)) func aChmodInTheReplicaReachesAnSFTPStore() async throws {
        let server = try await SSHServer.shared()
        try await StoreFolderFixture.with("modes", sftp: server) { f in try await Self.chmodReachesTheStore(f) }
    }

    /// `pending` (``ProviderManager/unsentChanges(inDomain:)``) lists the chmod of `path`, in
    /// this manager and in another command's.
    private static func expectUnsentChmod(_ f: StoreFolderFixture, _ path: String) async throws {
        let other = try f.otherManager()
        for manager in [f.manager, other] {
            let unsent = try await manager.unsentChanges(inDomain: "d")
            #expect(unsent.map(\.path) == ["/" + path], "\(unsent)")
            #expect(unsent.first?.reason.contains("executable bit") == true, "\(unsent)")
        }
        await other.close()
    }

    /// A `chmod` of a dataless file (never downloaded) goes up as a metadata change too, the
    /// item stays not downloaded, and its download has the mode.
    @Test func aChmodOfAFileNeverDownloadedReachesALocalStore() async throws {
        try await StoreFolderFixture.with("modes") { f in try await Self.chmodOfADatalessFileReachesTheStore(f) }
    }

    /// The same over SFTP (a real sshd on loopback).
    @Test(.enabled(if: SSHServer.isAvailable)) func aChmodOfAFileNeverDownloadedReachesAnSFTPStore() async throws {
        let server = try await SSHServer.shared()
        try await StoreFolderFixture.with("modes", sftp: server) { f in try await Self.chmodOfADatalessFileReachesTheStore(f) }
    }

    /// The store's `tool` (mode 644) in a new domain `d` in `replicaMode`, downloaded first when
    /// `download`; a local `chmod 755` of it, which `pending` lists, then a sync that sends it:
    /// the store's file has the bit. Returns the controller, the local path and the store's.
    private static func chmodTool(_ f: StoreFolderFixture, mode replicaMode: ReplicaMode, download: Bool) async throws -> (
        DomainController, local: String, storePath: String
    ) {
        try f.write("tool", script, mode: 0o644)
        let storePath = f.store.appendingPathComponent("tool").path
        let controller = try await f.addDomain(mode: replicaMode)
        try await controller.sync()
        if download { _ = await controller.materialize(paths: ["tool"], recursive: false) }
        let local = controller.replica.path("tool")
        #expect(mode(local) == 0o644)
        #expect(chmod(local, 0o755) == 0)
        try await expectUnsentChmod(f, "tool")
        let report = try await controller.sync()
        #expect(report.uploaded == 1, "\(report)")
        #expect(mode(storePath) == 0o755)
        return (controller, local, storePath)
    }

    private static func chmodOfADatalessFileReachesTheStore(_ f: StoreFolderFixture) async throws {
        let (controller, local, storePath) = try await chmodTool(f, mode: .dataless, download: false)
        let record = try #require(try f.manager.store.item(domainID: controller.domainID, path: "tool"))
        #expect(record.flags.contains(.userExecutable) && record.state == .placeholder)
        #expect(try await controller.sync().uploaded == 0)
        #expect(try await f.manager.unsentChanges(inDomain: "d").isEmpty)
        #expect(mode(local) == 0o755)
        _ = await controller.materialize(paths: ["tool"], recursive: false)
        #expect(mode(local) == 0o755)
        #expect(try run("./tool", in: controller.replica.root.path) == 0)
        #expect(FileManager.default.contents(atPath: local) == Data(script.utf8))
        // And back, on the dataless file again.
        _ = await controller.evict(paths: ["tool"], recursive: false)
        #expect(chmod(local, 0o644) == 0)
        #expect(try await controller.sync().uploaded == 1)
        #expect(mode(storePath) == 0o644)
    }

    /// Automatic eviction (here of another command, which knows the store only by its
    /// backend's descriptor) keeps a file whose local `chmod` was not sent: the placeholder or
    /// the new dataless file would get the store's mode back. Once sent, the file goes, and the
    /// bit comes back with the next download.
    @Test(arguments: [ReplicaMode.placeholderFiles, .dataless])
    func automaticEvictionKeepsAFileWithAnUnsentChmod(mode replicaMode: ReplicaMode) async throws {
        try await StoreFolderFixture.with("modes") { f in
            try f.write("tool", Self.script, mode: 0o644)
            try f.write("plain.txt", "plain", mode: 0o644)
            let controller = try await f.addDomain(mode: replicaMode)
            try await controller.sync()
            _ = await controller.materialize(paths: ["tool", "plain.txt"], recursive: false)
            let local = controller.replica.path("tool")
            #expect(chmod(local, 0o755) == 0)
            try f.manager.setCacheBudget(ofDomain: "d", 0)
            let other = try f.otherManager()
            for manager in [other, f.manager] {
                let pass = try await Evictor(manager: manager).run()
                #expect(pass.evicted.map(\.path) == ["/plain.txt"], "\(pass.evicted)")
                let kept = pass.kept.first { $0.path == "/tool" }
                #expect(kept?.reason.contains("executable bit") == true, "\(pass.kept)")
                #expect(mode(local) == 0o755)
                #expect(try f.manager.store.item(domainID: controller.domainID, path: "tool")?.state == .materialized)
                _ = await controller.materialize(paths: ["plain.txt"], recursive: false)
            }
            #expect(try await controller.sync().uploaded == 1)
            let pass = try await Evictor(manager: other).run()
            #expect(pass.evicted.map(\.path).contains("/tool"), "\(pass.evicted) \(pass.kept)")
            await other.close()
            _ = await controller.materialize(paths: ["tool"], recursive: false)
            #expect(mode(local) == 0o755)
            #expect(try run("./tool", in: controller.replica.root.path) == 0)
        }
    }

    private static func chmodReachesTheStore(_ f: StoreFolderFixture, mode replicaMode: ReplicaMode = .placeholderFiles) async throws {
        let (controller, local, storePath) = try await chmodTool(f, mode: replicaMode, download: true)
        #expect(try await f.manager.unsentChanges(inDomain: "d").isEmpty)
        let record = try #require(try f.manager.store.item(domainID: controller.domainID, path: "tool"))
        #expect(record.flags.contains(.userExecutable))
        #expect(record.state == .materialized && !record.isOutdated)
        // Nothing more to send, and the x bit outlives an eviction.
        #expect(try await controller.sync().uploaded == 0)
        _ = await controller.evict(paths: ["tool"], recursive: false)
        if replicaMode == .dataless { #expect(mode(local) == 0o755) }
        _ = await controller.materialize(paths: ["tool"], recursive: false)
        #expect(mode(local) == 0o755)
        #expect(try run("./tool", in: controller.replica.root.path) == 0)
        // And back.
        #expect(chmod(local, 0o644) == 0)
        #expect(try await controller.sync().uploaded == 1)
        #expect(mode(storePath) == 0o644)
        #expect(try await controller.sync().uploaded == 0)
    }
}
