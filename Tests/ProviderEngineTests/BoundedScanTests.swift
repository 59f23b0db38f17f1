import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

/// The local scan holds at most so many changes of each kind (``ScanFindings/defaultLimit``);
/// a replica with more is sent in several passes of one sync, and what a partial scan cannot
/// decide (a deletion that may be a move to a path it let go of) waits for a scan that can.
/// Here the limit is 5.
@Suite("Local scan with more changes than it holds")
struct BoundedScanTests {
    static let limit = 5

    static func write(_ data: Data, _ controller: DomainController, _ path: String) throws {
        let url = controller.replica.url(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }

    static func data(_ index: Int) -> Data { Data("file \(index)\n".utf8) }

    @Test func moreNewFilesThanAScanHoldsAreAllSentByOneSync() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            controller.syncUp.scanLimit.withLock { $0 = Self.limit }
            for index in 0..<23 { try Self.write(Self.data(index), controller, "new/f\(index).txt") }
            let report = try await controller.sync(settleSeconds: 0)
            #expect(report.uploaded == 24, "the folder and 23 files: \(report.notices)")
            for index in 0..<23 { #expect(f.memory.contents(of: "new/f\(index).txt") == Self.data(index)) }
            let again = try await controller.sync(settleSeconds: 0)
            #expect(again.uploaded == 0 && again.notices.isEmpty, "\(again.notices)")
            #expect(f.memory.callCount(.createItem) == 24)
        }
    }

    /// More missing items than the scan holds, a few of them moved: the deletions it can decide
    /// go first, the new paths wait, so every move is still recognised as one (sent as a move,
    /// not as a new file and a deletion).
    @Test func movesAmongMoreDeletionsThanAScanHoldsStayMoves() async throws {
        try await Fixture.with { f in
            for index in 0..<14 { _ = try f.memory.write(path: "a/f\(index).txt", data: Self.data(index)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            _ = await controller.materialize(paths: ["a"], recursive: true)
            controller.syncUp.scanLimit.withLock { $0 = Self.limit }
            let moved = [2, 7, 13]
            for index in 0..<14 {
                let from = controller.replica.url("a/f\(index).txt").path
                if moved.contains(index) {
                    #expect(rename(from, controller.replica.url("f\(index)-moved.txt").path) == 0)
                } else {
                    #expect(unlink(from) == 0)
                }
            }
            let report = try await controller.sync(settleSeconds: 0)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(f.memory.callCount(.createItem) == 0, "no move became a new file")
            for index in 0..<14 {
                #expect(f.memory.contents(of: "a/f\(index).txt") == nil)
                #expect(f.memory.contents(of: "f\(index)-moved.txt") == (moved.contains(index) ? Self.data(index) : nil))
            }
            let again = try await controller.sync(settleSeconds: 0)
            #expect(again.uploaded == 0 && again.deleted == 0 && again.notices.isEmpty, "\(again.notices)")
        }
    }

    /// Placeholders (the store holds the only copy of their contents) moved into a new folder,
    /// more of them than the scan holds: a missing item whose placeholder the scan let go of may
    /// have moved there, so no missing item is sent as a deletion until a scan holds them all;
    /// every file ends up moved with its contents.
    @Test func placeholdersMovedBeyondTheLimitAreNeverDeleted() async throws {
        try await Fixture.with { f in
            for index in 0..<12 { _ = try f.memory.write(path: "p\(index).txt", data: Self.data(index)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            controller.syncUp.scanLimit.withLock { $0 = Self.limit }
            try FileManager.default.createDirectory(at: controller.replica.url("moved"), withIntermediateDirectories: false)
            for index in 0..<12 {
                let name = "p\(index).txt" + Replica.placeholderSuffix
                #expect(rename(controller.replica.url(name).path, controller.replica.url("moved/" + name).path) == 0)
            }
            let report = try await controller.sync(settleSeconds: 0)
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(f.memory.callCount(.deleteItem) == 0, "nothing was deleted")
            for index in 0..<12 {
                #expect(f.memory.contents(of: "moved/p\(index).txt") == Self.data(index))
                #expect(f.memory.contents(of: "p\(index).txt") == nil)
            }
        }
    }

    /// The findings themselves: past the limit a kind keeps nothing more and says so.
    @Test func findingsKeepAtMostTheLimitOfEachKind() {
        var findings = ScanFindings(limit: 3)
        let print = FileFingerprint(size: 1, modificationNanos: 1, inode: 1, isRegularFile: true, isDirectory: false)
        for index in 0..<10 { findings.addCreated("n\(index)", LocalScanner.Entry(fingerprint: print, kind: .file)) }
        #expect(findings.created.count == 3)
        #expect(findings.overflowed == [.created])
        #expect(!findings.holdsEveryDestination)
    }
}
