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

/// Automatic eviction (``Evictor``): the least recently used files that may go, down to the
/// budgets and the free-space floor; never a pinned file, a file with local changes or an
/// upload not finished, or a file a program has open.
@Suite struct EvictorTests {
    static let base = Date(timeIntervalSince1970: 1_700_000_000)

    /// A domain over the fixture's remote with `names` downloaded (`size` bytes each), used in
    /// the order given (the first the least recently).
    func domain(_ f: Fixture, _ name: String = "mem", files names: [String], size: Int = 1000, uses: [String: Double]? = nil)
        async throws -> DomainController
    {
        for (index, path) in names.enumerated() {
            _ = try f.memory.write(path: path, data: bytes(size, seed: UInt64(index)))
        }
        let controller = try await f.addDomain(name)
        try await controller.sync()
        #expect(codes(await controller.materialize(paths: names, recursive: false)).allSatisfy { $0 == nil })
        // materialize recorded "now" as every file's use: written first, then replaced.
        await f.manager.useRecorder.flush()
        for (index, path) in names.enumerated() {
            let at = uses?[path] ?? Double(index + 1)
            try f.manager.store.recordUse(
                domainID: controller.domainID, identifiers: [ItemIdentifier(path)], at: Self.base.addingTimeInterval(at))
        }
        return controller
    }

    func state(_ controller: DomainController, _ path: String) throws -> ContentState? {
        try controller.record(at: path).state
    }

    @Test func theOldestLazyFilesGoDownToTheBudgetNeverPinnedEditedUnsentOrOpenOnes() async throws {
        try await Fixture.with { f in
            let names = (0..<10).map { "f\($0)" }
            let controller = try await domain(f, files: names)
            let id = controller.domainID
            // f0 is pinned, f1 edited, f3 open, f4's upload not finished.
            #expect(codes(await controller.pin(paths: ["f0"])).allSatisfy { $0 == nil })
            try Data("edited locally".utf8).write(to: f.url(controller, "f1"))
            let open = try CloseOnExecFile.reading(f.url(controller, "f3"))
            _ = try f.manager.store.journal(JournalEntry(domainID: id, templateIdentifier: "modify:f4", operation: "modify", payload: "{}"))
            try f.manager.setCacheBudget(ofDomain: "mem", 6000)

            let evictor = Evictor(manager: f.manager)
            let pass = try await evictor.run()
            #expect(pass.evicted.map(\.path) == ["/f2", "/f5", "/f6", "/f7"])
            #expect(pass.evicted.allSatisfy { $0.kind == "domain-budget" && $0.bytes == 1000 })
            #expect(pass.evicted.first?.reason == "over the budget of mem: 9.8 KiB used of 5.9 KiB")
            let kept = Dictionary(uniqueKeysWithValues: pass.kept.map { ($0.path, $0.reason) })
            #expect(kept["/f0"]?.contains("pinned (eager") == true)
            #expect(kept["/f1"]?.contains("local changes") == true)
            #expect(kept["/f3"] == "a program has it open")
            #expect(kept["/f4"]?.contains("upload") == true)
            #expect(pass.domains.map(\.used) == [6000])
            for path in ["f2", "f5", "f6", "f7"] {
                #expect(try state(controller, path) == .placeholder)
                #expect(entry(at: f.url(controller, path)) == .none)
                #expect(entry(at: f.placeholderURL(controller, path)) == .file)
            }
            for path in ["f0", "f3", "f4", "f8", "f9"] {
                #expect(try Data(contentsOf: f.url(controller, path)) == bytes(1000, seed: UInt64(path.dropFirst())!))
            }
            #expect(try Data(contentsOf: f.url(controller, "f1")) == Data("edited locally".utf8))
            #expect(try open.readToEnd() == bytes(1000, seed: 3), "the open file reads its contents")
            let log = try f.manager.store.evictions(domainID: id, limit: 10)
            #expect(log.map(\.path) == ["f7", "f6", "f5", "f2"])
            #expect(log.allSatisfy { $0.reason.hasPrefix("over the budget of mem") && $0.size == 1000 })

            // Under the budget: nothing to do, and nothing looked at.
            let quiet = try await evictor.run()
            #expect(quiet.evicted.isEmpty && quiet.kept.isEmpty && quiet.notices.isEmpty)

            // A lower budget applies at the next pass; the file closed meanwhile goes first.
            try open.close()
            try f.manager.setCacheBudget(ofDomain: "mem", 3000)
            let lower = try await evictor.run()
            #expect(lower.evicted.map(\.path) == ["/f3", "/f8", "/f9"])
            for path in ["f0", "f1", "f4"] { #expect(try state(controller, path) == .materialized) }

            // Lower than what may go: the rest stays, and the pass says why.
            try f.manager.setCacheBudget(ofDomain: "mem", 0)
            let short = try await evictor.run()
            #expect(short.evicted.isEmpty)
            #expect(short.notices.contains { $0.hasPrefix("mem is still over its budget: 2.9 KiB used of 0 B") })
        }
    }

    @Test func theHomesBudgetTakesTheLeastRecentlyUsedFilesOfEveryDomain() async throws {
        try await Fixture.with { f in
            let names = ["a", "b", "c", "d"]
            let first = try await domain(f, "one", files: names, uses: ["a": 1, "b": 3, "c": 5, "d": 7])
            let second = try await domain(f, "two", files: names, uses: ["a": 2, "b": 4, "c": 6, "d": 8])
            try f.manager.setGlobalCacheBudget(5000)
            let pass = try await Evictor(manager: f.manager).run()
            #expect(pass.evicted.map { "\($0.domain):\($0.path)" } == ["one:/a", "two:/a", "one:/b"])
            #expect(pass.evicted.allSatisfy { $0.kind == "global-budget" })
            #expect(pass.evicted.first?.reason == "over the budget of all domains: 7.8 KiB used of 4.9 KiB")
            #expect(try state(first, "c") == .materialized && state(second, "b") == .materialized)

            // A pass over one domain counts the other's files but evicts only its own.
            try f.manager.setGlobalCacheBudget(3000)
            let scoped = try await Evictor(manager: f.manager, domains: ["two"]).run()
            #expect(scoped.evicted.map { "\($0.domain):\($0.path)" } == ["two:/b", "two:/c"])
            await expectCode(.providerDomainNotFound) { try await Evictor(manager: f.manager, domains: ["nope"]).run() }
        }
    }

    @Test func onlineOnlyFilesGoWheneverNoProgramHasThemOpen() async throws {
        try await Fixture.with { f in
            let controller = try await domain(f, files: ["o/x", "o/y", "o/keep/z", "lazy"])
            let store = f.manager.store
            for (path, policy) in [("o", ContentPolicy.onlineOnly), ("o/keep", .lazy)] {
                var folder = try controller.record(at: path)
                folder.contentPolicy = policy
                try store.save(folder)
            }
            let open = try CloseOnExecFile.reading(f.url(controller, "o/y"))
            let evictor = Evictor(manager: f.manager)
            let pass = try await evictor.run()
            #expect(pass.evicted.map(\.path) == ["/o/x"])
            #expect(pass.evicted.first?.reason == "online-only (set on /o)")
            #expect(pass.kept.map(\.path) == ["/o/y"])
            #expect(try state(controller, "o/keep/z") == .materialized)
            #expect(try state(controller, "lazy") == .materialized)
            try open.close()
            #expect(try await evictor.run().evicted.map(\.path) == ["/o/y"])
        }
    }

    @Test func filesSetOnlineOnlyThemselvesAreEvictedAndOwnPoliciesWinInAFolder() async throws {
        try await Fixture.with { f in
            let controller = try await domain(f, files: ["solo", "pinned/online", "o/own-eager", "o/x", "plain"])
            let store = f.manager.store
            // Set in the database (as another process would), not by setPolicy: nothing
            // evicted yet; only the pass finds them.
            for (path, policy) in [
                ("solo", ContentPolicy.onlineOnly), ("pinned", .eager), ("pinned/online", .onlineOnly), ("o", .onlineOnly),
                ("o/own-eager", .eager),
            ] {
                var record = try controller.record(at: path)
                record.contentPolicy = policy
                try store.save(record)
            }
            // The resolver holds the folders' policies only.
            #expect(try controller.policies().folders == ["pinned": .eager, "o": .onlineOnly])
            let pass = try await Evictor(manager: f.manager).run()
            #expect(pass.evicted.map(\.path).sorted() == ["/o/x", "/pinned/online", "/solo"])
            #expect(pass.evicted.first { $0.path == "/solo" }?.reason == "online-only (set on /solo)")
            #expect(pass.evicted.first { $0.path == "/pinned/online" }?.reason == "online-only (set on /pinned/online)")
            #expect(pass.evicted.first { $0.path == "/o/x" }?.reason == "online-only (set on /o)")
            #expect(try state(controller, "o/own-eager") == .materialized)
            #expect(try state(controller, "plain") == .materialized)
            // Under pressure, a file's own eager policy in an online-only folder keeps it too.
            try store.setCacheBudget(domainID: controller.domainID, 0)
            let pressed = try await Evictor(manager: f.manager).run()
            #expect(pressed.evicted.map(\.path) == ["/plain"])
            #expect(pressed.kept.map(\.path) == ["/o/own-eager"])
            #expect(pressed.kept.first?.reason == "pinned (eager, set on /o/own-eager)")
        }
    }

    @Test func theFreeSpaceFloorEvictsTheOldestFilesUntilItIsMet() async throws {
        try await Fixture.with { f in
            let controller = try await domain(f, files: ["a", "b", "c"])
            #expect(codes(await controller.pin(paths: ["b"])).allSatisfy { $0 == nil })
            // More free space than any disk has: everything that may go goes.
            try f.manager.setFreeSpaceFloor(1 << 60)
            let evictor = Evictor(manager: f.manager)
            let pass = try await evictor.run()
            #expect(pass.evicted.map(\.path) == ["/a", "/c"])
            #expect(pass.evicted.allSatisfy { $0.kind == "free-space-floor" && $0.reason.hasPrefix("below the free-space floor: ") })
            #expect(pass.notices.contains { $0.contains("still has less free than the floor") })
            #expect(try state(controller, "b") == .materialized)
            // The next pass does not look through the same files again while nothing changed.
            let again = try await evictor.run()
            #expect(again.kept.isEmpty && again.evicted.isEmpty)
            try f.manager.setFreeSpaceFloor(nil)
            #expect(try await evictor.run().notices.isEmpty)
        }
    }

    @Test func aPartlyDownloadedDatalessFileLosesItsRangesThenItsBlocks() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "partial.bin", data: bytes(1 << 20, seed: 1))
            _ = try f.memory.write(path: "whole.bin", data: bytes(100_000, seed: 2))
            let controller = try await f.addDomain(mode: .dataless)
            try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["whole.bin"], recursive: false)) == [nil])
            let store = f.manager.store
            let id = controller.domainID
            // A progressive read left the first 256 KiB on disk, recorded.
            let record = try controller.record(at: "partial.bin")
            let path = controller.replica.path("partial.bin")
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.write(contentsOf: bytes(1 << 20, seed: 1).prefix(256 << 10))
            try handle.synchronize()
            try handle.close()
            try store.addPresentRange(0..<(256 << 10), domainID: id, identifier: record.identifier, contentVersion: record.contentVersion)
            #expect(try f.manager.cacheUsage(of: controller.domain) == CacheUsage(materialized: 100_000, partial: 256 << 10))

            // Open: left.
            let open = try CloseOnExecFile.reading(URL(fileURLWithPath: path))
            try f.manager.setCacheBudget(ofDomain: "mem", 0)
            let evictor = Evictor(manager: f.manager)
            let first = try await evictor.run()
            #expect(first.evicted.map(\.path) == ["/whole.bin"])
            #expect(first.kept.map(\.path) == ["/partial.bin"])
            #expect(controller.replica.isPlaceholder(of: "whole.bin", at: "whole.bin"), "back to a dataless file")
            try open.close()

            let second = try await Evictor(manager: f.manager).run()
            #expect(second.evicted.map(\.path) == ["/partial.bin"])
            #expect(second.evicted.first?.partial == true && second.evicted.first?.bytes == 256 << 10)
            #expect(try store.presentRanges(domainID: id, identifier: record.identifier, contentVersion: record.contentVersion).isEmpty)
            var info = stat()
            #expect(lstat(path, &info) == 0)
            #expect(info.st_size == 1 << 20)
            #expect(info.st_blocks <= 8, "only the leading block of zeros is left")
            #expect(controller.replica.isPlaceholder(of: record.identifier, at: "partial.bin"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(4096) == Data(count: 4096))
            #expect(try f.manager.cacheUsage(of: controller.domain).total == 0)
        }
    }

    @Test func withoutLeasesTheProcessScanKeepsOpenFiles() async throws {
        try await Fixture.with { f in
            let controller = try await domain(f, files: ["a", "b"])
            let open = try CloseOnExecFile.reading(f.url(controller, "a"))
            defer { try? open.close() }
            try f.manager.setCacheBudget(ofDomain: "mem", 0)
            let evictor = Evictor(manager: f.manager, domains: nil, waitForLocks: true, method: .processScan, logger: nil)
            let pass = try await evictor.run()
            #expect(pass.evicted.map(\.path) == ["/b"])
            #expect(pass.kept.map(\.path) == ["/a"])
            #expect(pass.kept.first?.reason.hasPrefix("process \(getpid()) ") == true, "\(pass.kept)")
            #expect(try state(controller, "a") == .materialized)
        }
    }

    @Test func aLeaseSeesOpenAndMappedFilesAndSoDoesTheProcessScan() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-lease-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("file").path
        try bytes(8192, seed: 5).write(to: URL(fileURLWithPath: path))

        func outcome(_ method: ExclusiveFile.Method) throws -> String {
            switch try ExclusiveFile.open(path, writable: false, method: method) {
            case .held(let file):
                #expect(file.isLeased == (method == .lease))
                file.release()
                return "held"
            case .inUse(let why): return why
            case .missing: return "missing"
            }
        }
        #expect(try outcome(.lease) == "held")
        #expect(try outcome(.processScan) == "held")

        let handle = try CloseOnExecFile.reading(URL(fileURLWithPath: path))
        #expect(try outcome(.lease) == "a program has it open")
        #expect(try outcome(.processScan).hasSuffix("has it open"))
        try handle.close()

        // A mapping whose descriptor was closed still holds the file.
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        let mapping = mmap(nil, 8192, PROT_READ, MAP_SHARED, fd, 0)
        close(fd)
        #expect(mapping != MAP_FAILED)
        #expect(try outcome(.lease) == "a program has it open")
        #expect(try outcome(.processScan).hasSuffix("has it mapped"))
        munmap(mapping, 8192)
        // Held again once nothing has the file open. Polled: the kernel refuses a write lease
        // while any process has the file open, and a full parallel run once saw the last lease
        // refused: a child another test forks in that instant shares every descriptor of this
        // process, ours too, until it execs. What must hold is that the lease is taken again,
        // not at which instant.
        #expect(try await eventually(timeout: 10) { try outcome(.lease) == "held" })
        #expect(try outcome(.processScan) == "held")
        #expect(try await eventually(timeout: 10) { try outcome(.lease) == "held" }, "a released lease can be taken again")
        #expect(try ExclusiveFile.open(path + ".missing", writable: false).isMissing)
    }

    /// A file open for a moment only (`serve`'s on-access thread holding a file a program just
    /// read until it handled the event, an indexer) does not stop an eviction: the lease is
    /// asked for again for about 0.15 s. An eviction right after a program read the file
    /// failed now and then under load ("a program has it open").
    @Test func aFileOpenForAMomentIsLeasedOnceItIsClosed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-lease-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("file").path
        try bytes(4096, seed: 6).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        // Closed 20 ms from now, on a thread of its own, while the lease is being asked for.
        let closer = Thread {
            usleep(20_000)
            close(fd)
        }
        closer.start()
        let outcome = try await offThePool { () throws(FileProviderError) -> String in
            switch try ExclusiveFile.open(path, writable: true) {
            case .held(let file):
                file.release()
                return "held"
            case .inUse(let why): return why
            case .missing: return "missing"
            }
        }
        #expect(outcome == "held")
    }

    @Test func usesAreWrittenInBatchesAndResolvedFromPaths() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "dir/a", data: Data("a".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            let recorder = f.manager.useRecorder
            let id = controller.domainID
            let late = Self.base.addingTimeInterval(100)
            recorder.used(domainID: id, path: "dir/a", at: late)
            recorder.used(domainID: id, path: "dir/a", at: Self.base)
            recorder.used(domainID: id, path: "no/such/file", at: late)
            recorder.used(domainID: id, path: "dir", at: late)
            recorder.used(domainID: id, identifier: "other", at: Self.base)
            await recorder.flush()
            #expect(try f.manager.store.lastUse(domainID: id, identifier: "dir/a") == late)
            #expect(try f.manager.store.lastUse(domainID: id, identifier: "other") == Self.base)
            #expect(try f.manager.store.lastUse(domainID: id, identifier: "dir") == nil, "folders are not used")
            // Without a flush, the timer writes within about a second.
            let now = Date()
            recorder.used(domainID: id, identifier: "timed", at: now)
            let written = await eventually(timeout: 10) {
                guard let use = try? f.manager.store.lastUse(domainID: id, identifier: "timed") else { return false }
                return abs(use.timeIntervalSince(now)) < 0.001
            }
            #expect(written)
            // A materialize is a use.
            #expect(codes(await controller.materialize(paths: ["dir/a"], recursive: false)) == [nil])
            await recorder.flush()
            #expect(try #require(try f.manager.store.lastUse(domainID: id, identifier: "dir/a")) > late)
        }
    }

    @Test func sizesAreBinaryAndBadOnesAreExplained() throws {
        #expect(try ByteCount.parse("20G") == 20 << 30)
        #expect(try ByteCount.parse("512m") == 512 << 20)
        #expect(try ByteCount.parse("1.5K") == 1536)
        #expect(try ByteCount.parse("4096") == 4096)
        #expect(try ByteCount.parse("4096B") == 4096)
        #expect(try ByteCount.parse("20 GiB") == 20 << 30)
        #expect(try ByteCount.parse("2T") == 2 << 40)
        #expect(try ByteCount.parseOrNone("none") == nil)
        #expect(try ByteCount.parseOrNone("1M") == 1 << 20)
        for bad in ["", "G", "-1G", "20GB", "20X", "9000P", "1.5", "1..5G"] {
            do {
                _ = try ByteCount.parse(bad)
                Issue.record("\(bad.debugDescription) was taken")
            } catch {
                #expect(error.code == .invalidArgument)
                #expect(error.message.contains("binary units"), "\(error.message)")
            }
        }
        #expect(ByteCount.format(21_300 << 20) == "20.8 GiB")
    }
}

extension ExclusiveFile.Outcome {
    var isMissing: Bool {
        if case .missing = self { return true }
        return false
    }
}
