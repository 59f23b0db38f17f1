import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

@Suite struct SyncDownTests {
    @Test func addDomainRecordsTheRoot() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            let domain = try f.manager.domain(named: "mem")
            #expect(domain.backendKind == "memory")
            #expect(domain.replicaPath == f.home.appendingPathComponent("domains/mem").path)
            #expect(entry(at: controller.replica.root) == .folder)
            #expect(tree(at: controller.replica.root).isEmpty)
            let root = try #require(try f.manager.store.item(domainID: controller.domainID, path: ""))
            #expect(root.identifier == .rootContainer)
            #expect(root.kind == .folder)
            #expect(root.state == .folder)
            #expect(try f.manager.domains().map(\.name) == ["mem"])
        }
    }

    @Test func syncCreatesFoldersAndPlaceholders() async throws {
        try await Fixture.with { f in
            let a = Data("hello".utf8)
            let b = bytes(1000, seed: 1)
            try f.memory.write(path: "docs/a.txt", data: a)
            try f.memory.write(path: "docs/sub/b.bin", data: b)
            try f.memory.write(path: "top.txt", data: Data("t".utf8))
            try f.memory.mkdir(path: "empty")
            // More than one listing page (the memory store pages by 7).
            for index in 0..<20 { try f.memory.write(path: "many/f\(index)", data: Data(repeating: 1, count: index)) }
            let controller = try await f.addDomain()
            let report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(report.added == 6 + 21)
            #expect(report.listedItems == 6 + 21)

            let expected =
                ["docs/", "docs/a.txt.placeholder", "docs/sub/", "docs/sub/b.bin.placeholder", "empty/", "many/"]
                + (0..<20).map { "many/f\($0).placeholder" } + ["top.txt.placeholder"]
            #expect(tree(at: controller.replica.root) == expected.sorted())

            let metadata = try placeholder(at: f.placeholderURL(controller, "docs/a.txt"))
            #expect(metadata.identifier == "docs/a.txt")
            #expect(metadata.parentIdentifier == "docs")
            #expect(metadata.filename == "a.txt")
            #expect(metadata.domain == "mem")
            #expect(metadata.kind == "file")
            #expect(metadata.size == Int64(a.count))
            #expect(try placeholder(at: f.placeholderURL(controller, "docs/sub/b.bin")).size == 1000)
            #expect(try placeholder(at: f.placeholderURL(controller, "many/f13")).size == 13)
            // The placeholder's versions are the store's.
            let remote = try await f.memory.item(for: "docs/a.txt")
            #expect(metadata.contentVersion == remote.version.content.hexString)
            #expect(metadata.metadataVersion == remote.version.metadata.hexString)

            // The database answers `ls` offline.
            #expect(try controller.list(at: "docs", recursive: false).map(\.filename) == ["a.txt", "sub"])
            #expect(try controller.list(at: "docs", recursive: true).map(\.path) == ["docs/a.txt", "docs/sub", "docs/sub/b.bin"])
            #expect(try controller.list(at: "docs/a.txt", recursive: false).map(\.path) == ["docs/a.txt"])
            let record = try controller.record(at: "docs/sub/b.bin")
            #expect(record.state == .placeholder)
            #expect(record.size == 1000)
            #expect(record.parentIdentifier == "docs/sub")
            let summary = try controller.summary()
            #expect(summary.folders == 4)
            #expect(summary.placeholders == 23)
            #expect(summary.materialized == 0)
            await expectCode(.noSuchItem) { try controller.record(at: "docs/missing") }

            // Nothing changed: a second sync does nothing.
            let again = try await controller.sync()
            #expect(again.added == 0 && again.updated == 0 && again.deleted == 0 && again.moved == 0 && again.downloaded == 0)
            #expect(tree(at: controller.replica.root) == expected.sorted())
            #expect(try f.manager.domain(named: "mem").lastSyncAt != nil)
        }
    }

    /// The root's parent is the root itself; `ls DOMAIN:` must not show the root as an entry.
    @Test func listingTheRootDoesNotShowTheRootItself() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "one.txt", data: Data("1".utf8))
            try f.memory.mkdir(path: "dir")
            let controller = try await f.addDomain()
            try await controller.sync()
            let listed = try controller.list(at: "", recursive: false)
            #expect(!listed.contains { $0.path.isEmpty }, "the root is listed inside itself: \(listed.map(\.filename))")
            #expect(listed.map(\.path) == ["dir", "one.txt"])
            #expect(try controller.list(at: "", recursive: true).map(\.path) == ["dir", "one.txt"])
        }
    }

    @Test func remoteContentChangeOfAMaterializedFileIsDownloadedAgain() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/f.bin", data: bytes(5000, seed: 1))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["d/f.bin"], recursive: false)) == [nil])
            let newer = bytes(7000, seed: 2)
            try f.memory.write(path: "d/f.bin", data: newer)
            let report = try await controller.sync()
            #expect(report.updated == 1)
            #expect(report.downloaded == 1)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(try Data(contentsOf: f.url(controller, "d/f.bin")) == newer)
            #expect(entry(at: f.placeholderURL(controller, "d/f.bin")) == .none)
            let record = try controller.record(at: "d/f.bin")
            #expect(record.state == .materialized)
            #expect(record.size == 7000)
            #expect(record.localContentVersion == record.contentVersion)
            #expect(!record.isOutdated)
            #expect(f.memory.callCount(.fetchContents) == 2)
            // In sync now: nothing more is downloaded.
            #expect(try await controller.sync().downloaded == 0)
            #expect(f.memory.callCount(.fetchContents) == 2)
        }
    }

    @Test func remoteChangeOfAPlaceholderRewritesIt() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "f.txt", data: Data("short".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let before = try placeholder(at: f.placeholderURL(controller, "f.txt"))
            try f.memory.write(path: "f.txt", data: Data("a good deal longer".utf8))
            let report = try await controller.sync()
            #expect(report.updated == 1)
            #expect(report.downloaded == 0)
            let after = try placeholder(at: f.placeholderURL(controller, "f.txt"))
            #expect(after.size == 18)
            #expect(after.contentVersion != before.contentVersion)
            #expect(entry(at: f.url(controller, "f.txt")) == .none)
            #expect(try controller.record(at: "f.txt").size == 18)
            #expect(f.memory.callCount(.fetchContents) == 0)
        }
    }

    @Test func remoteDeletionRemovesPlaceholdersAndFolders() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "f.txt", data: Data("x".utf8))
            try f.memory.write(path: "dir/inner/g.txt", data: Data("y".utf8))
            try f.memory.write(path: "stay.txt", data: Data("z".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try f.memory.remove(path: "f.txt")
            try f.memory.remove(path: "dir")
            let report = try await controller.sync()
            #expect(report.deleted == 4)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(tree(at: controller.replica.root) == ["stay.txt.placeholder"])
            #expect(try f.manager.store.descendants(domainID: controller.domainID, of: "").map(\.path) == ["stay.txt"])
        }
    }

    @Test func remoteDeletionOfALocallyEditedFileKeepsItWithANotice() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/notes.txt", data: Data("remote".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["d/notes.txt"], recursive: false)) == [nil])
            let local = Data("my local edit, longer".utf8)
            try local.write(to: f.url(controller, "d/notes.txt"))
            try f.memory.remove(path: "d/notes.txt")
            // Download only: the edit is not sent, and sync down must still not remove it.
            let report = try await controller.sync(upload: false)
            #expect(try Data(contentsOf: f.url(controller, "d/notes.txt")) == local)
            #expect(report.notices.contains { $0.contains("d/notes.txt") && $0.contains("kept") }, "\(report.notices)")
            // The folder holding the kept file stays too.
            #expect(entry(at: f.url(controller, "d")) == .folder)
        }
    }

    @Test func remoteDeletionOfAnUneditedMaterializedFileRemovesIt() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "f.bin", data: bytes(100, seed: 3))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["f.bin"], recursive: false)
            try f.memory.remove(path: "f.bin")
            let report = try await controller.sync()
            #expect(report.deleted == 1)
            #expect(tree(at: controller.replica.root).isEmpty)
        }
    }

    @Test func remoteRenameOfAMaterializedFileMovesItAndKeepsItMaterialized() async throws {
        try await Fixture.with { f in
            let data = bytes(3000, seed: 4)
            try f.memory.write(path: "a/f.txt", data: data)
            try f.memory.write(path: "a/other.txt", data: Data("o".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["a/f.txt"], recursive: false)) == [nil])
            try f.memory.mkdir(path: "b")
            try f.memory.rename(from: "a/f.txt", to: "b/g.txt")
            let report = try await controller.sync()
            #expect(report.moved == 1)
            #expect(report.downloaded == 0)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(try Data(contentsOf: f.url(controller, "b/g.txt")) == data)
            #expect(entry(at: f.url(controller, "a/f.txt")) == .none)
            #expect(entry(at: f.placeholderURL(controller, "b/g.txt")) == .none)
            #expect(entry(at: f.placeholderURL(controller, "a/f.txt")) == .none)
            let record = try controller.record(at: "b/g.txt")
            #expect(record.identifier == "b/g.txt")
            #expect(record.state == .materialized)
            #expect(record.parentIdentifier == "b")
            #expect(try f.manager.store.item(domainID: controller.domainID, identifier: "a/f.txt") == nil)
            #expect(f.memory.callCount(.fetchContents) == 1)
            // The moved file is still recognised as unedited: it can be evicted.
            #expect(codes(await controller.evict(paths: ["b/g.txt"], recursive: false)) == [nil])
        }
    }

    @Test func remoteRenameOfAFolderMovesItsContents() async throws {
        try await Fixture.with { f in
            let data = bytes(2000, seed: 5)
            try f.memory.write(path: "old/kept.bin", data: data)
            try f.memory.write(path: "old/ph.txt", data: Data("p".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["old/kept.bin"], recursive: false)
            try f.memory.rename(from: "old", to: "new")
            let report = try await controller.sync()
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(tree(at: controller.replica.root) == ["new/", "new/kept.bin", "new/ph.txt.placeholder"])
            #expect(try Data(contentsOf: f.url(controller, "new/kept.bin")) == data)
            #expect(try controller.record(at: "new/kept.bin").state == .materialized)
            #expect(try controller.record(at: "new/ph.txt").state == .placeholder)
            #expect(
                try f.manager.store.descendants(domainID: controller.domainID, of: "").map(\.path) == ["new", "new/kept.bin", "new/ph.txt"])
        }
    }

    @Test func unsafeRemoteNamesAreSkippedAndNothingEscapesTheReplica() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "ok.txt", data: Data("fine".utf8))
            try f.memory.write(path: "x.placeholder", data: Data("looks like ours".utf8))
            try f.memory.mkdir(path: "dir")
            try f.memory.write(path: "dir/inner.txt", data: Data("i".utf8))
            func evil(_ name: String, _ id: String, _ kind: ItemKind = .file) -> Item {
                Item(identifier: ItemIdentifier(id), parentIdentifier: .rootContainer, filename: name, kind: kind, size: 4)
            }
            f.remote.inject(
                [
                    evil("../x", "evil-1"), evil("a/b", "evil-2"), evil("..", "evil-3", .folder), evil("", "evil-4"),
                    evil("nul\u{0}byte", "evil-5"), evil(String(repeating: "n", count: 256), "evil-6"),
                    evil(".fp-tmp-123", "evil-7"), evil("../../escape", "evil-8", .folder), evil("ok.txt", "evil-dup"),
                ],
                into: .rootContainer)
            f.remote.inject([Item(identifier: "evil-9", parentIdentifier: "dir", filename: "../../../up", kind: .file)], into: "dir")
            let controller = try await f.addDomain()
            let report = try await controller.sync()
            #expect(report.notices.count >= 10, "\(report.notices)")
            #expect(report.notices.contains { $0.contains("x.placeholder") })
            #expect(tree(at: controller.replica.root) == ["dir/", "dir/inner.txt.placeholder", "ok.txt.placeholder"])
            #expect(try placeholder(at: f.placeholderURL(controller, "ok.txt")).identifier == "ok.txt")
            // Nothing next to the replica, in the home or in the test folder.
            #expect(try FileManager.default.contentsOfDirectory(atPath: f.home.appendingPathComponent("domains").path) == ["mem"])
            #expect(entry(at: f.folder.appendingPathComponent("x.placeholder")) == .none)
            #expect(entry(at: f.home.appendingPathComponent("x.placeholder")) == .none)
            #expect(entry(at: f.home.appendingPathComponent("domains/x.placeholder")) == .none)
            #expect(entry(at: f.home.appendingPathComponent("up.placeholder")) == .none)
            #expect(
                try f.manager.store.descendants(domainID: controller.domainID, of: "").map(\.path) == ["dir", "dir/inner.txt", "ok.txt"])
        }
    }

    @Test func aFailedSubfolderListingKeepsThatSubtree() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "keep/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "keep/deep/b.txt", data: Data("b".utf8))
            try f.memory.write(path: "other/c.txt", data: Data("c".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            f.remote.failListing(of: "keep", with: FileProviderError(.serverUnreachable, "keep is unreachable"))
            try f.memory.remove(path: "other/c.txt")
            try f.memory.write(path: "new.txt", data: Data("n".utf8))
            let report = try await controller.sync()
            #expect(report.notices.contains { $0.contains("keep") }, "\(report.notices)")
            #expect(report.added == 1)
            #expect(report.deleted == 1)
            let paths = try f.manager.store.descendants(domainID: controller.domainID, of: "").map(\.path)
            #expect(paths == ["keep", "keep/a.txt", "keep/deep", "keep/deep/b.txt", "new.txt", "other"])
            #expect(entry(at: f.placeholderURL(controller, "keep/a.txt")) == .file)
            #expect(entry(at: f.placeholderURL(controller, "keep/deep/b.txt")) == .file)
            #expect(entry(at: f.placeholderURL(controller, "other/c.txt")) == .none)
            // Once the folder lists again, its real state comes back.
            f.remote.failListing(of: "keep", with: nil)
            try f.memory.remove(path: "keep/a.txt")
            try await controller.sync()
            #expect(entry(at: f.placeholderURL(controller, "keep/a.txt")) == .none)
            #expect(entry(at: f.placeholderURL(controller, "keep/deep/b.txt")) == .file)
        }
    }

    /// A store that stops answering below the root: what it listed is synced, the rest kept,
    /// and the report says so (the CLI exits 1) and the domain backs off; a folder the store
    /// refuses (permission) is a notice only.
    @Test func aStoreThatStopsAnsweringDuringTheWalkBacksTheDomainOff() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "keep/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "shut/b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            f.remote.failListing(of: "shut", with: FileProviderError(.permissionDenied, "no entry"))
            let refused = try await controller.sync()
            #expect(refused.unreachable == nil)
            #expect(try f.manager.backoff(ofDomain: "mem") == nil)
            f.remote.failListing(of: "keep", with: FileProviderError(.serverUnreachable, "connection reset"))
            try f.memory.write(path: "new.txt", data: Data("n".utf8))
            let report = try await controller.sync()
            #expect(report.unreachable?.contains("keep") == true && report.unreachable?.contains("connection reset") == true)
            #expect(report.added == 1, "what was listed is synced")
            #expect(try f.manager.backoff(ofDomain: "mem") != nil, "the domain backs off")
            #expect(entry(at: f.placeholderURL(controller, "keep/a.txt")) == .file, "what was not listed is kept")
            f.remote.failListing(of: "keep", with: nil)
            f.remote.failListing(of: "shut", with: nil)
            let again = try await controller.sync()
            #expect(again.unreachable == nil)
            #expect(try f.manager.backoff(ofDomain: "mem") == nil)
        }
    }

    @Test func rootListingFailureThrowsAndRecordsTheError() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "f.txt", data: Data("f".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            f.memory.setFailure(FileProviderError(.serverUnreachable, "connection refused"), for: .enumerateItems)
            await expectCode(.serverUnreachable) { try await controller.sync() }
            let failed = try f.manager.domain(named: "mem")
            #expect(failed.lastError?.contains("connection refused") == true)
            // Nothing was deleted because of the failure.
            #expect(entry(at: f.placeholderURL(controller, "f.txt")) == .file)
            #expect(try controller.record(at: "f.txt").state == .placeholder)
            f.memory.setFailure(nil, for: .enumerateItems)
            try await controller.sync()
            #expect(try f.manager.domain(named: "mem").lastError == nil)
        }
    }

    @Test func symlinksStayPlaceholders() async throws {
        try await Fixture.with { f in
            try f.memory.symlink(path: "link", target: "../../etc/passwd")
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(tree(at: controller.replica.root) == ["link.placeholder"])
            #expect(try placeholder(at: f.placeholderURL(controller, "link")).symlinkTarget == "../../etc/passwd")
            let outcomes = await controller.materialize(paths: ["link"], recursive: false)
            #expect(codes(outcomes) == [.notSupported])
            #expect(tree(at: controller.replica.root) == ["link.placeholder"])
        }
    }
}
