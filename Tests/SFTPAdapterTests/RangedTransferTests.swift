import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Values appended from several threads.
final class Recorded<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [T] = []
    func append(_ value: T) { lock.withLock { list.append(value) } }
    var values: [T] { lock.withLock { list } }
}

/// Large files go in ranges over several connections: the schedule on its own, then downloads
/// and uploads against the shared sshd.
@Suite("SFTP ranged transfers")
struct RangedTransferTests {
    /// Bytes that differ at every offset, so a range written at the wrong place shows.
    static func pattern(_ count: Int, seed: UInt32 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: (UInt32(truncatingIfNeeded: $0) &+ seed) &* 2_654_435_761 >> 13) })
    }

    /// Runs `body` on a thread of its own (it blocks) and waits for it without blocking.
    static func onThread(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                body()
                continuation.resume()
            }.start()
        }
    }

    @Test func rangesAreHandedOutInOrderAndCoverTheTransfer() {
        let schedule = RangeSchedule(from: 5, to: 30, rangeSize: 10)
        var ranges: [Range<Int64>] = []
        while let range = schedule.take() { ranges.append(range) }
        #expect(ranges == [5..<15, 15..<25, 25..<30])
        #expect(RangeSchedule(from: 7, to: 7, rangeSize: 10).take() == nil)
    }

    @Test func aRangeIsWrittenOnlyAfterTheOnesBeforeIt() async {
        let schedule = RangeSchedule(from: 0, to: 20, rangeSize: 10)
        let first = schedule.take()!
        let second = schedule.take()!
        let order = Recorded<Int64>()
        let secondIsWaiting = DispatchSemaphore(value: 0)
        // The second range is ready first: it must wait until the first one is written.
        async let later: Void = Self.onThread {
            secondIsWaiting.signal()
            #expect(schedule.waitForTurn(second))
            order.append(second.lowerBound)
            schedule.wrote(second)
        }
        await Self.onThread {
            secondIsWaiting.wait()
            #expect(schedule.waitForTurn(first))
            order.append(first.lowerBound)
            schedule.wrote(first)
        }
        await later
        #expect(order.values == [0, 10])
        #expect(schedule.writtenPrefix == 20)
        #expect(schedule.error == nil)
    }

    @Test func aFailureWakesTheWaitersAndStopsTheHandOut() async {
        let schedule = RangeSchedule(from: 0, to: 40, rangeSize: 10)
        _ = schedule.take()
        let second = schedule.take()!
        async let waiter: Bool = withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: schedule.waitForTurn(second)) }.start()
        }
        schedule.fail(FileProviderError(.serverUnreachable, "gone"))
        schedule.fail(FileProviderError(.cancelled, "later errors are not kept"))
        #expect(await waiter == false)
        #expect(schedule.take() == nil)
        #expect(schedule.error?.code == .serverUnreachable)
        #expect(schedule.writtenPrefix == 0)
    }

    @Test func aLargeDownloadIsByteIdenticalAndOnDiskAlwaysAPrefix() async throws {
        let server = try TestServer.shared()
        let root = try server.makeFolder()
        let size = Int(SFTPBackend.rangedTransferThreshold) * 2 + 12_345
        let data = Self.pattern(size)
        try data.write(to: URL(fileURLWithPath: root + "/big.bin"))
        let backend = try TestServer.backend(server, root: root)
        let staging = try TestServer.scratch().appendingPathComponent("big.bin.staging")
        _ = FileManager.default.createFile(atPath: staging.path, contents: nil)
        // At every progress report, the file holds exactly the bytes reported: no gap, nothing
        // beyond (what the engine resumes from after a kill).
        let seen = Recorded<Int64>()
        let path = staging.path
        let item = try await backend.fetchContents(
            for: "big.bin", version: nil, to: staging, offset: 0,
            progress: { done, _ in
                let onDisk = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? -1
                seen.append(done == onDisk ? done : -done)
            })
        #expect(item.size == Int64(size))
        #expect(try Data(contentsOf: staging) == data)
        let reports = seen.values
        #expect(reports.allSatisfy { $0 >= 0 }, "a report did not match the file's size: \(reports.filter { $0 < 0 })")
        #expect(reports == reports.sorted())
        #expect(reports.last == Int64(size))
        // Resuming from the middle of a range writes only what is missing.
        let cut = Int(SFTPBackend.rangeSize) + 777
        try data.prefix(cut).write(to: staging)
        _ = try await backend.fetchContents(for: "big.bin", version: nil, to: staging, offset: Int64(cut), progress: nil)
        #expect(try Data(contentsOf: staging) == data)
        await backend.close()
    }

    @Test func aDownloadWithOneConnectionStillWorks() async throws {
        let server = try TestServer.shared()
        let root = try server.makeFolder()
        let data = Self.pattern(Int(SFTPBackend.rangedTransferThreshold) + 5, seed: 3)
        try data.write(to: URL(fileURLWithPath: root + "/big.bin"))
        let backend = try TestServer.backend(server, root: root, extra: ["connections": "1"])
        let staging = try TestServer.scratch().appendingPathComponent("x")
        _ = FileManager.default.createFile(atPath: staging.path, contents: nil)
        _ = try await backend.fetchContents(for: "big.bin", version: nil, to: staging, offset: 0, progress: nil)
        #expect(try Data(contentsOf: staging) == data)
        await backend.close()
    }

    @Test func largeUploadsAreByteIdenticalAndLeaveNoStagingFile() async throws {
        let server = try TestServer.shared()
        let root = try server.makeFolder()
        let backend = try TestServer.backend(server, root: root)
        let scratch = try TestServer.scratch()
        let contents = scratch.appendingPathComponent("up")
        let first = Self.pattern(Int(SFTPBackend.rangedTransferThreshold) * 2 + 999, seed: 1)
        try first.write(to: contents)
        let created = try await backend.createItem(
            basedOn: Item.template(identifier: "t", parent: .rootContainer, filename: "big.bin", kind: .file),
            fields: [.contents], contents: contents, options: [])
        #expect(created.item.size == Int64(first.count))
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/big.bin")) == first)
        #expect(try await backend.item(for: "big.bin").version == created.item.version)
        // A new version of another size, checked against the base version before the rename.
        let second = Self.pattern(Int(SFTPBackend.rangedTransferThreshold) + 4321, seed: 2)
        try second.write(to: contents)
        let modified = try await backend.modifyItem(
            created.item, baseVersion: created.item.version, changedFields: [.contents], contents: contents, options: [])
        #expect(modified.item.size == Int64(second.count))
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/big.bin")) == second)
        await #expect(throws: FileProviderError.self) {
            _ = try await backend.modifyItem(
                created.item, baseVersion: created.item.version, changedFields: [.contents], contents: contents,
                options: [])
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["big.bin"])
        await backend.close()
    }
}
