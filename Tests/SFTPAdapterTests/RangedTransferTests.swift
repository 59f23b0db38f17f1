import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Large files go in ranges over several connections (the kit's `RangeSchedule`, tested in
/// AdapterKitTests): downloads and uploads against the shared sshd.
@Suite("SFTP ranged transfers")
struct RangedTransferTests {
    /// Bytes that differ at every offset, so a range written at the wrong place shows.
    static func pattern(_ count: Int, seed: UInt32 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: (UInt32(truncatingIfNeeded: $0) &+ seed) &* 2_654_435_761 >> 13) })
    }

    @Test func connectionsPerTransferFollowTheProcessorsAndWhereTheServerIs() async throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let local = try TestServer.backend(try await TestServer.shared(), extra: ["connections": "64"])
        // The settings (a loopback address) are known once a connection resolved them.
        _ = try await local.item(for: .rootContainer)
        #expect(local.connectionsPerTransfer() == max(2, cores / 2))
        await local.close()
        var settings = try #require(local.resolvedSettings)
        settings.host = "files.example.com"
        let remote = try SFTPBackend(settings: settings, connections: 64)
        #expect(remote.connectionsPerTransfer() == max(2, cores))
        let few = try SFTPBackend(settings: settings, connections: 2)
        #expect(few.connectionsPerTransfer() == 2)
        let one = try SFTPBackend(settings: settings, connections: 1)
        #expect(one.connectionsPerTransfer() == 1)
    }

    @Test func aLargeDownloadIsByteIdenticalAndReportsItsPrefix() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let size = Int(SFTPBackend.rangedTransferThreshold) * 2 + 12_345
        let data = Self.pattern(size)
        try data.write(to: URL(fileURLWithPath: root + "/big.bin"))
        let backend = try TestServer.backend(server, root: root, streamsPerTransfer: 3)
        let staging = try TestServer.scratch().appendingPathComponent("big.bin.staging")
        _ = FileManager.default.createFile(atPath: staging.path, contents: nil)
        // At every report, the prefix recorded for a resume is never past the reported one.
        let seen = Recorder<Int64>()
        let path = staging.path
        let item = try await backend.fetchContents(
            for: "big.bin", version: nil, to: staging, offset: 0,
            progress: { done, _ in
                let recorded = PrefixRecord.recorded(atPath: path) ?? -1
                seen.add(recorded >= 0 && recorded <= done ? done : -done)
            })
        #expect(item.size == Int64(size))
        #expect(try Data(contentsOf: staging) == data)
        let reports = seen.values
        #expect(reports.allSatisfy { $0 >= 0 }, "recorded past the reported prefix, or not at all: \(reports.filter { $0 < 0 })")
        #expect(reports == reports.sorted())
        #expect(reports.last == Int64(size))
        #expect(PrefixRecord.recorded(atPath: path) == nil, "the finished file keeps the record")
        await backend.close()
    }

    @Test func aResumeAfterAKillStartsAtTheRecordedPrefix() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let size = Int(SFTPBackend.rangedTransferThreshold) * 2 + 7
        let data = Self.pattern(size, seed: 9)
        try data.write(to: URL(fileURLWithPath: root + "/big.bin"))
        let backend = try TestServer.backend(server, root: root, streamsPerTransfer: 3)
        // What a killed ranged download leaves: a verified prefix, then a gap and a range
        // written ahead of it; the file's size is past the prefix.
        let staging = try TestServer.scratch().appendingPathComponent("big.bin.staging")
        let prefix = Int(SFTPBackend.rangeSize) + 100
        var partial = data.prefix(prefix)
        partial.append(Data(count: Int(SFTPBackend.rangeSize)))
        partial.append(data[partial.count..<(partial.count + 5000)])
        try partial.write(to: staging)
        let file = try LocalFile.openDestination(staging.path, keeping: Int64(partial.count))
        #expect(file.recordPrefix(Int64(prefix)))
        let first = Recorder<Int64>()
        _ = try await backend.fetchContents(
            for: "big.bin", version: nil, to: staging, offset: Int64(partial.count),
            progress: { done, _ in first.add(done) })
        #expect(first.values.first == Int64(prefix))
        #expect(try Data(contentsOf: staging) == data)
        // The same when what is left is too small for ranges (the single-connection path).
        var nearlyDone = data.prefix(size - 5000)
        nearlyDone.append(Data(repeating: 0xff, count: 4000))
        try nearlyDone.write(to: staging)
        let small = try LocalFile.openDestination(staging.path, keeping: Int64(nearlyDone.count))
        #expect(small.recordPrefix(Int64(size - 5000)))
        _ = try await backend.fetchContents(
            for: "big.bin", version: nil, to: staging, offset: Int64(nearlyDone.count), progress: nil)
        #expect(try Data(contentsOf: staging) == data)
        #expect(PrefixRecord.recorded(atPath: staging.path) == nil)
        await backend.close()
    }

    @Test func aDownloadWithOneConnectionStillWorks() async throws {
        let server = try await TestServer.shared()
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
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let backend = try TestServer.backend(server, root: root, streamsPerTransfer: 3)
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
