import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// Downloads interrupted after a checkpoint go on from their staging file.
@Suite struct StagedResumeTests {
    /// A 5 MiB file (large enough for a checkpoint), synced, whose first download failed.
    private func interruptedDownload(_ f: Fixture) async throws -> (DomainController, Data, TransferCheckpoint) {
        let data = Data((0..<(5 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 11) })
        _ = try f.memory.write(path: "big.bin", data: data)
        let controller = try await f.addDomain()
        _ = try await controller.sync()
        f.memory.setFailure(FileProviderError(.serverUnreachable, "down"), for: .fetchContents, times: 1)
        let failed = await controller.materialize(paths: ["big.bin"], recursive: false)
        #expect(failed.first?.error?.code == .serverUnreachable)
        let checkpoint = try #require(try f.manager.store.checkpoints(domainID: controller.domainID).values.first)
        return (controller, data, checkpoint)
    }

    /// What a killed transfer left: 1 MiB of bytes the store does not have, so the result shows
    /// whether the download went on from them or fetched everything again.
    private let staged = Data(repeating: 0xA5, count: 1 << 20)

    /// Checks the replica's file is the staged bytes followed by the rest of the store's.
    private func expectResumed(_ f: Fixture, _ controller: DomainController, _ data: Data) throws {
        let result = try Data(contentsOf: f.url(controller, "big.bin"))
        // Compared as a Bool: a failed comparison of two 5 MiB values would have the test
        // library diff them, for minutes.
        let resumed = result == staged + data.suffix(from: staged.count)
        #expect(resumed, "the download did not go on from the staged bytes (\(result.count) bytes)")
    }

    @Test func aDownloadResumesFromItsStagingFile() async throws {
        try await Fixture.with { f in
            let (controller, data, checkpoint) = try await interruptedDownload(f)
            #expect(checkpoint.stagingPath.hasPrefix(controller.replica.staging.path + "/"))
            try staged.write(to: URL(fileURLWithPath: checkpoint.stagingPath))
            let last = Mutex<(completed: Int64, resumed: Int64)?>(nil)
            let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false) { event in
                if case .transfer(let completed, _, _, _, let resumed) = event { last.withLock { $0 = (completed, resumed) } }
            }
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes)")
            try expectResumed(f, controller, data)
            #expect(controller.replica.stagedFiles().isEmpty)
            #expect(try f.manager.store.checkpoints(domainID: controller.domainID).isEmpty)
            // The staged megabyte counts as done, but as resumed: a progress rate leaves it out.
            let progress = last.withLock { $0 }
            #expect(progress?.completed == Int64(data.count))
            #expect(progress?.resumed == Int64(staged.count))
        }
    }

    @Test func aCheckpointFromTheFlatStagingFolderStillResumes() async throws {
        try await Fixture.with { f in
            let (controller, data, checkpoint) = try await interruptedDownload(f)
            // The layout before staging files were spread over folders: directly in `staging`.
            let flat = controller.replica.staging.path + "/" + Downloader.stagingName(for: "big.bin")
            try staged.write(to: URL(fileURLWithPath: flat))
            var old = checkpoint
            old.stagingPath = flat
            try f.manager.store.saveCheckpoint(old)
            let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes)")
            try expectResumed(f, controller, data)
            #expect(!FileManager.default.fileExists(atPath: flat))
            #expect(controller.replica.stagedFiles().isEmpty)
        }
    }

    /// The store's file changed (same size) after the checkpoint, before the sync that would
    /// record it: the resumed download asks for the version it began, the store says it is no
    /// longer there, and the partial file goes. Never the first part of one version and the
    /// rest of another under the file's name.
    @Test func aDownloadIsNotResumedIntoAnotherVersion() async throws {
        try await Fixture.with { f in
            let (controller, data, checkpoint) = try await interruptedDownload(f)
            try staged.write(to: URL(fileURLWithPath: checkpoint.stagingPath))
            let changed = Data(data.reversed())
            _ = try f.memory.write(path: "big.bin", data: changed)
            let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
            #expect(outcomes.first?.error?.code == .versionNoLongerAvailable, "\(outcomes)")
            #expect(!FileManager.default.fileExists(atPath: f.url(controller, "big.bin").path))
            #expect(controller.replica.stagedFiles().isEmpty, "the partial file of the old version goes")
            #expect(try f.manager.store.checkpoints(domainID: controller.domainID).isEmpty)
            // The next sync records the new version, and it downloads whole.
            _ = try await controller.sync()
            #expect(codes(await controller.materialize(paths: ["big.bin"], recursive: false)) == [nil])
            let result = try Data(contentsOf: f.url(controller, "big.bin"))
            let whole = result == changed
            #expect(whole, "the store's new version, whole")
        }
    }
}
