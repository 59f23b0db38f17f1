import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Content policies set per folder and per item, inherited downward: what each one does now
/// and what sync does under it later.
@Suite struct ContentPolicyTests {
    @Test func aFolderPolicyIsInheritedAndOverriddenBelow() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a/x.txt", data: Data("x".utf8))
            try f.memory.write(path: "a/b/y.txt", data: Data("y".utf8))
            try f.memory.write(path: "c.txt", data: Data("c".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()

            let eager = await controller.setPolicy(.eager, paths: ["a"])
            #expect(codes(eager.outcomes) == [nil, nil])
            #expect(eager.changes.map { "\($0.path) \($0.policy.rawValue) \($0.setOn ?? "-")" } == ["mem:/a eager mem:/a"])
            #expect(try controller.record(at: "a/x.txt").state == .materialized)
            #expect(try controller.record(at: "a/b/y.txt").state == .materialized)
            #expect(try controller.effectivePolicy(at: "a/b/y.txt") == EffectivePolicy(path: "a/b/y.txt", policy: .eager, setOn: "a"))
            #expect(try controller.effectivePolicy(at: "c.txt") == EffectivePolicy(path: "c.txt", policy: .lazy, setOn: nil))

            // A policy below overrides the folder's for its subtree only.
            #expect(codes(await controller.setPolicy(.lazy, paths: ["a/b"]).outcomes) == [])
            #expect(try controller.effectivePolicy(at: "a/b/y.txt").setOn == "a/b")
            #expect(codes(await controller.evict(paths: ["a/b/y.txt"], recursive: false)) == [nil])
            let refused = await controller.evict(paths: ["a/x.txt"], recursive: false)
            #expect(codes(refused) == [.nonEvictable])
            #expect(
                refused.first?.error?.message
                    == "mem:/a/x.txt is pinned (policy eager through mem:/a); 'fileproviderctl policy mem:/a lazy' makes it evictable")

            // Sync downloads what is added below the eager folder, not below the lazy one.
            try f.memory.write(path: "a/new/deep.txt", data: Data("d".utf8))
            try f.memory.write(path: "a/b/later.txt", data: Data("l".utf8))
            let report = try await controller.sync()
            #expect(report.downloaded == 1, "\(report.notices)")
            #expect(try Data(contentsOf: f.url(controller, "a/new/deep.txt")) == Data("d".utf8))
            #expect(try controller.record(at: "a/b/later.txt").state == .placeholder)

            // Set on the folder again, the policy below goes: the whole subtree follows it.
            let online = await controller.setPolicy(.onlineOnly, paths: ["a"])
            #expect(online.changes.first?.cleared == ["mem:/a/b"])
            #expect(Set(online.outcomes.map(\.path)) == ["mem:/a/x.txt", "mem:/a/new/deep.txt"])
            #expect(codes(online.outcomes) == [nil, nil])
            #expect(try controller.policies().folders == ["a": .onlineOnly])
            #expect(try controller.summary().materialized == 0)
            #expect(tree(at: controller.replica.root).filter { !$0.hasSuffix("/") && !$0.hasSuffix(".placeholder") }.isEmpty)

            // `inherit` removes the item's own policy.
            let inherit = await controller.setPolicy(nil, paths: ["a", "c.txt"])
            #expect(inherit.changes.map(\.policy) == [.lazy, .lazy])
            #expect(inherit.changes.map(\.setOn) == [nil, nil])
            #expect(try controller.policies().folders.isEmpty)
            #expect(try controller.record(at: "a").contentPolicy == nil)
        }
    }

    @Test func inheritFollowsTheFolderAboveAndActsOnIt() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "p/q/z.txt", data: Data("z".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.setPolicy(.eager, paths: ["p"])
            #expect(try controller.record(at: "p/q/z.txt").state == .materialized)
            #expect(codes(await controller.setPolicy(.lazy, paths: ["p/q"]).outcomes) == [])
            #expect(codes(await controller.evict(paths: ["p/q/z.txt"], recursive: false)) == [nil])
            // Inheriting again: eager through p, downloaded now.
            let result = await controller.setPolicy(nil, paths: ["p/q"])
            #expect(result.changes.first.map { "\($0.policy.rawValue) \($0.setOn ?? "-")" } == "eager mem:/p")
            #expect(codes(result.outcomes) == [nil])
            #expect(try controller.record(at: "p/q/z.txt").state == .materialized)
            await expectCode(.noSuchItem) { try controller.effectivePolicy(at: "nope") }
            #expect(codes(await controller.setPolicy(.eager, paths: ["nope"]).outcomes) == [.noSuchItem])
        }
    }

    @Test func evictOnRemoteUpdateEvictsInsteadOfDownloadingAgain() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "news/a.txt", data: Data("first".utf8))
            try f.memory.write(path: "news/edited.txt", data: Data("base".utf8))
            try f.memory.write(path: "plain.txt", data: Data("plain".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["news", "plain.txt"], recursive: true)
            #expect(codes(await controller.setPolicy(.evictOnRemoteUpdate, paths: ["news"]).outcomes) == [])
            #expect(try controller.record(at: "news/a.txt").state == .materialized, "setting it evicts nothing")

            // Edited in the store: evicted, not downloaded; the placeholder has the new size.
            let fetches = f.memory.callCount(.fetchContents)
            let newer = Data("second, longer".utf8)
            try f.memory.write(path: "news/a.txt", data: newer)
            let report = try await controller.sync()
            #expect(report.evictedOnUpdate == 1 && report.downloaded == 0, "\(report.notices)")
            #expect(f.memory.callCount(.fetchContents) == fetches)
            #expect(entry(at: f.url(controller, "news/a.txt")) == .none)
            #expect(try placeholder(at: f.placeholderURL(controller, "news/a.txt")).size == Int64(newer.count))
            let record = try controller.record(at: "news/a.txt")
            #expect(record.state == .placeholder && record.localContentVersion == nil)
            let logged = try f.manager.store.evictions(domainID: controller.domainID)
            #expect(
                logged.map { "\($0.path) \($0.size) \($0.reason)" } == [
                    "news/a.txt 5 changed in the store (evict-on-remote-update, set on /news)"
                ])
            // Read again later, it is the new version.
            #expect(codes(await controller.materialize(paths: ["news/a.txt"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "news/a.txt")) == newer)

            // A file outside the policy is downloaded again, as before.
            try f.memory.write(path: "plain.txt", data: Data("plain, v2".utf8))
            let lazy = try await controller.sync()
            #expect(lazy.downloaded == 1 && lazy.evictedOnUpdate == 0)
            #expect(try Data(contentsOf: f.url(controller, "plain.txt")) == Data("plain, v2".utf8))
        }
    }

    @Test func evictOnRemoteUpdateLeavesALocallyEditedFileAlone() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "news/edited.txt", data: Data("base".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["news/edited.txt"], recursive: false)
            _ = await controller.setPolicy(.evictOnRemoteUpdate, paths: ["news"])
            let local = Data("edited here, not uploaded".utf8)
            try local.write(to: f.url(controller, "news/edited.txt"))
            try f.memory.write(path: "news/edited.txt", data: Data("edited in the store".utf8))

            // Only down: the local edit is neither evicted nor overwritten.
            let down = try await controller.sync(upload: false)
            #expect(down.evictedOnUpdate == 0 && down.downloaded == 0)
            #expect(try Data(contentsOf: f.url(controller, "news/edited.txt")) == local)
            #expect(try controller.record(at: "news/edited.txt").state == .materialized)

            // A sync sending the edit first: evicted neither.
            try f.memory.write(path: "news/edited.txt", data: Data("edited in the store again".utf8))
            let both = try await controller.sync()
            #expect(both.evictedOnUpdate == 0, "\(both.notices)")
            #expect(entry(at: f.url(controller, "news/edited.txt")) == .file)
        }
    }

    @Test func onlineOnlyEvictsNowAndRefusesEditedAndOpenFiles() async throws {
        try await Fixture.with { f in
            for name in ["plain", "edited", "open"] { try f.memory.write(path: "o/\(name).txt", data: Data(name.utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["o"], recursive: true)
            let edited = Data("edited locally".utf8)
            try edited.write(to: f.url(controller, "o/edited.txt"))
            let reader = try CloseOnExecFile.reading(f.url(controller, "o/open.txt"))

            let result = await controller.setPolicy(.onlineOnly, paths: ["o"])
            let byPath = Dictionary(uniqueKeysWithValues: result.outcomes.map { ($0.path, $0.error) })
            #expect(byPath.count == 3)
            #expect(byPath["mem:/o/plain.txt"] == .some(nil))
            #expect(byPath["mem:/o/edited.txt"]??.code == .unsyncedEdits)
            #expect(
                byPath["mem:/o/edited.txt"]??.message
                    == "mem:/o/edited.txt has local changes that are not uploaded; not evicted now (online-only: evicted once a sync has uploaded them)"
            )
            #expect(byPath["mem:/o/open.txt"]??.code == .nonEvictable)
            #expect(byPath["mem:/o/open.txt"]??.message.contains("is not evicted now: a program has it open") == true)
            #expect(entry(at: f.url(controller, "o/plain.txt")) == .none)
            #expect(entry(at: f.placeholderURL(controller, "o/plain.txt")) == .file)
            #expect(try Data(contentsOf: f.url(controller, "o/edited.txt")) == edited)
            #expect(try Data(contentsOf: f.url(controller, "o/open.txt")) == Data("open".utf8))
            #expect(try controller.record(at: "o/open.txt").state == .materialized)
            #expect(try f.manager.store.evictions(domainID: controller.domainID).map(\.reason) == ["online-only (set on /o)"])

            // Closed, it goes.
            try reader.close()
            #expect(codes(await controller.unpin(paths: ["o/open.txt"]).outcomes) == [nil])
            #expect(entry(at: f.placeholderURL(controller, "o/open.txt")) == .file)
        }
    }

    @Test func pinAndUnpinAreEagerAndOnlineOnly() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "d/e/b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.setPolicy(.evictOnRemoteUpdate, paths: ["d/e"])
            #expect(codes(await controller.pin(paths: ["d"])) == [nil, nil])
            #expect(try controller.record(at: "d").contentPolicy == .eager)
            #expect(try controller.record(at: "d/e").contentPolicy == nil, "pinning a folder clears the policies below")
            #expect(try controller.isEffectivelyPinned(controller.record(at: "d/e/b.txt")))

            let unpinned = await controller.unpin(paths: ["d"])
            #expect(unpinned.changes.map(\.policy) == [.onlineOnly])
            #expect(codes(unpinned.outcomes) == [nil, nil])
            #expect(try controller.record(at: "d").contentPolicy == .onlineOnly)
            #expect(tree(at: controller.replica.root) == ["d/", "d/a.txt.placeholder", "d/e/", "d/e/b.txt.placeholder"])
            #expect(try !controller.isEffectivelyPinned(controller.record(at: "d/e/b.txt")))
            // Materialized on request, it is downloaded (automatic eviction takes it after use).
            #expect(codes(await controller.materialize(paths: ["d/a.txt"], recursive: false)) == [nil])
            #expect(try Data(contentsOf: f.url(controller, "d/a.txt")) == Data("a".utf8))
        }
    }

    @Test func explainAndTheRecordShowThePolicy() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "photos/2023/a.jpg", data: Data("a".utf8))
            try f.memory.write(path: "b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.setPolicy(.evictOnRemoteUpdate, paths: ["photos/2023"])
            let inherited = try f.manager.explain(ItemLocation(domain: "mem", path: "photos/2023/a.jpg"))
            #expect(inherited.policy == "evict-on-remote-update" && inherited.policySetOn == "/photos/2023" && !inherited.pinned)
            #expect(inherited.reasons.contains { $0.hasPrefix("evict-on-remote-update through mem:/photos/2023: downloaded when read") })
            let own = try f.manager.explain(ItemLocation(domain: "mem", path: "photos/2023"))
            #expect(own.reasons.contains { $0.hasPrefix("evict-on-remote-update (set on this item): the files below it are downloaded") })
            let plain = try f.manager.explain(ItemLocation(domain: "mem", path: "b.txt"))
            #expect(plain.policy == "lazy" && plain.policySetOn == nil)
            #expect(plain.reasons.contains { $0.hasPrefix("lazy (the default): downloaded when read, evictable") })
            #expect(plain.reasons.last?.hasPrefix("in sync with the store") == true, "\(plain.reasons)")
        }
    }

    /// A file's own policy is in its row, not in the resolver (which holds the folders'
    /// only), and wins over its folder's everywhere it is asked.
    @Test func aFilesOwnPolicyWinsOverItsFolders() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "e/own.txt", data: Data("own".utf8))
            try f.memory.write(path: "e/other.txt", data: Data("other".utf8))
            try f.memory.write(path: "o/keep.txt", data: Data("keep".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.setPolicy(.eager, paths: ["e"])
            let lazy = await controller.setPolicy(.lazy, paths: ["e/own.txt"])
            #expect(lazy.changes.map { "\($0.policy.rawValue) \($0.setOn ?? "-")" } == ["lazy mem:/e/own.txt"])
            _ = await controller.setPolicy(.onlineOnly, paths: ["o"])
            let eager = await controller.setPolicy(.eager, paths: ["o/keep.txt"])
            #expect(eager.changes.map { "\($0.policy.rawValue) \($0.setOn ?? "-")" } == ["eager mem:/o/keep.txt"])
            #expect(codes(eager.outcomes) == [nil])

            let resolver = try controller.policies()
            #expect(resolver.folders == ["e": .eager, "o": .onlineOnly])
            #expect(resolver.resolve(try controller.record(at: "e/own.txt")) == (.lazy, "e/own.txt"))
            #expect(resolver.resolve(try controller.record(at: "e/other.txt")) == (.eager, "e"))
            #expect(resolver.resolve(try controller.record(at: "o/keep.txt")) == (.eager, "o/keep.txt"))
            #expect(
                try controller.effectivePolicy(at: "e/own.txt") == EffectivePolicy(path: "e/own.txt", policy: .lazy, setOn: "e/own.txt"))
            #expect(try controller.effectivePolicy(at: "o/keep.txt").isOwn)
            #expect(try controller.isEffectivelyPinned(controller.record(at: "o/keep.txt")))
            #expect(try !controller.isEffectivelyPinned(controller.record(at: "e/own.txt")))
            let explained = try f.manager.explain(ItemLocation(domain: "mem", path: "o/keep.txt"))
            #expect(explained.policy == "eager" && explained.policySetOn == "/o/keep.txt" && explained.pinnedBy == "/o/keep.txt")

            // evict: the lazy file goes, its eager sibling is refused through the folder.
            #expect(codes(await controller.evict(paths: ["e/own.txt"], recursive: false)) == [nil])
            let refused = await controller.evict(paths: ["e", "o"], recursive: true)
            #expect(codes(refused) == [.nonEvictable, .nonEvictable])
            #expect(refused.map(\.path) == ["mem:/e", "mem:/o/keep.txt"])
            #expect(try controller.record(at: "o/keep.txt").state == .materialized)

            // Sync: a new version of the eager file in the online-only folder is downloaded
            // again, not evicted; the lazy file in the eager folder stays a placeholder.
            try f.memory.write(path: "o/keep.txt", data: Data("keep 2".utf8))
            let report = try await controller.sync()
            #expect(report.evictedOnUpdate == 0 && report.downloaded == 1, "\(report.notices)")
            #expect(try Data(contentsOf: f.url(controller, "o/keep.txt")) == Data("keep 2".utf8))
            #expect(try controller.record(at: "e/own.txt").state == .placeholder)
        }
    }

    /// A move of a file whose identifier comes from its path keeps the policy set on it.
    @Test func aPolicySetOnAFileFollowsItsMove() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "m/a.txt", data: Data("a".utf8))
            try f.memory.mkdir(path: "n")
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.setPolicy(.onlineOnly, paths: ["m/a.txt"])
            try f.memory.rename(from: "m/a.txt", to: "n/a.txt")
            try await controller.sync()
            #expect(try controller.record(at: "n/a.txt").contentPolicy == .onlineOnly)
        }
    }
}

/// Content policies in a `dataless` replica (the tests run as root on ext4).
@Suite struct DatalessContentPolicyTests {
    @Test func evictOnRemoteUpdateLeavesADatalessFileOfTheNewSize() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "v/movie.bin", data: bytes(20_000, seed: 1))
            try f.memory.write(path: "v/part.bin", data: bytes(30_000, seed: 2))
            let controller = try await f.addDomain(mode: .dataless)
            try await controller.sync()
            _ = await controller.materialize(paths: ["v/movie.bin"], recursive: false)
            _ = await controller.setPolicy(.evictOnRemoteUpdate, paths: ["v"])

            // part.bin partly downloaded (progressive hydration): bytes on disk, their range
            // recorded.
            let part = try controller.record(at: "v/part.bin")
            let partPath = controller.replica.path("v/part.bin")
            let chunk = bytes(8192, seed: 2)
            let fd = open(partPath, O_WRONLY)
            #expect(fd >= 0)
            _ = chunk.withUnsafeBytes { pwrite(fd, $0.baseAddress, chunk.count, 8192) }
            close(fd)
            try f.manager.store.addPresentRange(
                8192..<16384, domainID: controller.domainID, identifier: part.identifier, contentVersion: part.contentVersion)
            let partInode = controller.replica.fingerprint(atPath: partPath)?.inode

            let fetches = f.memory.callCount(.fetchContents)
            try f.memory.write(path: "v/movie.bin", data: bytes(25_000, seed: 3))
            try f.memory.write(path: "v/part.bin", data: bytes(30_000, seed: 4))
            let report = try await controller.sync()
            #expect(report.evictedOnUpdate == 2 && report.downloaded == 0, "\(report.notices)")
            #expect(f.memory.callCount(.fetchContents) == fetches)
            #expect(controller.replica.isPlaceholder(of: ItemIdentifier("v/movie.bin"), at: "v/movie.bin"))
            #expect(controller.replica.fingerprint(atPath: controller.replica.path("v/movie.bin"))?.size == 25_000)
            #expect(try controller.record(at: "v/movie.bin").state == .placeholder)
            // The partial file is a new dataless file without the old bytes, its ranges forgotten.
            #expect(controller.replica.isPlaceholder(of: part.identifier, at: "v/part.bin"))
            #expect(controller.replica.fingerprint(atPath: partPath)?.inode != partInode)
            #expect(try f.manager.store.partiallyPresent(domainID: controller.domainID).isEmpty)
            let now = try Data(contentsOf: URL(fileURLWithPath: partPath))
            #expect(now.count == 30_000 && now[8192..<16384].allSatisfy { $0 == 0 })
        }
    }

    @Test func onlineOnlyEvictsADownloadedAndAPartlyDownloadedFile() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.bin", data: bytes(10_000, seed: 1))
            try f.memory.write(path: "b.bin", data: bytes(10_000, seed: 2))
            let controller = try await f.addDomain(mode: .dataless)
            try await controller.sync()
            _ = await controller.materialize(paths: ["a.bin"], recursive: false)
            let b = try controller.record(at: "b.bin")
            try f.manager.store.addPresentRange(
                0..<4096, domainID: controller.domainID, identifier: b.identifier, contentVersion: b.contentVersion)
            let result = await controller.setPolicy(.onlineOnly, paths: [""])
            #expect(Set(result.outcomes.map(\.path)) == ["mem:/a.bin", "mem:/b.bin"])
            #expect(codes(result.outcomes) == [nil, nil])
            #expect(controller.replica.isPlaceholder(of: ItemIdentifier("a.bin"), at: "a.bin"))
            #expect(try controller.record(at: "a.bin").state == .placeholder)
            #expect(try f.manager.store.partiallyPresent(domainID: controller.domainID).isEmpty)
        }
    }
}
