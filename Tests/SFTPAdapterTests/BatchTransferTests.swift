import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Small files in pipelined round trips: a batch download (``PipelinedFetch``) and a new
/// file's write, dates, look and close in one round trip, against the test sshd.
@Suite("SFTP batch transfers")
struct BatchTransferTests {
    /// The bytes of a file: a pattern that differs from file to file.
    private static func bytes(_ count: Int, seed: Int) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &* 7) })
    }

    @Test func batchesGetEveryFilesOwnOutcome() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let outside = try server.makeFolder("outside")
        let manager = FileManager.default
        for folder in ["a", "b", "b/c"] { try manager.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true) }
        // Files in three folders, an empty one, and one of three reads and a bit (128 KiB reads).
        var expected: [(name: String, data: Data?, error: FileProviderError.Code?)] = []
        for index in 0..<30 {
            let name = ["a", "b", "b/c"][index % 3] + "/f\(index)"
            let data = Self.bytes(index == 0 ? 0 : index == 1 ? 3 * 131_072 + 17 : 100 + index * 37, seed: index)
            try data.write(to: URL(fileURLWithPath: root + "/" + name))
            expected.append((name, data, nil))
        }
        // What cannot be fetched, each failing alone.
        try manager.createSymbolicLink(atPath: root + "/linked", withDestinationPath: outside)
        try Data("outside".utf8).write(to: URL(fileURLWithPath: outside + "/secret"))
        expected.append(("linked/secret", nil, .noSuchItem))
        expected.append(("a/missing", nil, .noSuchItem))
        expected.append(("b/c", nil, .invalidArgument))
        try manager.createSymbolicLink(atPath: root + "/a/link", withDestinationPath: root + "/a/f0")
        expected.append(("a/link", nil, .invalidArgument))
        #expect(mkfifo(root + "/a/fifo", 0o644) == 0)
        expected.append(("a/fifo", nil, .noSuchItem))
        expected.append(("missing/f", nil, .noSuchItem))
        // One connection: every batch and the requests after it share the channel.
        let backend = try TestServer.backend(server, root: root, extra: ["connections": "1"])
        let stale = try await backend.item(for: "a/f3")
        let changed = Self.bytes(999, seed: 99)
        try changed.write(to: URL(fileURLWithPath: root + "/a/f3"))
        expected[3].data = changed
        let scratch = try TestServer.scratch()
        for round in 0..<2 {
            let destinations = expected.indices.map { scratch.appendingPathComponent("r\(round)-\($0)") }
            var requests = zip(expected, destinations).map {
                ContentRequest(identifier: ItemIdentifier($0.0.name), destination: $0.1)
            }
            // A version that is no longer there.
            requests.append(
                ContentRequest(identifier: "a/f3", version: stale.version, destination: scratch.appendingPathComponent("stale")))
            let results = await backend.fetchContents(requests, progress: nil)
            #expect(results.count == requests.count)
            for (index, result) in results.enumerated() {
                let wanted: (name: String, data: Data?, error: FileProviderError.Code?) =
                    index < expected.count ? expected[index] : ("a/f3", nil, .versionNoLongerAvailable)
                switch result {
                case .success(let item):
                    #expect(item.identifier.rawValue == wanted.name)
                    #expect(wanted.data != nil, "\(wanted.name) was fetched")
                    #expect(try Data(contentsOf: requests[index].destination) == wanted.data, "\(wanted.name)")
                    #expect(item.size == Int64(wanted.data?.count ?? -1))
                case .failure(let error):
                    #expect(error.code == wanted.error, "\(wanted.name): \(error)")
                }
            }
            // The channel is clean: a listing afterwards gets its own replies.
            #expect(try await backend.enumerateAllItems(in: "b/c").count == 10)
        }
        // Nothing outside the root was read.
        #expect((try? Data(contentsOf: scratch.appendingPathComponent("r0-30"))) != Data("outside".utf8))
        await backend.close()
    }

    @Test func newSmallFilesTakeTheirDatesAndLeaveNoStagingFile() async throws {
        let server = try await TestServer.shared()
        let root = try server.makeFolder()
        let backend = try TestServer.backend(server, root: root)
        let scratch = try TestServer.scratch()
        let date = Date(timeIntervalSince1970: 1_600_000_000)
        for (index, size) in [0, 1, 4096, 252 * 1024, 252 * 1024 + 1].enumerated() {
            let data = Self.bytes(size, seed: index)
            let local = scratch.appendingPathComponent("l\(index)")
            try data.write(to: local)
            let created = try await backend.createItem(
                basedOn: Item.template(
                    identifier: "t", parent: .rootContainer, filename: "n\(index)", kind: .file, size: Int64(size),
                    contentModificationDate: date),
                fields: [.contents, .contentModificationDate], contents: local, options: [])
            #expect(created.item.size == Int64(size))
            #expect(created.item.contentModificationDate == date)
            #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/n\(index)")) == data)
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/n\(index)")
            #expect(attributes[.modificationDate] as? Date == date)
            #expect(try await backend.item(for: created.item.identifier).version == created.item.version)
            // The name is taken now: a second creation is a collision and leaves nothing behind.
            do {
                _ = try await backend.createItem(
                    basedOn: Item.template(identifier: "u", parent: .rootContainer, filename: "n\(index)", kind: .file),
                    fields: [.contents], contents: local, options: [])
                Issue.record("n\(index) was created twice")
            } catch {
                #expect(error.code == .filenameCollision, "\(error)")
            }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".fileprovider-staging-") }
        #expect(left.isEmpty, "\(left)")
        await backend.close()
    }
}
