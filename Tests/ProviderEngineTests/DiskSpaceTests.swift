import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// Downloads on a full disk: each test mounts a small tmpfs as the replica (the state folder
/// stays on the usual disk, so staging files go to `<replica>/.fileprovider-staging` on the
/// tmpfs) and checks that a download that does not fit is refused with a clear message, and
/// that no partial file keeps the disk full.
@Suite("A full disk")
struct DiskSpaceTests {
    /// The relative path of an outcome's `mem:/path`.
    private func relative(_ outcome: ItemOutcome) -> String { String(outcome.path.dropFirst("mem:/".count)) }

    @Test func filesThatDoNotFitAreRefusedAndTheRestFollowsOnceSpaceIsFreed() async throws {
        try await SmallFileSystem.with(size: 8 << 20) { disk in
            try await Fixture.with { f in
                let size = 1536 << 10
                var files: [String: Data] = [:]
                for index in 0..<6 {
                    files["f\(index).bin"] = bytes(size, seed: UInt64(index))
                    _ = try f.memory.write(path: "f\(index).bin", data: files["f\(index).bin"]!)
                }
                let controller = try await f.addDomain(replica: disk.root.appendingPathComponent("replica").path)
                _ = try await controller.sync()
                #expect(controller.replica.staging.path.hasPrefix(disk.root.path + "/"))

                // What fits beside the reserve: the downloads run side by side, so only the
                // promises they make to each other keep them from all starting.
                let before = disk.available
                let kept = SpaceReserve.standard.bytes(ofFileSystemSize: Int64(disk.size))
                let fit = Int((before - kept) / Int64(size))
                #expect(fit >= 1 && fit < files.count, "\(fit) of \(files.count) files fit: the test would not show anything")

                let outcomes = await controller.materialize(paths: [""], recursive: true)
                let failed = outcomes.filter { $0.error != nil }
                #expect(outcomes.count - failed.count == fit, "\(outcomes.map { "\($0.path): \($0.error?.message ?? "ok")" })")
                for outcome in failed {
                    #expect(outcome.error?.code == .fileWriteOutOfSpace, "\(outcome.path): \(outcome.error?.message ?? "")")
                    let message = outcome.error?.message ?? ""
                    #expect(message.hasPrefix("not enough space: the file needs 1.5 MiB"), "\(message)")
                    #expect(message.contains("\(disk.root.path) has "), "\(message)")
                    #expect(message.contains("kept in reserve"), "\(message)")
                    #expect(message.hasSuffix("on \(disk.root.path) and try again"), "\(message)")
                }
                // No partial file eats the space: what is used is what was downloaded (less
                // the placeholders it replaced).
                #expect(controller.replica.stagedFiles().isEmpty)
                #expect(try f.manager.store.checkpoints(domainID: controller.domainID).isEmpty)
                let used = before - disk.available
                #expect(abs(used - Int64(fit * size)) <= 64 << 10, "\(used) bytes used for \(fit) files of \(size)")
                #expect(try controller.backoff() == nil, "a full local disk backed off the domain")

                // Free space (evict what was downloaded): the rest follows.
                let materialized = outcomes.filter { $0.error == nil }.map(relative)
                #expect(await controller.evict(paths: materialized, recursive: false).allSatisfy { $0.error == nil })
                let rest = await controller.materialize(paths: failed.map(relative), recursive: false)
                #expect(rest.count == failed.count && rest.allSatisfy { $0.error == nil }, "\(rest)")
                for path in failed.map(relative) {
                    let same = try Data(contentsOf: f.url(controller, path)) == files[path]
                    #expect(same, "\(path) differs from the store")
                }
                #expect(controller.replica.stagedFiles().isEmpty)
            }
        }
    }

    @Test func aFileLargerThanTheFreeSpaceIsRefusedBeforeAnyByteIsFetched() async throws {
        try await SmallFileSystem.with(size: 4 << 20) { disk in
            try await Fixture.with { f in
                _ = try f.memory.write(path: "big.bin", data: bytes(6 << 20, seed: 1))
                let controller = try await f.addDomain(replica: disk.root.appendingPathComponent("replica").path)
                _ = try await controller.sync()
                let before = disk.available
                let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
                let error = try #require(outcomes.first?.error)
                #expect(error.code == .fileWriteOutOfSpace)
                #expect(error.message.hasPrefix("not enough space: the file needs 6 MiB; \(disk.root.path) has "), "\(error.message)")
                // 6 MiB plus the reserve, less what is free: what the message asks to free.
                let kept = SpaceReserve.standard.bytes(ofFileSystemSize: Int64(disk.size))
                let toFree = FileSystemSpace.format((6 << 20) + kept - before, roundingUp: true)
                #expect(error.message.hasSuffix("; free \(toFree) on \(disk.root.path) and try again"), "\(error.message)")
                #expect(f.memory.callCount(.fetchContents) == 0, "the store was asked for the file")
                #expect(controller.replica.stagedFiles().isEmpty)
                #expect(disk.available >= before - (16 << 10))
                #expect(try controller.record(at: "big.bin").state == .placeholder)
            }
        }
    }

    /// A store that lets the disk fill up (another program writes) while a download runs: the
    /// memory backend reports the failed write as `localIOFailure`, as an adapter that does not
    /// know `fileWriteOutOfSpace` would; the engine still recognises the full disk.
    @Test func aDiskThatFillsUpDuringADownloadGetsThePartialFileBack() async throws {
        try await SmallFileSystem.with(size: 8 << 20) { disk in
            try await Fixture.with { f in
                let data = bytes(5 << 20, seed: 2)
                _ = try f.memory.write(path: "a.bin", data: data)
                let controller = try await f.addDomain(replica: disk.root.appendingPathComponent("replica").path)
                _ = try await controller.sync()
                let filled = Mutex<URL?>(nil)
                f.memory.setHook(for: .fetchContents) { _ in
                    // Leaves 2 MiB: the download writes that much and then gets ENOSPC.
                    let filler = try? disk.fill(leaving: 2 << 20)
                    filled.withLock { $0 = filler }
                }
                let outcomes = await controller.materialize(paths: ["a.bin"], recursive: false)
                f.memory.setHook(for: .fetchContents, nil)
                let filler = try #require(filled.withLock { $0 })
                let error = try #require(outcomes.first?.error)
                #expect(error.code == .fileWriteOutOfSpace, "\(error.code.name): \(error.message)")
                #expect(
                    error.message.hasPrefix("not enough space: the download ran out of space on \(disk.root.path) ("), "\(error.message)")
                #expect(error.message.contains("the file needs 5 MiB (its partial download of "), "\(error.message)")
                #expect(error.message.contains(" was deleted to give the space back)"), "\(error.message)")
                #expect(controller.replica.stagedFiles().isEmpty, "the partial file stayed")
                #expect(try f.manager.store.checkpoints(domainID: controller.domainID).isEmpty)
                #expect(disk.available >= 2 << 20 - (64 << 10), "\(disk.available) bytes free")

                // The space comes back: the next attempt downloads the file.
                try FileManager.default.removeItem(at: filler)
                let again = await controller.materialize(paths: ["a.bin"], recursive: false)
                #expect(again.allSatisfy { $0.error == nil }, "\(again)")
                let same = try Data(contentsOf: f.url(controller, "a.bin")) == data
                #expect(same)
            }
        }
    }

    /// A partial file stays for a resume only while the disk keeps the reserve free beside it.
    @Test(arguments: [false, true])
    func aPartialFileStaysOnlyWhileTheReserveIsFree(reserveTaken: Bool) async throws {
        try await SmallFileSystem.with(size: 16 << 20) { disk in
            // With `reserveTaken` the reserve is the whole disk: keeping the file would eat it.
            try await Fixture.with(spaceReserve: .fixed(reserveTaken ? 16 << 20 : 1 << 20)) { f in
                let data = bytes(5 << 20, seed: 3)
                _ = try f.memory.write(path: "big.bin", data: data)
                let controller = try await f.addDomain(replica: disk.root.appendingPathComponent("replica").path)
                _ = try await controller.sync()
                // A first download that got 1 MiB (a checkpoint and its staging file), then one
                // the adapter stops with a full disk (a quota: the file system is not full).
                let staging = controller.replica.stagingPath(named: Downloader.stagingName(for: "big.bin"))
                try controller.replica.prepareStagingFile(atPath: staging, truncate: true)
                try data.prefix(1 << 20).write(to: URL(fileURLWithPath: staging))
                try f.manager.store.saveCheckpoint(
                    TransferCheckpoint(
                        domainID: controller.domainID, identifier: "big.bin",
                        contentVersion: try controller.record(at: "big.bin").contentVersion,
                        stagingPath: staging, bytesTransferred: 1 << 20, totalBytes: 5 << 20))
                if reserveTaken {
                    // The download is refused up front: its partial file holds reserved space.
                    let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
                    let error = try #require(outcomes.first?.error)
                    #expect(error.code == .fileWriteOutOfSpace)
                    #expect(
                        error.message.contains("(its partial download of 1 MiB was deleted to give the space back)"), "\(error.message)")
                    #expect(f.memory.callCount(.fetchContents) == 0)
                    #expect(!FileManager.default.fileExists(atPath: staging))
                    #expect(try f.manager.store.checkpoints(domainID: controller.domainID).isEmpty)
                    return
                }
                f.memory.setFailure(FileProviderError(.fileWriteOutOfSpace, "write: Disk quota exceeded"), for: .fetchContents, times: 1)
                let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
                let error = try #require(outcomes.first?.error)
                #expect(error.code == .fileWriteOutOfSpace)
                #expect(error.message.contains("needs 4 MiB more (its partial download of 1 MiB stays to be resumed)"), "\(error.message)")
                // The file system had room: the message says a limit of another kind stopped it.
                #expect(
                    error.message.hasSuffix(
                        ", which is enough: a disk quota or another limit stopped the write; raise or free it and try again"),
                    "\(error.message)")
                #expect(FileManager.default.fileExists(atPath: staging))
                #expect(try f.manager.store.checkpoints(domainID: controller.domainID).count == 1)
                let again = await controller.materialize(paths: ["big.bin"], recursive: false)
                #expect(again.allSatisfy { $0.error == nil }, "\(again)")
                let same = try Data(contentsOf: f.url(controller, "big.bin")) == data
                #expect(same)
            }
        }
    }

    @Test func aBatchGetsTicketsForTheFilesThatFitBesideThePromisesAlreadyMade() throws {
        try SmallFileSystemSync.with(size: 8 << 20) { disk in
            let reservations = SpaceReservations(reserve: .standard)
            let folder = disk.root.path
            let size: Int64 = 512 << 10
            let kept = SpaceReserve.standard.bytes(ofFileSystemSize: Int64(disk.size))
            let fit = Int((disk.available - kept) / size)
            #expect(fit >= 2 && fit < 20, "\(fit) files fit: the test would not show anything")
            // One batch: the files that fit beside each other get tickets, the rest are refused.
            let files = (0..<20).map { (size: size, stagingFile: folder + "/f\($0).part") }
            let first = reservations.reserve(files, folder: folder)
            let tickets = first.compactMap { try? $0.get() }
            #expect(tickets.count == fit)
            #expect(first.prefix(fit).allSatisfy { (try? $0.get()) != nil })
            for result in first.dropFirst(fit) {
                if case .failure(let error) = result { #expect(error.code == .fileWriteOutOfSpace) } else { Issue.record("\(result)") }
            }
            // A second batch counts the first one's promises; once they are given back, it fits.
            #expect(reservations.reserve([files[0]], folder: folder).allSatisfy { (try? $0.get()) == nil })
            for ticket in tickets { reservations.release(ticket) }
            let again = reservations.reserve(Array(files.prefix(fit)), folder: folder)
            #expect(again.allSatisfy { (try? $0.get()) != nil })
        }
    }

    @Test func theReserveIsOnePercentBetween64MiBAnd2GiBAndAtMostATenth() {
        let reserve = SpaceReserve.standard
        #expect(reserve.bytes(ofFileSystemSize: 8 << 20) == (8 << 20) / 10)
        #expect(reserve.bytes(ofFileSystemSize: 1 << 30) == 64 << 20)
        #expect(reserve.bytes(ofFileSystemSize: 100 << 30) == (100 << 30) / 100)
        #expect(reserve.bytes(ofFileSystemSize: 4 << 40) == 2 << 30)
        #expect(SpaceReserve.fixed(5).bytes(ofFileSystemSize: 1 << 40) == 5)
        // A full local disk is not the store's quota: the domain goes on.
        #expect(FileProviderError.Code.fileWriteOutOfSpace.reaction != .backOffDomain)
    }

    @Test func amountsAreShownInBinaryUnits() {
        #expect(FileSystemSpace.format(100) == "100 bytes")
        #expect(FileSystemSpace.format(1536 << 10) == "1.5 MiB")
        #expect(FileSystemSpace.format(300 << 20) == "300 MiB")
        #expect(FileSystemSpace.format((1 << 30) + (1 << 29) / 5) == "1.1 GiB")
        #expect(FileSystemSpace.format((300 << 20) + 1, roundingUp: true) == "301 MiB")
        #expect(FileSystemSpace.format((1 << 20) + 1, roundingUp: true) == "1.1 MiB")
    }
}

/// ``SmallFileSystem/with(size:_:)`` for a body that does not suspend.
private enum SmallFileSystemSync {
    static func with(size: Int, _ body: (SmallFileSystem) throws -> Void) throws {
        let fileSystem = try SmallFileSystem(size: size)
        defer { fileSystem.unmount() }
        try body(fileSystem)
    }
}
