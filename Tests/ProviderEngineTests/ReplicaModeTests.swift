import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The error `body` throws, or `nil` (recorded as an issue) when it throws none.
private func refusal<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T) async -> FileProviderError? {
    do {
        _ = try await body()
        Issue.record("expected a refusal, but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as FileProviderError {
        return error
    } catch {
        Issue.record("expected a FileProviderError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// The permission bits of a folder.
private func permissions(_ url: URL) -> mode_t {
    var info = stat()
    guard stat(url.path, &info) == 0 else { return 0 }
    return info.st_mode & 0o7777
}

/// A domain's replica mode: where its files are (the replica folder, or a dataless domain's
/// backing folder under the state folder), what `addDomain` makes and refuses, and what
/// `removeDomain` deletes. CI runs as root on ext4, where dataless domains can be added.
@Suite struct DatalessDomainTests {
    @Test func aPlaceholderFilesDomainKeepsItsFilesInItsReplicaFolder() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            let domain = try f.manager.domain(named: "mem")
            #expect(domain.replicaMode == .placeholderFiles)
            #expect(try f.manager.backingURL(of: domain) == nil)
            #expect(try f.manager.replicaRoot(of: domain).path == domain.replicaPath)
            #expect(controller.replica.root.path == domain.replicaPath)
            #expect(entry(at: f.home.appendingPathComponent("replicas")) == .none)
            try await controller.sync()
            #expect(tree(at: URL(fileURLWithPath: domain.replicaPath)) == ["a.txt.placeholder"])
        }
    }

    @Test func aDatalessDomainKeepsItsFilesInABackingFolderMarkedAsItsReplica() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain(mode: .dataless)
            let domain = try f.manager.domain(named: "mem")
            let replica = f.home.appendingPathComponent("domains/mem")
            let backing = f.home.appendingPathComponent("replicas/mem")
            #expect(domain.replicaMode == .dataless)
            #expect(domain.replicaPath == replica.path)
            #expect(try f.manager.backingURL(of: domain) == backing)
            #expect(try f.manager.backingURL(forDomainNamed: "mem") == backing)
            #expect(try f.manager.replicaRoot(of: domain) == backing)
            // Both folders are made; the replica folder (serve's mount point) stays empty.
            #expect(entry(at: replica) == .folder)
            #expect(entry(at: backing) == .folder)
            // The backing folder holds the user's files: the umask's modes, as a folder made here
            // now gets, not the state folder's 0700.
            let sibling = f.folder.appendingPathComponent("umask-probe")
            try FileManager.default.createDirectory(at: sibling, withIntermediateDirectories: false)
            #expect(permissions(backing) == permissions(sibling))
            #expect(permissions(f.home) == 0o700)

            // The engine works in the backing folder, never through the replica path; its
            // staging folder is on the backing folder's file system.
            #expect(controller.replica.root == backing)
            #expect(controller.replica.staging.path.hasPrefix(f.home.appendingPathComponent("staging/").path))
            try await controller.sync()
            _ = await controller.materialize(paths: ["b.txt"], recursive: false)
            #expect(tree(at: replica).isEmpty)
            #expect(try Data(contentsOf: backing.appendingPathComponent("b.txt")) == Data("b".utf8))
            #expect(tree(at: backing).contains("d/"))

            // The backing folder carries the domain's mark, so the scan's guard accepts it and
            // refuses another domain; the empty replica folder is not taken for the replica.
            try Replica(root: backing, staging: backing).checkRoot(domain: "mem", knowsItems: true)
            let other = await refusal { try Replica(root: backing, staging: backing).checkRoot(domain: "other", knowsItems: true) }
            #expect(other?.message.contains("is the replica of domain 'mem'") == true, "\(other?.message ?? "")")
            let mountPoint = await refusal { try Replica(root: replica, staging: replica).checkRoot(domain: "mem", knowsItems: true) }
            #expect(mountPoint?.code == .providerDomainTemporarilyUnavailable)
        }
    }

    @Test func aDatalessDomainsReplicaAndBackingFolderMayNotOverlap() async throws {
        try await Fixture.with { f in
            let backings = f.home.appendingPathComponent("replicas")
            for replica in [backings.appendingPathComponent("mem"), backings.appendingPathComponent("mem/inner"), backings] {
                let error = await refusal { try await f.addDomain(replica: replica.path, mode: .dataless) }
                #expect(error?.code == .invalidArgument)
                #expect(error?.message.contains("are the same or inside one another") == true, "\(error?.message ?? "")")
            }
            let names = try f.manager.domains().map(\.name)
            #expect(names.isEmpty)
            #expect(entry(at: backings.appendingPathComponent("mem")) == .none)
        }
    }

    @Test func aBackingFolderMayNotOverlapAnotherDomainsFolders() async throws {
        try await Fixture.with { f in
            let backings = f.home.appendingPathComponent("replicas")
            // A placeholder-files replica where dataless domain "b" would keep its files.
            try await f.addDomain("a", replica: backings.appendingPathComponent("b").path)
            let taken = await refusal { try await f.addDomain("b", mode: .dataless) }
            #expect(taken?.code == .invalidArgument)
            #expect(taken?.message.contains("overlaps the replica of domain 'a'") == true, "\(taken?.message ?? "")")
            // A replica inside dataless domain "c"'s backing folder.
            try await f.addDomain("c", mode: .dataless)
            let inside = await refusal { try await f.addDomain("d", replica: backings.appendingPathComponent("c/x").path) }
            #expect(inside?.code == .invalidArgument)
            #expect(inside?.message.contains("overlaps the backing folder of domain 'c'") == true, "\(inside?.message ?? "")")
            // The store's root inside the state folder's backing folders.
            let root = backings.appendingPathComponent("e")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let store = await refusal { try await f.addDomain("e", extra: ["root": root.path], mode: .dataless) }
            #expect(store?.code == .invalidArgument)
            #expect(store?.message.contains("the backing folder \(root.path) (in the state folder) overlaps --root") == true)
            #expect(try f.manager.domains().map(\.name) == ["a", "c"])
        }
    }

    @Test func aBackingFolderLeftByARemovedDomainIsNotTakenOver() async throws {
        try await Fixture.with { f in
            let backing = f.home.appendingPathComponent("replicas/mem")
            try FileManager.default.createDirectory(at: backing, withIntermediateDirectories: true)
            try Data("kept".utf8).write(to: backing.appendingPathComponent("kept.txt"))
            let error = await refusal { try await f.addDomain(mode: .dataless) }
            #expect(error?.code == .invalidArgument)
            #expect(error?.message.contains("the backing folder \(backing.path) is not empty") == true, "\(error?.message ?? "")")
            let names = try f.manager.domains().map(\.name)
            #expect(names.isEmpty)
            #expect(tree(at: backing) == ["kept.txt"])
        }
    }

    /// tmpfs refuses fanotify's pre-content marks: a state folder there cannot hold a dataless
    /// domain; nothing is made. A placeholder-files domain works there.
    @Test func aStateFolderOnTmpfsRefusesDatalessDomains() async throws {
        try await Fixture.with { f in
            try await SmallFileSystem.with(size: 4 << 20) { disk in
                let home = disk.root.appendingPathComponent("home")
                let manager = try ProviderManager(home: home, registry: TestRemote.registry)
                let options = ["store": f.remoteName]
                let error = await refusal { try await manager.addDomain(name: "t", kind: "memory", options: options, mode: .dataless) }
                #expect(error?.code == .notSupported)
                let message = error?.message ?? ""
                #expect(message.contains("is on a tmpfs file system; on-access files need ext4, xfs, btrfs or bcachefs"), "\(message)")
                #expect(
                    message.hasSuffix(
                        "use --mode placeholder-files, which works anywhere without root, or --on-access fuse (any user, any kernel with FUSE)"
                    ), "\(message)")
                let names = try manager.domains().map(\.name)
                #expect(names.isEmpty)
                #expect(entry(at: home.appendingPathComponent("replicas")) == .none)
                #expect(entry(at: home.appendingPathComponent("domains/t")) == .none)
                try await manager.addDomain(name: "t", kind: "memory", options: options)
                #expect(try manager.domain(named: "t").replicaMode == .placeholderFiles)
                await manager.close()
            }
        }
    }

    @Test func removingADatalessDomainRefusesWhileItsBackingFolderHoldsUnsentWork() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain(mode: .dataless)
            try await controller.sync()
            _ = await controller.materialize(paths: ["b.txt"], recursive: false)
            let replica = f.home.appendingPathComponent("domains/mem")
            let backing = f.home.appendingPathComponent("replicas/mem")
            try Data("edited".utf8).write(to: backing.appendingPathComponent("b.txt"))
            #expect(try await f.manager.unsentChanges(inDomain: "mem").map { "\($0.kind.rawValue) \($0.path)" } == ["edited /b.txt"])
            // `why` reads the backing folder too.
            #expect(try f.manager.explain(ItemLocation(domain: "mem", path: "b.txt")).localChange == "edited")
            await expectCode(.unsyncedEdits) { try await f.manager.removeDomain(named: "mem", keepReplica: false) }
            #expect(try Data(contentsOf: backing.appendingPathComponent("b.txt")) == Data("edited".utf8))
            #expect(entry(at: replica) == .folder)

            try await f.manager.removeDomain(named: "mem", keepReplica: false, force: true)
            #expect(entry(at: backing) == .none)
            #expect(entry(at: replica) == .none)
            #expect(entry(at: f.home.appendingPathComponent("replicas")) == .folder)
            let names = try f.manager.domains().map(\.name)
            #expect(names.isEmpty)
            // The name can be used again, in either mode.
            try await f.addDomain(mode: .dataless)
        }
    }

    @Test func removingADatalessDomainKeepingItsFilesKeepsTheBackingFolder() async throws {
        try await Fixture.with { f in
            let data = bytes(500, seed: 3)
            try f.memory.write(path: "d/kept.bin", data: data)
            try f.memory.write(path: "top.txt", data: Data("t".utf8))
            let controller = try await f.addDomain(mode: .dataless)
            try await controller.sync()
            _ = await controller.materialize(paths: ["d/kept.bin"], recursive: false)
            let replica = f.home.appendingPathComponent("domains/mem")
            let backing = f.home.appendingPathComponent("replicas/mem")
            try await f.manager.removeDomain(named: "mem", keepReplica: true)
            #expect(try Data(contentsOf: backing.appendingPathComponent("d/kept.bin")) == data)
            #expect(!tree(at: backing).contains { $0.hasSuffix(Replica.placeholderSuffix) })
            #expect(
                !FileManager.default.fileExists(atPath: backing.appendingPathComponent("top.txt").path),
                "a dataless file that would read as zeros does not stay")
            #expect(entry(at: replica) == .none)
            let names = try f.manager.domains().map(\.name)
            #expect(names.isEmpty)
        }
    }

    /// The replica folder of a dataless domain is only ever removed while empty: it is the
    /// mount point of the backing folder, and whatever is in it is not the engine's.
    @Test func removingADatalessDomainNeverDeletesWhatIsInItsReplicaFolder() async throws {
        try await Fixture.with { f in
            try await f.addDomain(mode: .dataless)
            let replica = f.home.appendingPathComponent("domains/mem")
            try Data("mine".utf8).write(to: replica.appendingPathComponent("mine.txt"))
            try await f.manager.removeDomain(named: "mem", keepReplica: false)
            #expect(tree(at: replica) == ["mine.txt"])
            #expect(entry(at: f.home.appendingPathComponent("replicas/mem")) == .none)
        }
    }
}

/// ``OnAccessSupport``: the capability, kernel and file system checks, by their pure parts.
@Suite struct OnAccessProbeTests {
    static func status(effective: String) -> String {
        "Name:\tfileproviderctl\nUmask:\t0022\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t\(effective)\nCapBnd:\t000001ffffffffff\n"
    }

    @Test func capSysAdminIsReadFromTheEffectiveSet() {
        #expect(OnAccessSupport.hasSystemAdministration(status: Self.status(effective: "000001ffffffffff")) == true)
        #expect(OnAccessSupport.hasSystemAdministration(status: Self.status(effective: "0000000000200000")) == true)
        // Everything but bit 21 (root in a container without CAP_SYS_ADMIN).
        #expect(OnAccessSupport.hasSystemAdministration(status: Self.status(effective: "000001ffffdfffff")) == false)
        #expect(OnAccessSupport.hasSystemAdministration(status: Self.status(effective: "0000000000000000")) == false)
        #expect(OnAccessSupport.hasSystemAdministration(status: "Name:\tx\n") == nil)
        #expect(OnAccessSupport.hasSystemAdministration(status: Self.status(effective: "zz")) == nil)
        #expect(OnAccessSupport.hasSystemAdministration(status: Self.status(effective: String(repeating: "f", count: 17))) == nil)
    }

    @Test func withoutCapSysAdminDatalessIsRefusedEvenForRoot() {
        let denied = OnAccessSupport.capabilityProblem(status: Self.status(effective: "000001ffffdfffff"), effectiveUser: 0)
        #expect(denied?.contains("needs CAP_SYS_ADMIN") == true)
        #expect(denied?.hasSuffix("use --mode placeholder-files, which works anywhere without root") == true)
        #expect(OnAccessSupport.capabilityProblem(status: Self.status(effective: "0000000000200000"), effectiveUser: 1000) == nil)
        // Without /proc: root passes, another user does not.
        #expect(OnAccessSupport.capabilityProblem(status: nil, effectiveUser: 0) == nil)
        #expect(OnAccessSupport.capabilityProblem(status: nil, effectiveUser: 1000) != nil)
    }

    @Test func kernelsBefore6_14AreRefused() {
        for release in ["6.14.0", "6.14.0-rc1", "6.18.44-fc-v669", "7.0", "10.2.1"] {
            #expect(OnAccessSupport.kernelProblem(release: release) == nil, "\(release)")
        }
        for release in ["6.13.12-arch1-1", "5.15.0-91-generic", "4.19", "6.1.0-18-amd64"] {
            let problem = OnAccessSupport.kernelProblem(release: release)
            #expect(problem?.contains("needs Linux 6.14 or later") == true, "\(release)")
            #expect(problem?.contains("this kernel is \(release)") == true, "\(release)")
            #expect(problem?.hasSuffix("which works anywhere without root") == true)
        }
        for release in ["", "linux", "6", "6.x"] {
            #expect(OnAccessSupport.kernelProblem(release: release) != nil, "\(release)")
        }
        #expect(OnAccessSupport.kernelVersion(release: "6.18.44-fc-v669")! == (6, 18))
        #expect(OnAccessSupport.kernelVersion(release: "6.14-rc3")! == (6, 14))
    }

    @Test func onlyFileSystemsThatTakeTheMarkAreAccepted() {
        for type: Int64 in [0xEF53, 0x5846_5342, 0x9123_683E, 0xCA45_1A4E] {
            #expect(OnAccessSupport.fileSystemProblem(type: type, backing: "/b") == nil)
        }
        for (type, name) in [(Int64(0x0102_1994), "tmpfs"), (0x794C_7630, "overlayfs"), (0x6969, "NFS"), (0x6573_5546, "FUSE")] {
            let problem = OnAccessSupport.fileSystemProblem(type: type, backing: "/b")
            #expect(
                problem?.hasPrefix(
                    "the backing folder /b (in the state folder) is on a \(name) file system; on-access files need ext4, xfs, btrfs or bcachefs"
                )
                    == true, "\(problem ?? "")")
        }
        #expect(OnAccessSupport.fileSystemProblem(type: 0x1234, backing: "/b")?.contains("a file system of type 0x1234") == true)
    }

    /// The tests run as root on ext4 with a recent kernel (see `make test`): the live probe must
    /// find nothing there, or the dataless tests above could not run.
    @Test func theTestMachineCanHoldDatalessDomains() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-probe-\(UUID().uuidString)/replicas/x")
        #expect(OnAccessSupport.problem(forBacking: folder) == nil)
    }
}
