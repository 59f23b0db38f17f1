import Foundation
import ProviderCore
import ProviderEngine
import ProviderService
import ProviderStore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// serve uploads a file as soon as its writer closed it (or an editor renamed it into place),
/// without waiting for the settle time; a file still open for writing waits.
@Suite struct FinishedWritesTests {
    @Test func serveUploadsAClosedFileWithoutWaitingForTheSettleTime() async throws {
        try await Fixture.with { f in
            try await f.addDomain()
            let manager = try ProviderManager(home: f.home, registry: TestRemote.registry)
            // A settle time far longer than the test may take.
            let server = quietServer(manager, "mem", ServeOptions(pollInterval: 3600, settleSeconds: 600, debounceSeconds: 0.05))
            let running = Task { try await server.run() }
            #expect(try await eventually { try manager.domain(named: "mem").lastSyncAt != nil })
            let replica = URL(fileURLWithPath: try manager.domain(named: "mem").replicaPath)

            // Still open for writing: seen, not uploaded.
            let open = replica.appendingPathComponent("open.txt")
            // Made by the open that writes it: a file made and closed first is finished, and a
            // sync between the close and the next open would rightly send it.
            let descriptor = Glibc.open(open.path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
            try #require(descriptor >= 0)
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            try handle.write(contentsOf: Data("first half, ".utf8))
            // A file closed after that write goes up; the sync that sent it scanned after the
            // write, and left the open file alone.
            try Data("marker".utf8).write(to: replica.appendingPathComponent("marker.txt"))
            #expect(await eventually(timeout: 20) { f.memory.contents(of: "marker.txt") != nil }, "a closed file was not uploaded")
            #expect(f.memory.contents(of: "open.txt") == nil, "a file still being written was uploaded")

            // Closed: uploaded at once, whole.
            try handle.write(contentsOf: Data("second half".utf8))
            try handle.close()
            #expect(await eventually(timeout: 20) { f.memory.contents(of: "open.txt") == Data("first half, second half".utf8) })

            // Saved the way editors do: written to a temporary name, renamed into place.
            let temporary = replica.appendingPathComponent(".doc.txt.swp")
            try Data("saved by an editor".utf8).write(to: temporary)
            #expect(rename(temporary.path, replica.appendingPathComponent("doc.txt").path) == 0)
            #expect(await eventually(timeout: 20) { f.memory.contents(of: "doc.txt") == Data("saved by an editor".utf8) })

            server.stop()
            try await running.value
            await manager.close()
        }
    }
}
