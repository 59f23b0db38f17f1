import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

@Suite struct DomainManagementTests {
    @Test(arguments: ["a/b", "a:b", "", ".x", "-x", "a b", "tab\there", "ctl\u{1}", String(repeating: "n", count: 65)])
    func invalidDomainNamesAreRefused(_ name: String) async throws {
        try await Fixture.with { f in
            await expectCode(.invalidArgument) { try await f.addDomain(name) }
            let domains = try f.manager.domains()
            #expect(domains.isEmpty)
            #expect(
                entry(at: f.home.appendingPathComponent("domains")) == .none || tree(at: f.home.appendingPathComponent("domains")).isEmpty)
        }
    }

    @Test(arguments: ["a", "photos", "Work_2024", "x.y-z", "ünïcode", String(repeating: "n", count: 64)])
    func validDomainNamesAreAccepted(_ name: String) async throws {
        try await Fixture.with { f in
            try await f.addDomain(name)
            #expect(try f.manager.domain(named: name).name == name)
        }
    }

    @Test func duplicateNamesUnknownKindsAndBadOptionsAreRefused() async throws {
        try await Fixture.with { f in
            try await f.addDomain("one")
            await expectCode(.filenameCollision) { try await f.addDomain("one") }
            await expectCode(.invalidArgument) {
                try await f.manager.addDomain(name: "two", kind: "nonexistent", options: [:])
            }
            await expectCode(.invalidArgument) {
                try await f.manager.addDomain(name: "two", kind: "memory", options: [:])  // --store missing
            }
            await expectCode(.invalidArgument) {
                try await f.manager.addDomain(name: "two", kind: "memory", options: ["store": f.remoteName, "bogus": "1"])
            }
            #expect(try f.manager.domains().map(\.name) == ["one"])
            await expectCode(.providerDomainNotFound) { try f.manager.domain(named: "two") }
            await expectCode(.providerDomainNotFound) { try await f.manager.controller(for: "two") }
        }
    }

    @Test func anUnreachableStoreIsNotAdded() async throws {
        try await Fixture.with { f in
            f.memory.setFailure(FileProviderError(.serverUnreachable, "refused"), for: .item)
            await expectCode(.serverUnreachable) { try await f.addDomain() }
            let domains = try f.manager.domains()
            #expect(domains.isEmpty)
        }
    }

    @Test func replicaFoldersMayNotOverlap() async throws {
        try await Fixture.with { f in
            let base = f.folder.appendingPathComponent("replicas")
            let first = base.appendingPathComponent("r1")
            try await f.addDomain("one", replica: first.path)
            #expect(entry(at: first) == .folder)
            #expect(try f.manager.domain(named: "one").replicaPath == first.path)

            // The same folder, a folder inside it, a folder holding it.
            await expectCode(.invalidArgument) { try await f.addDomain("same", replica: first.path) }
            await expectCode(.invalidArgument) { try await f.addDomain("inside", replica: first.appendingPathComponent("inner").path) }
            await expectCode(.invalidArgument) { try await f.addDomain("outer", replica: base.path) }
            await expectCode(.invalidArgument) { try await f.addDomain("dots", replica: first.path + "/sub/../") }
            // A sibling whose name merely starts the same is fine.
            try await f.addDomain("sibling", replica: base.appendingPathComponent("r1-b").path)
            // A folder that is not empty.
            let full = f.folder.appendingPathComponent("full")
            try FileManager.default.createDirectory(at: full, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: full.appendingPathComponent("file"))
            await expectCode(.invalidArgument) { try await f.addDomain("full", replica: full.path) }
            // Default replicas of two domains side by side.
            try await f.addDomain("d1")
            try await f.addDomain("d2")
            #expect(try f.manager.domains().map(\.name) == ["d1", "d2", "one", "sibling"])
            #expect(entry(at: first.appendingPathComponent("inner")) == .none)
        }
    }

    @Test func replicaMayNotOverlapTheStoresRoot() async throws {
        try await Fixture.with { f in
            let served = f.folder.appendingPathComponent("served")
            try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
            await expectCode(.invalidArgument) {
                try await f.addDomain("a", replica: served.appendingPathComponent("replica").path, extra: ["root": served.path])
            }
            await expectCode(.invalidArgument) {
                try await f.addDomain("b", replica: served.path, extra: ["root": served.path])
            }
            try await f.addDomain("c", replica: f.folder.appendingPathComponent("elsewhere").path, extra: ["root": served.path])
            #expect(try f.manager.domains().map(\.name) == ["c"])
        }
    }

    /// The check follows the descriptor (``BackendOption/isStoreLocation``), not an option's
    /// name or the backend's kind: a store location of another name is checked, a path option
    /// that is not one (a key file) may be anywhere.
    @Test func everyOptionMarkedAsAStoreLocationAndNoOtherIsKeptApartFromReplicas() async throws {
        try await Fixture.with { f in
            let replica = f.folder.appendingPathComponent("replica")
            await expectCode(.invalidArgument) {
                try await f.addDomain("a", replica: replica.path, extra: ["spool": replica.appendingPathComponent("spool").path])
            }
            let keyFile = f.folder.appendingPathComponent("replica/../keys/key").path
            try await f.addDomain("b", replica: replica.path, extra: ["key-file": keyFile])
            #expect(try f.manager.domain(named: "b").options["key-file"] == f.folder.appendingPathComponent("keys/key").path)
            // Another domain's store location over b's replica is refused when it is added, as by `domain set`.
            await expectCode(.invalidArgument) {
                try await f.addDomain("c", replica: f.folder.appendingPathComponent("other").path, extra: ["spool": replica.path])
            }
            await expectCode(.invalidArgument) {
                try await f.addDomain(
                    "d", replica: f.folder.appendingPathComponent("d").path, extra: ["root": replica.appendingPathComponent("in").path])
            }
            await expectCode(.invalidArgument) { try await f.manager.setBackendOptions(ofDomain: "b", ["spool": replica.path]) }
        }
    }

    /// A library caller gets what the CLI gets: path options and the replica folder are stored
    /// absolute, `~` expanded and relative paths taken from the current directory.
    @Test func pathOptionsAreStoredAbsolute() async throws {
        try await Fixture.with { f in
            let cwd = FileManager.default.currentDirectoryPath
            let home = NSHomeDirectory()
            try await f.addDomain(
                "rel", replica: f.folder.appendingPathComponent("r1").path,
                extra: ["key-file": "keys/./id", "root": "~/served/../store", "spool": "~/fpk-spool"])
            let options = try f.manager.domain(named: "rel").options
            #expect(options["key-file"] == URL(fileURLWithPath: cwd).appendingPathComponent("keys/id").standardizedFileURL.path)
            #expect(options["root"] == URL(fileURLWithPath: home).appendingPathComponent("store").standardizedFileURL.path)
            #expect(options["spool"] == URL(fileURLWithPath: home).appendingPathComponent("fpk-spool").standardizedFileURL.path)
            // domain set too.
            try await f.manager.setBackendOptions(ofDomain: "rel", ["key-file": "../k"])
            #expect(
                try f.manager.domain(named: "rel").options["key-file"]
                    == URL(fileURLWithPath: cwd).deletingLastPathComponent().appendingPathComponent("k").standardizedFileURL.path)
            // The descriptor's function, for any directory.
            let normalized = TestRemote.descriptor.normalizingPaths(["key-file": "a/b", "store": "x/y"], relativeTo: "/base/dir")
            #expect(normalized == ["key-file": "/base/dir/a/b", "store": "x/y"])
        }
    }

    /// A domain whose backend this program does not have (a kind only another tool links, an
    /// uninstalled external backend) is not a failure of its store: `controller(for:)` says
    /// `backendNotAvailable` and records nothing on the domain (no error, no backoff); the other
    /// domains work.
    @Test func aDomainWhoseBackendIsMissingIsNotAvailableAndNothingIsRecorded() async throws {
        try await Fixture.with { f in
            try await f.addDomain("here")
            try await f.addDomain("elsewhere", replica: f.folder.appendingPathComponent("r2").path)
            var record = try f.manager.domain(named: "elsewhere")
            record.backendKind = "jsonstore"
            try f.manager.store.updateDomain(record)
            let manager = try ProviderManager(home: f.home, registry: TestRemote.registry)
            #expect(manager.isBackendAvailable(for: try manager.domain(named: "here")))
            #expect(!manager.isBackendAvailable(for: try manager.domain(named: "elsewhere")))
            for _ in 0..<3 {
                await expectCode(.backendNotAvailable) { try await manager.controller(for: "elsewhere") }
            }
            let after = try manager.domain(named: "elsewhere")
            #expect(after.lastError == nil)
            #expect(DomainBackoff(after) == nil)
            await expectCode(.backendNotAvailable) { try await manager.setBackendOptions(ofDomain: "elsewhere", ["store": "x"]) }
            _ = try await manager.controller(for: "here").sync()
            await manager.close()
        }
    }

    @Test func removeDomainDeletesItsReplicaAndMetadata() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["b.txt"], recursive: false)
            let id = controller.domainID
            let replica = controller.replica.root
            try await f.manager.removeDomain(named: "mem", keepReplica: false)
            #expect(entry(at: replica) == .none)
            #expect(try f.manager.domains().isEmpty)
            #expect(try f.manager.store.allItems(domainID: id).isEmpty)
            await expectCode(.providerDomainNotFound) { try await f.manager.removeDomain(named: "mem", keepReplica: false) }
            // The name and the default replica can be used again.
            let again = try await f.addDomain()
            try await again.sync()
            #expect(tree(at: again.replica.root) == ["b.txt.placeholder", "d/", "d/a.txt.placeholder"])
        }
    }

    @Test func removeDomainRefusesWhileTheReplicaHoldsWhatTheStoreDoesNot() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["b.txt"], recursive: false)
            let replica = controller.replica.root
            try Data("edited".utf8).write(to: replica.appendingPathComponent("b.txt"))
            #expect(try await f.manager.unsentChanges(inDomain: "mem").map { "\($0.kind.rawValue) \($0.path)" } == ["edited /b.txt"])
            await expectCode(.unsyncedEdits) { try await f.manager.removeDomain(named: "mem", keepReplica: false) }
            #expect(try Data(contentsOf: replica.appendingPathComponent("b.txt")) == Data("edited".utf8))
            #expect(try f.manager.domains().map(\.name) == ["mem"])
            try await f.manager.removeDomain(named: "mem", keepReplica: false, force: true)
            #expect(entry(at: replica) == .none)
            #expect(try f.manager.domains().isEmpty)
        }
    }

    @Test func removeDomainKeepingTheReplicaKeepsDownloadedFilesOnly() async throws {
        try await Fixture.with { f in
            let data = bytes(500, seed: 8)
            try f.memory.write(path: "d/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "d/kept.bin", data: data)
            try f.memory.write(path: "top.txt", data: Data("t".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["d/kept.bin"], recursive: false)
            let replica = controller.replica.root
            try await f.manager.removeDomain(named: "mem", keepReplica: true)
            #expect(tree(at: replica) == ["d/", "d/kept.bin"])
            #expect(try Data(contentsOf: replica.appendingPathComponent("d/kept.bin")) == data)
            #expect(try f.manager.domains().isEmpty)
        }
    }
}

@Suite struct ResolveAndIdentifierTests {
    /// A synced domain with `docs/a.txt` (placeholder), `docs/b.txt` (materialized), `top.txt`.
    func prepared(_ f: Fixture) async throws -> DomainController {
        try f.memory.write(path: "docs/a.txt", data: Data("a".utf8))
        try f.memory.write(path: "docs/b.txt", data: Data("b".utf8))
        try f.memory.write(path: "top.txt", data: Data("t".utf8))
        let controller = try await f.addDomain()
        try await controller.sync()
        _ = await controller.materialize(paths: ["docs/b.txt"], recursive: false)
        return controller
    }

    @Test func resolveDomainPaths() async throws {
        try await Fixture.with { f in
            _ = try await prepared(f)
            let m = f.manager
            #expect(try m.resolve("mem:/docs/a.txt") == ItemLocation(domain: "mem", path: "docs/a.txt"))
            #expect(try m.resolve("mem:docs/a.txt") == ItemLocation(domain: "mem", path: "docs/a.txt"))
            #expect(try m.resolve("mem://docs//a.txt/") == ItemLocation(domain: "mem", path: "docs/a.txt"))
            #expect(try m.resolve("mem:") == ItemLocation(domain: "mem", path: ""))
            #expect(try m.resolve("mem:/") == ItemLocation(domain: "mem", path: ""))
            #expect(ItemLocation(domain: "mem", path: "docs").description == "mem:/docs")
            await expectCode(.invalidArgument) { try m.resolve("mem:/docs/../top.txt") }
            await expectCode(.invalidArgument) { try m.resolve("mem:/../etc/passwd") }
            await expectCode(.invalidArgument) { try m.resolve("mem:/./top.txt") }
            await expectCode(.providerDomainNotFound) { try m.resolve("nope:/x") }
        }
    }

    @Test func resolveReplicaPaths() async throws {
        try await Fixture.with { f in
            let controller = try await prepared(f)
            let m = f.manager
            let root = controller.replica.root.path
            #expect(try m.resolve(root) == ItemLocation(domain: "mem", path: ""))
            #expect(try m.resolve(root + "/") == ItemLocation(domain: "mem", path: ""))
            #expect(try m.resolve(root + "/docs") == ItemLocation(domain: "mem", path: "docs"))
            #expect(try m.resolve(root + "/docs/b.txt") == ItemLocation(domain: "mem", path: "docs/b.txt"))
            // A placeholder file stands for its item.
            #expect(try m.resolve(root + "/docs/a.txt.placeholder") == ItemLocation(domain: "mem", path: "docs/a.txt"))
            #expect(try m.resolve(root + "/docs/a.txt") == ItemLocation(domain: "mem", path: "docs/a.txt"))
            // Outside every replica.
            await expectCode(.invalidArgument) { try m.resolve(f.folder.path) }
            await expectCode(.invalidArgument) { try m.resolve("/") }
            await expectCode(.invalidArgument) { try m.resolve(root + "-other/x") }
            await expectCode(.invalidArgument) { try m.resolve(root + "/../escape") }
            await expectCode(.invalidArgument) { try m.resolve(root + "/..") }
        }
    }

    /// A path with `..` is refused even when it would land back inside the replica, as
    /// `resolve`'s contract says ("invalidArgument for a path ... with `..`").
    @Test func resolveRefusesDotDotInReplicaPaths() async throws {
        try await Fixture.with { f in
            let controller = try await prepared(f)
            let root = controller.replica.root.path
            await expectCode(.invalidArgument) { try f.manager.resolve(root + "/docs/../top.txt") }
        }
    }

    /// A store item whose real name ends in ".placeholder" is never synced (it is skipped), so a
    /// path "x.placeholder" always means the item "x".
    @Test func placeholderSuffixMapsToTheItem() async throws {
        try await Fixture.with { f in
            let controller = try await prepared(f)
            let root = controller.replica.root.path
            #expect(try f.manager.resolve(root + "/top.txt.placeholder") == ItemLocation(domain: "mem", path: "top.txt"))
        }
    }

    @Test func persistentIdentifierAndURLRoundTrip() async throws {
        try await Fixture.with { f in
            let controller = try await prepared(f)
            for path in ["docs/a.txt", "docs/b.txt", "docs", "top.txt"] {
                let record = try controller.record(at: path)
                let url = try #require(try controller.urlForItem(withPersistentIdentifier: record.identifier))
                #expect(url.path == controller.replica.root.path + "/" + path)
                #expect(try controller.persistentIdentifierForItem(at: url) == record.identifier)
                let placeholderURL = controller.placeholderURL(for: url)
                #expect(placeholderURL.path == url.path + ".placeholder")
                #expect(try controller.persistentIdentifierForItem(at: placeholderURL) == record.identifier)
            }
            // The placeholder URL is where the placeholder really is; the real name where the file is.
            let a = try #require(try controller.urlForItem(withPersistentIdentifier: "docs/a.txt"))
            #expect(entry(at: controller.placeholderURL(for: a)) == .file)
            let b = try #require(try controller.urlForItem(withPersistentIdentifier: "docs/b.txt"))
            #expect(entry(at: b) == .file)
            #expect(try controller.persistentIdentifierForItem(at: controller.replica.root) == .rootContainer)
            #expect(try controller.urlForItem(withPersistentIdentifier: .rootContainer)?.path == controller.replica.root.path)
            #expect(try controller.urlForItem(withPersistentIdentifier: "no/such") == nil)
            #expect(try controller.persistentIdentifierForItem(at: f.folder.appendingPathComponent("x")) == nil)
            #expect(try controller.persistentIdentifierForItem(at: controller.replica.url("docs/missing")) == nil)
            #expect(try controller.persistentIdentifierForItem(at: URL(fileURLWithPath: controller.replica.root.path + "-x/docs")) == nil)
        }
    }
}
