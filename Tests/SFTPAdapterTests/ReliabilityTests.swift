import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Servers that go away: each test has its own sshd, which it stops and starts again.
@Suite("SFTP reliability")
struct ReliabilityTests {
    /// Stops the server once a download passed a threshold.
    final class Killer: @unchecked Sendable {
        let server: SSHServer
        let threshold: Int64
        private let lock = NSLock()
        private var done = false

        init(server: SSHServer, threshold: Int64) {
            self.server = server
            self.threshold = threshold
        }

        func progress(_ completed: Int64) {
            let fire = lock.withLock { () -> Bool in
                if done || completed < threshold { return false }
                done = true
                return true
            }
            if fire { server.stop() }
        }

        var fired: Bool { lock.withLock { done } }
    }

    @Test func serverKilledMidDownloadThenResumedByteIdentical() async throws {
        try await SSHServer.withStarted { server in
            let root = try server.makeFolder()
            let data = Data((0..<(48 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) })
            try data.write(to: URL(fileURLWithPath: root + "/big.bin"))
            // Three connections read ranges: the server dies with ranges finished out of order.
            let backend = try TestServer.backend(server, root: root, streamsPerTransfer: 3)
            let staging = try TestServer.scratch().appendingPathComponent("big.bin.staging")
            _ = FileManager.default.createFile(atPath: staging.path, contents: nil)
            let killer = Killer(server: server, threshold: 8 << 20)
            do {
                _ = try await backend.fetchContents(
                    for: "big.bin", version: nil, to: staging, offset: 0, progress: { done, _ in killer.progress(done) })
                Issue.record("the download finished although the server was killed")
            } catch let error as FileProviderError {
                #expect(error.code == .serverUnreachable, "\(error.code.name): \(error.message)")
                #expect(!error.message.isEmpty)
            } catch {
                Issue.record("not a FileProviderError: \(error)")
            }
            #expect(killer.fired)
            let partial = try Data(contentsOf: staging)
            #expect(partial.count >= 8 << 20 && partial.count < data.count, "\(partial.count) bytes were written")
            #expect(partial == data.prefix(partial.count), "the partial download is not a prefix")
            // Nothing listens now: a clear serverUnreachable, quickly.
            await #expect(throws: FileProviderError.self) {
                _ = try await backend.fetchContents(for: "big.bin", version: nil, to: staging, offset: Int64(partial.count), progress: nil)
            }
            #expect(try Data(contentsOf: staging) == partial, "a failed connection attempt touched the staging file")
            // Back up: resume from what the first attempt left and get the identical file.
            try await server.restarted()
            try partial.write(to: staging)
            let item = try await backend.fetchContents(
                for: "big.bin", version: nil, to: staging, offset: Int64(partial.count), progress: nil)
            #expect(item.size == Int64(data.count))
            let result = try Data(contentsOf: staging)
            #expect(result.count == data.count)
            #expect(result == data, "the resumed download differs")
            await backend.close()
        }
    }

    @Test func droppedConnectionsAreReopened() async throws {
        try await SSHServer.withStarted { server in
            let backend = try TestServer.backend(server)
            let scratch = try TestServer.scratch()
            let contents = scratch.appendingPathComponent("a")
            try Data("before".utf8).write(to: contents)
            _ = try await backend.createItem(
                basedOn: Item.template(identifier: "t1", parent: .rootContainer, filename: "a.txt", kind: .file),
                fields: [.contents], contents: contents, options: [])
            // The server drops every connection; the pooled one is dead but the backend does not know.
            try await server.restarted()
            let item = try await backend.item(for: "a.txt")
            #expect(item.size == 6)
            let listed = try await backend.enumerateAllItems(in: .rootContainer)
            #expect(listed.map(\.filename) == ["a.txt"])
            // Again for a write: the first call of the operation finds the connection dead and the
            // operation runs again on a new one.
            try await server.restarted()
            try Data("after!!".utf8).write(to: contents)
            let modified = try await backend.modifyItem(
                item, baseVersion: item.version, changedFields: [.contents], contents: contents, options: [])
            #expect(modified.item.size == 7)
            await backend.close()
        }
    }
}
