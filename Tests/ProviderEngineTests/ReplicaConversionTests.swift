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

/// `convertDomain(named:to:)`: a domain's replica moves between the two replica modes with every
/// byte, inode and date kept, placeholders change their form, and an interrupted conversion
/// blocks the domain until a rerun finishes it. CI runs as root on ext4, where dataless domains
/// can be made.
@Suite struct ReplicaConversionTests {
    static let edited = Data("edited locally, not uploaded yet".utf8)

    /// A domain with a downloaded file, a pinned one, one not downloaded, a downloaded one edited
    /// locally, and a subfolder holding one downloaded and one not downloaded file.
    /// The domain, its replica folder and the backing folder a conversion to dataless moves it
    /// into.
    func prepare(_ f: Fixture) async throws -> (old: DomainController, replica: URL, backing: URL) {
        try f.memory.write(path: "kept.txt", data: bytes(3000, seed: 1))
        try f.memory.write(path: "pinned.txt", data: bytes(2000, seed: 2))
        try f.memory.write(path: "cold.txt", data: bytes(5000, seed: 3), modificationDate: Date(timeIntervalSince1970: 1_600_000_000.5))
        try f.memory.write(path: "edit.txt", data: Data("the store's version".utf8))
        try f.memory.write(path: "sub/deep.txt", data: bytes(700, seed: 4))
        try f.memory.write(path: "sub/warm.txt", data: bytes(800, seed: 5))
        let controller = try await f.addDomain()
        try await controller.sync()
        #expect(codes(await controller.materialize(paths: ["kept.txt", "edit.txt", "sub/warm.txt"], recursive: false)) == [nil, nil, nil])
        #expect(codes(await controller.pin(paths: ["pinned.txt"])) == [nil])
        try Self.edited.write(to: f.url(controller, "edit.txt"))
        return (controller, URL(fileURLWithPath: controller.replica.root.path), f.home.appendingPathComponent("replicas/mem"))
    }

    /// What a folder holds: every path with its bytes ("" for folders), not following symlinks.
    func contents(_ root: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for path in tree(at: root) {
            result[path] = path.hasSuffix("/") ? Data() : try Data(contentsOf: root.appendingPathComponent(path))
        }
        return result
    }

    func inode(_ url: URL) -> UInt64 {
        var info = stat()
        return stat(url.path, &info) == 0 ? UInt64(info.st_ino) : 0
    }

    func isDataless(_ url: URL) -> Bool { Replica.datalessOwner(atPath: url.path) != nil }

    @Test func aDomainConvertsBothWaysAndBackKeepingEveryByteAndSyncSendsExactlyTheEdit() async throws {
        try await Fixture.with { f in
            let (old, replica, backing) = try await prepare(f)
            let before = try contents(replica)
            let storeItems = f.memory.allIdentifiers.count
            #expect(
                before.keys.sorted() == [
                    "cold.txt.placeholder", "edit.txt", "kept.txt", "pinned.txt", "sub/", "sub/deep.txt.placeholder", "sub/warm.txt",
                ])
            let inodes = ["kept.txt", "pinned.txt", "edit.txt", "sub/warm.txt"].map { inode(replica.appendingPathComponent($0)) }

            // To dataless: everything moves into the backing folder, placeholders become dataless
            // files of the item's size and date; the replica folder is left empty.
            let toDataless = try await f.manager.convertDomain(named: "mem", to: .dataless)
            #expect(toDataless.from == .placeholderFiles && toDataless.to == .dataless)
            #expect(toDataless.movedEntries == 5)
            #expect(toDataless.convertedPlaceholders == 2)
            #expect(toDataless.files == 4 && toDataless.folders == 1)
            #expect(!toDataless.resumed && !toDataless.unchanged)
            #expect(try f.manager.domain(named: "mem").replicaMode == .dataless)
            #expect(tree(at: replica).isEmpty)
            #expect(tree(at: backing) == ["cold.txt", "edit.txt", "kept.txt", "pinned.txt", "sub/", "sub/deep.txt", "sub/warm.txt"])
            #expect(isDataless(backing.appendingPathComponent("cold.txt")))
            #expect(isDataless(backing.appendingPathComponent("sub/deep.txt")))
            #expect(!isDataless(backing.appendingPathComponent("kept.txt")))
            let cold = try #require(old.replica.fingerprint(atPath: backing.appendingPathComponent("cold.txt").path))
            #expect(cold.size == 5000)
            #expect(cold.modificationNanos == 1_600_000_000_500_000_000)
            for (index, path) in ["kept.txt", "pinned.txt", "edit.txt", "sub/warm.txt"].enumerated() {
                #expect(try Data(contentsOf: backing.appendingPathComponent(path)) == before[path], "\(path)")
                #expect(inode(backing.appendingPathComponent(path)) == inodes[index], "\(path)")
            }
            // The backing folder is the domain's replica root now; the old one is not.
            try Replica(root: backing, staging: backing).checkRoot(domain: "mem", knowsItems: true)
            #expect(throws: FileProviderError.self) {
                try Replica(root: replica, staging: replica).checkRoot(domain: "mem", knowsItems: true)
            }
            // A controller made before the conversion works in the old folder: it refuses to sync.
            let stale = await #expect(throws: FileProviderError.self) { try await old.sync() }
            #expect(stale?.code == .providerDomainTemporarilyUnavailable)
            #expect(stale?.message.contains("was converted to dataless") == true, "\(stale?.message ?? "")")
            #expect(tree(at: replica).isEmpty)

            // The edit is still an edit against the same base (no upload happened yet).
            let dataless = try await f.manager.controller(for: "mem")
            #expect(dataless.replica.root.path == backing.path && dataless.replica.layout.mode == .dataless)
            let unsent = try await f.manager.unsentChanges(inDomain: "mem")
            #expect(unsent.map(\.path) == ["/edit.txt"])

            // Back to placeholder-files: dataless files become .placeholder files, the backing
            // folder goes.
            let back = try await f.manager.convertDomain(named: "mem", to: .placeholderFiles)
            #expect(back.convertedPlaceholders == 2 && back.movedEntries == 5 && back.files == 4)
            #expect(entry(at: backing) == .none)
            #expect(try contents(replica) == before)
            for (index, path) in ["kept.txt", "pinned.txt", "edit.txt", "sub/warm.txt"].enumerated() {
                #expect(inode(replica.appendingPathComponent(path)) == inodes[index], "\(path)")
            }
            #expect(try placeholder(at: replica.appendingPathComponent("cold.txt.placeholder")).size == 5000)
            #expect(try f.manager.domain(named: "mem").replicaMode == .placeholderFiles)

            // And to dataless once more; the next sync sends exactly the edit, with no conflict.
            _ = try await f.manager.convertDomain(named: "mem", to: .dataless)
            let again = try await f.manager.controller(for: "mem")
            let report = try await again.sync()
            #expect(report.uploaded == 1)
            #expect(report.conflicts == 0)
            #expect(f.memory.contents(of: "edit.txt") == Self.edited)
            #expect(f.memory.contents(of: "kept.txt") == bytes(3000, seed: 1))
            #expect(f.memory.allIdentifiers.count == storeItems, "\(f.memory.allIdentifiers)")
            #expect(!tree(at: backing).contains { $0.contains("conflicted copy") })
            #expect(isDataless(backing.appendingPathComponent("cold.txt")))
            #expect(isDataless(backing.appendingPathComponent("sub/deep.txt")))
            let records = try f.manager.store.allItems(domainID: again.domainID)
            let states = Dictionary(uniqueKeysWithValues: records.map { ($0.path, $0.state) })
            #expect(states["cold.txt"] == .placeholder && states["sub/deep.txt"] == .placeholder)
            #expect(states["kept.txt"] == .materialized && states["edit.txt"] == .materialized)
            #expect(records.first { $0.path == "pinned.txt" }?.isPinned == true)
            #expect(try await f.manager.unsentChanges(inDomain: "mem").isEmpty)
            // Converting to the mode it has changes nothing.
            let unchanged = try await f.manager.convertDomain(named: "mem", to: .dataless)
            #expect(unchanged.unchanged)
        }
    }

    /// A conversion cut short (the marker written, half the entries moved, one placeholder in
    /// both forms): the domain refuses engine work and removal, and a rerun finishes the job.
    @Test func anInterruptedConversionBlocksTheDomainAndARerunFinishesIt() async throws {
        try await Fixture.with { f in
            let (old, replica, backing) = try await prepare(f)
            let before = try contents(replica)
            let storeItems = f.memory.allIdentifiers.count
            let domain = try f.manager.domain(named: "mem")

            // What a kill -9 in the middle leaves: the marker, the backing folder made and
            // marked, some entries moved, one placeholder converted but its old form not removed.
            try ConversionMarker.write(.dataless, atPath: f.manager.conversionMarkerPath(forDomainNamed: "mem"))
            try f.manager.makeFolders(replica: replica, backing: backing, domain: "mem")
            for name in ["kept.txt", "sub", "cold.txt.placeholder"] {
                #expect(rename(replica.appendingPathComponent(name).path, backing.appendingPathComponent(name).path) == 0)
            }
            let half = Replica(root: backing, staging: backing, layout: .dataless)
            let metadata = try placeholder(at: backing.appendingPathComponent("cold.txt.placeholder"))
            try half.createDatalessFile("cold.txt", metadata)

            // Nothing works on the domain meanwhile, and each refusal says how to finish.
            let finish = "finish it with 'fileproviderctl domain convert mem --mode dataless'"
            var refusals: [FileProviderError?] = []
            refusals.append(await #expect(throws: FileProviderError.self) { try await old.sync() })
            refusals.append(await #expect(throws: FileProviderError.self) { try await f.manager.controller(for: "mem") })
            refusals.append(await #expect(throws: FileProviderError.self) { try await f.manager.unsentChanges(inDomain: "mem") })
            refusals.append(
                await #expect(throws: FileProviderError.self) { try await f.manager.removeDomain(named: "mem", keepReplica: false) })
            for refusal in refusals {
                #expect(refusal?.code == .providerDomainTemporarilyUnavailable)
                #expect(refusal?.message.contains(finish) == true, "\(refusal?.message ?? "")")
            }
            let other = await #expect(throws: FileProviderError.self) {
                try await f.manager.convertDomain(named: "mem", to: .placeholderFiles)
            }
            #expect(other?.message.contains("finish it first with 'fileproviderctl domain convert mem --mode dataless'") == true)
            #expect(f.memory.contents(of: "kept.txt") != nil)
            #expect(try f.manager.domain(named: "mem").replicaMode == domain.replicaMode)

            let report = try await f.manager.convertDomain(named: "mem", to: .dataless)
            #expect(report.resumed)
            #expect(report.movedEntries == 2)
            #expect(report.convertedPlaceholders == 2)
            #expect(f.manager.unfinishedConversion(ofDomainNamed: "mem") == nil)
            #expect(tree(at: replica).isEmpty)
            #expect(tree(at: backing) == ["cold.txt", "edit.txt", "kept.txt", "pinned.txt", "sub/", "sub/deep.txt", "sub/warm.txt"])
            for path in ["kept.txt", "pinned.txt", "edit.txt", "sub/warm.txt"] {
                #expect(try Data(contentsOf: backing.appendingPathComponent(path)) == before[path], "\(path)")
            }
            let controller = try await f.manager.controller(for: "mem")
            let synced = try await controller.sync()
            #expect(synced.uploaded == 1 && synced.conflicts == 0)
            #expect(f.memory.contents(of: "edit.txt") == Self.edited)
            #expect(f.memory.allIdentifiers.count == storeItems, "\(f.memory.allIdentifiers)")
        }
    }

    /// The same the other way: half the backing folder moved back, one dataless file in both
    /// forms; the rerun finishes, the backing folder goes.
    @Test func anInterruptedConversionToPlaceholderFilesFinishesOnRerun() async throws {
        try await Fixture.with { f in
            let (old, replica, backing) = try await prepare(f)
            let before = try contents(replica)
            _ = try await f.manager.convertDomain(named: "mem", to: .dataless)

            try ConversionMarker.write(.placeholderFiles, atPath: f.manager.conversionMarkerPath(forDomainNamed: "mem"))
            for name in ["edit.txt", "sub", "cold.txt"] {
                #expect(rename(backing.appendingPathComponent(name).path, replica.appendingPathComponent(name).path) == 0)
            }
            let record = try #require(try f.manager.store.item(domainID: old.domainID, path: "cold.txt"))
            try Replica(root: replica, staging: replica).writePlaceholder("cold.txt", PlaceholderMetadata(domain: "mem", record: record))
            #expect(isDataless(replica.appendingPathComponent("cold.txt")))

            let report = try await f.manager.convertDomain(named: "mem", to: .placeholderFiles)
            #expect(report.resumed && report.convertedPlaceholders == 2)
            #expect(entry(at: backing) == .none)
            #expect(try contents(replica) == before)
            let controller = try await f.manager.controller(for: "mem")
            let synced = try await controller.sync()
            #expect(synced.uploaded == 1 && synced.conflicts == 0)
            #expect(f.memory.contents(of: "edit.txt") == Self.edited)
            #expect(tree(at: replica).contains("cold.txt.placeholder"))
        }
    }

    /// The conversion's own steps stopped after 1, 2, 4, … entries (as an interruption stops
    /// them), both ways: each time the domain stays blocked, a rerun finishes, and every byte is
    /// where it belongs.
    @Test func aConversionStoppedAfterAnyNumberOfStepsIsFinishedByARerun() async throws {
        try await Fixture.with { f in
            let (old, replica, backing) = try await prepare(f)
            let before = try contents(replica)
            let marker = f.manager.conversionMarkerPath(forDomainNamed: "mem")
            for steps in [0, 1, 2, 4, 6, 9] {
                for (target, source, destination) in [(ReplicaMode.dataless, replica, backing), (.placeholderFiles, backing, replica)] {
                    try ConversionMarker.write(target, atPath: marker)
                    if target == .dataless { try f.manager.makeFolders(replica: replica, backing: backing, domain: "mem") }
                    let counter = Mutex(0)
                    let conversion = ReplicaConversion(
                        domain: "mem", domainID: old.domainID,
                        from: ReplicaLayouts.layout(for: target == .dataless ? .placeholderFiles : .dataless),
                        to: ReplicaLayouts.layout(for: target), source: source, destination: destination,
                        store: f.manager.store, events: nil, estimated: 10,
                        stopped: {
                            counter.withLock { count in
                                count += 1
                                return count > steps
                            }
                        })
                    var report = ConversionReport(domain: "mem", from: .dataless, to: target, source: "", destination: "")
                    let stopped = #expect(throws: FileProviderError.self) { try conversion.run(into: &report) }
                    #expect(stopped?.code == .cancelled)
                    await #expect(throws: FileProviderError.self) { try await f.manager.controller(for: "mem") }
                    let finished = try await f.manager.convertDomain(named: "mem", to: target)
                    #expect(finished.resumed, "\(steps) steps to \(target)")
                    #expect(f.manager.unfinishedConversion(ofDomainNamed: "mem") == nil)
                    #expect(try f.manager.domain(named: "mem").replicaMode == target)
                    if target == .dataless {
                        #expect(tree(at: replica).isEmpty, "\(steps) steps")
                        #expect(isDataless(backing.appendingPathComponent("cold.txt")), "\(steps) steps")
                        #expect(try Data(contentsOf: backing.appendingPathComponent("edit.txt")) == Self.edited)
                    } else {
                        #expect(try contents(replica) == before, "\(steps) steps")
                        #expect(entry(at: backing) == .none)
                    }
                }
            }
            let controller = try await f.manager.controller(for: "mem")
            let synced = try await controller.sync()
            #expect(synced.uploaded == 1 && synced.conflicts == 0)
            #expect(try contents(replica) == before.merging(["edit.txt": Self.edited]) { _, new in new })
        }
    }

    /// While `serve` holds the domain, nothing is converted; the message says to stop it.
    @Test func aServedDomainIsNotConverted() async throws {
        try await Fixture.with { f in
            let controller = try await prepare(f).old
            let before = try contents(controller.replica.root)
            let lock = try DomainLock.acquire(home: f.home, domain: "mem")
            let refusal = await #expect(throws: FileProviderError.self) { try await f.manager.convertDomain(named: "mem", to: .dataless) }
            #expect(refusal?.code == .cannotSynchronize)
            #expect(refusal?.message.contains("is served by process \(getpid()); stop 'fileproviderctl serve' first") == true)
            withExtendedLifetime(lock) {}
            #expect(try contents(controller.replica.root) == before)
            #expect(f.manager.unfinishedConversion(ofDomainNamed: "mem") == nil)
            #expect(try f.manager.domain(named: "mem").replicaMode == .placeholderFiles)
        }
    }

    /// While a sync holds the domain's sync lock, a conversion says whose it is, waits, and runs
    /// once the lock is free; a cancelled wait converts nothing.
    @Test func aConversionWaitsForTheSyncLockAndSaysForWhom() async throws {
        try await Fixture.with { f in
            let controller = try await prepare(f).old
            let before = try contents(controller.replica.root)
            let path = DomainLock.syncPath(home: f.home, domain: "mem")
            var held: DomainLock? = try DomainLock.attempt(path)
            #expect(held != nil)
            let waited = Mutex<[Int32?]>([])
            let events: ConversionEventHandler = { event in
                if case .waitingForSync(let process) = event { waited.withLock { $0.append(process) } }
            }

            let cancelled = Task { try await f.manager.convertDomain(named: "mem", to: .dataless, events: events) }
            #expect(await eventually { waited.withLock { $0.count } == 1 }, "the conversion did not say it waits")
            cancelled.cancel()
            await expectCode(.cancelled) { _ = try await cancelled.value }
            #expect(try contents(controller.replica.root) == before)
            #expect(try f.manager.domain(named: "mem").replicaMode == .placeholderFiles)

            let converting = Task { try await f.manager.convertDomain(named: "mem", to: .dataless, events: events) }
            #expect(await eventually { waited.withLock { $0.count } == 2 })
            #expect(waited.withLock { $0 } == [getpid(), getpid()], "the holder's pid, reported once per wait")
            #expect(held != nil)
            held = nil
            let report = try await converting.value
            #expect(!report.unchanged)
            #expect(try f.manager.domain(named: "mem").replicaMode == .dataless)
        }
    }

    /// A file beside a placeholder's name, a user's own `.placeholder` file and a dataless file
    /// moved by the user are all handled without losing anything.
    @Test func oddFilesAreKeptAndAMovedDatalessFileStaysAMovedPlaceholder() async throws {
        try await Fixture.with { f in
            let (_, replica, backing) = try await prepare(f)
            let mine = Data("{\"not\": \"a placeholder\"}".utf8)
            try mine.write(to: replica.appendingPathComponent("notes.placeholder"))
            _ = try await f.manager.convertDomain(named: "mem", to: .dataless)
            #expect(try Data(contentsOf: backing.appendingPathComponent("notes.placeholder")) == mine)
            // The user moves a dataless file; converting back keeps it a moved placeholder.
            #expect(rename(backing.appendingPathComponent("cold.txt").path, backing.appendingPathComponent("sub/cold.txt").path) == 0)
            let back = try await f.manager.convertDomain(named: "mem", to: .placeholderFiles)
            #expect(back.convertedPlaceholders == 2 && back.removedPlaceholders == 0)
            let moved = try placeholder(at: replica.appendingPathComponent("sub/cold.txt.placeholder"))
            #expect(moved.size == 5000 && moved.filename == "cold.txt")
            #expect(try Data(contentsOf: replica.appendingPathComponent("notes.placeholder")) == mine)
            let controller = try await f.manager.controller(for: "mem")
            try await controller.sync()
            #expect(f.memory.contents(of: "sub/cold.txt") == bytes(5000, seed: 3))
            #expect(f.memory.contents(of: "cold.txt") == nil)
            #expect(f.memory.contents(of: "edit.txt") == Self.edited)
        }
    }

    /// A placeholder file anyone may have written, with a date no item can have: the
    /// conversion makes its dataless file without that date (converting 1e300 seconds to a
    /// `timespec` trapped).
    @Test func aPlaceholderWithAnImpossibleDateConvertsWithoutIt() async throws {
        try await Fixture.with { f in
            let (_, replica, backing) = try await prepare(f)
            let file = replica.appendingPathComponent("cold.txt.placeholder")
            var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
            json["contentModificationDate"] = 1e300
            try JSONSerialization.data(withJSONObject: json).write(to: file)
            #expect(try PlaceholderMetadata.read(from: Data(contentsOf: file)).contentModificationDate == nil)
            let converted = try await f.manager.convertDomain(named: "mem", to: .dataless)
            #expect(converted.convertedPlaceholders == 2)
            #expect(isDataless(backing.appendingPathComponent("cold.txt")))
        }
    }

    /// Dataless files the user moved away from their items find them a page of records at a
    /// time (pages of 1 here), not in a map of every item of the domain.
    @Test func datalessFilesMovedAwayFindTheirItemsAPageAtATime() async throws {
        try await Fixture.with { f in
            let (_, replica, backing) = try await prepare(f)
            _ = try await f.manager.convertDomain(named: "mem", to: .dataless)
            f.manager.conversionPage.withLock { $0 = 1 }
            try FileManager.default.createDirectory(at: backing.appendingPathComponent("elsewhere"), withIntermediateDirectories: true)
            #expect(rename(backing.appendingPathComponent("cold.txt").path, backing.appendingPathComponent("sub/cold.txt").path) == 0)
            #expect(
                rename(backing.appendingPathComponent("sub/deep.txt").path, backing.appendingPathComponent("elsewhere/deep.txt").path) == 0)
            let back = try await f.manager.convertDomain(named: "mem", to: .placeholderFiles)
            #expect(back.convertedPlaceholders == 2 && back.removedPlaceholders == 0, "\(back)")
            let cold = try placeholder(at: replica.appendingPathComponent("sub/cold.txt.placeholder"))
            #expect(cold.size == 5000 && cold.filename == "cold.txt")
            let deep = try placeholder(at: replica.appendingPathComponent("elsewhere/deep.txt.placeholder"))
            #expect(deep.size == 700 && deep.filename == "deep.txt")
            let controller = try await f.manager.controller(for: "mem")
            try await controller.sync()
            #expect(f.memory.contents(of: "sub/cold.txt") == bytes(5000, seed: 3))
            #expect(f.memory.contents(of: "elsewhere/deep.txt") == bytes(700, seed: 4))
            #expect(f.memory.contents(of: "cold.txt") == nil && f.memory.contents(of: "sub/deep.txt") == nil)
        }
    }
}
