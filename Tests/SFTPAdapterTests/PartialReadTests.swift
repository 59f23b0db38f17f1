import Foundation
import ProviderCore
import ProviderTesting
import Synchronization
import Testing

@testable import SFTPAdapter

/// What the SFTP backend does for ranged reads beyond the conformance suite: the file it keeps
/// open between reads of one file, closed once idle, and never used for another version.
@Suite("SFTP ranged reads")
struct PartialReadTests {
    /// The handles the backend's (only) connection keeps open for ranged reads, on every
    /// channel.
    static func keptHandles(_ backend: SFTPBackend) async throws -> [ReadHandle] {
        try await backend.withConnection { connection throws(FileProviderError) -> [ReadHandle] in
            connection.openChannels.flatMap(\.readHandles.handles)
        }
    }

    static func bytes(_ count: Int, seed: UInt32) -> Data {
        var state = seed
        return Data(
            (0..<count).map { _ in
                state = state &* 1_664_525 &+ 1_013_904_223
                return UInt8(truncatingIfNeeded: state >> 24)
            })
    }

    /// `count` bytes repeating a block of 1,000,003 (a prime: a piece written at a wrong offset
    /// shows), quick to make.
    static func large(_ count: Int, seed: UInt32) -> Data {
        let block = bytes(1_000_003, seed: seed)
        var data = Data(capacity: count)
        while data.count < count { data.append(block.prefix(count - data.count)) }
        return data
    }

    /// Two files `a.bin` and `b.bin` of the same `count` bytes in `folder`, a backend over one
    /// connection that keeps a read file open for `idleTime` nanoseconds, and a destination of
    /// `count` zero bytes.
    static func twoFiles(
        _ count: Int, in folder: String, of server: SSHServer, idleTime: UInt64
    ) throws -> (contents: Data, backend: SFTPBackend, destination: URL) {
        let contents = bytes(count, seed: 1)
        try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent("a.bin"))
        try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent("b.bin"))
        let backend = try TestServer.backend(server, root: folder, extra: ["connections": "1"], readHandleIdleTime: idleTime)
        let destination = try TestServer.scratch().appendingPathComponent("d")
        try Data(count: count).write(to: destination)
        return (contents, backend, destination)
    }

    @Test func oneHandleServesTheReadsOfAFile() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // An idle time no machine's load reaches between two reads (an hour): the handle is kept.
        let (contents, backend, destination) = try Self.twoFiles(300_000, in: folder, of: server, idleTime: 3_600_000_000_000)

        let a = try await backend.item(for: "a.bin")
        let b = try await backend.item(for: "b.bin")
        _ = try await backend.fetchPartialContents(for: a.identifier, version: a.version, range: 0..<1000, into: destination)
        let first = try await Self.keptHandles(backend)
        #expect(first.map(\.remote).map { $0.hasSuffix("/a.bin") } == [true])
        _ = try await backend.fetchPartialContents(
            for: a.identifier, version: a.version, range: 100_000..<200_000, into: destination)
        _ = try await backend.fetchPartialContents(for: b.identifier, version: b.version, range: 0..<10, into: destination)
        let second = try await Self.keptHandles(backend)
        // The same handle (the server's handle string) served the second read of a.bin.
        #expect(second.count == 2)
        #expect(second.first?.file.handle == first.first?.file.handle)
        #expect(try Data(contentsOf: destination)[100_000..<200_000] == contents[100_000..<200_000])
        await backend.close()
    }

    /// A read large enough to share its ranges (16 MiB and more) lends the pool's free
    /// connections; one still opening its connection when the read has no range left for it is
    /// not waited for (a sequential reader waited about 0.3 s for the handshakes of one that
    /// never helped). Here the helper's connection cannot open while a gate file exists (its
    /// ProxyCommand waits for it to go; the timeout is 600 s): the read returns with every byte
    /// while the gate is still there.
    @Test func aReadDoesNotWaitForAHelperStillConnecting() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let contents = Self.large(32 << 20, seed: 5)
        try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent("big.bin"))
        let gate = try TestServer.scratch().appendingPathComponent("gate").path
        let marker = "fpk-self-\(UUID().uuidString.prefix(8))"
        let config = try SSHResolutionTests.configFile()
        let text =
            SSHResolutionTests.hostBlock(marker, server, "IdentityAgent none")
            + SSHResolutionTests.hostBlock(
                "fpk-gated", server, "IdentityAgent none",
                "ProxyCommand sh -c 'while [ -e \(gate) ]; do sleep 0.05; done; exec ssh -F \(config.path) -o BatchMode=yes -W %h:%p \(marker)'"
            )
        try Data(text.utf8).write(to: config)
        let backend = try SSHResolutionTests.backend("fpk-gated", config: config, root: folder, extra: ["timeout": "600"])
        let item = try await backend.item(for: ItemIdentifier("big.bin"))
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        let destination = try TestServer.scratch().appendingPathComponent("big.bin")
        try Data(count: contents.count).write(to: destination)
        let done = Flag()
        let reader = Task {
            defer { done.set() }
            return try await backend.fetchPartialContents(
                for: item.identifier, version: item.version, range: 0..<Int64(contents.count), into: destination)
        }
        let returned = await eventually(timeout: 60) { done.isSet }
        #expect(returned, "the read waited for a helper that never helped")
        try FileManager.default.removeItem(atPath: gate)
        _ = try await reader.value
        #expect(try Data(contentsOf: destination) == contents)
        await backend.close()
    }

    /// A flag set once, read from any thread.
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    /// The descriptors of this process open on `path`.
    static func descriptors(on path: String) -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { name -> Int32? in
            guard let fd = Int32(name), let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)
            else { return nil }
            return target == path ? fd : nil
        }
    }

    /// A ranged read shared with helper connections leaves the engine's file closed when it
    /// returns. The helpers' tasks held it and let go of it a moment later: a descriptor open for
    /// writing that made the engine's completion of the file fail (its read lease is refused
    /// while anything writes), so `tar`, whose open waited for the whole file, read it while it
    /// was completed and said "file changed as we read it".
    @Test func aRangedReadSharedWithHelpersLeavesTheFileClosedWhenItReturns() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let size = Int(SFTPBackend.rangedTransferThreshold) + Int(SFTPBackend.rangeSize) * 2
        let contents = Self.large(size, seed: 5)
        try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent("big.bin"))
        let backend = try TestServer.backend(server, root: folder, streamsPerTransfer: 4)
        let item = try await backend.item(for: "big.bin")
        for round in 0..<4 {
            let destination = try TestServer.scratch().appendingPathComponent("big-\(round)")
            try Data(count: size).write(to: destination)
            let read = try await backend.fetchPartialContents(
                for: item.identifier, version: item.version, range: 0..<Int64(size), into: destination)
            let open = Self.descriptors(on: destination.path)
            #expect(open.isEmpty, "round \(round): descriptors \(open) still open on the file")
            #expect(read.range == 0..<Int64(size))
            #expect(try Data(contentsOf: destination) == contents)
            try? FileManager.default.removeItem(at: destination)
        }
        await backend.close()
    }

    @Test func keptHandlesAreClosedOnceIdle() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (contents, backend, destination) = try Self.twoFiles(30_000, in: folder, of: server, idleTime: 200_000_000)
        for name in ["a.bin", "b.bin"] {
            let item = try await backend.item(for: ItemIdentifier(name))
            _ = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: 0..<1000, into: destination)
        }
        #expect(try Data(contentsOf: destination)[0..<1000] == contents[0..<1000])
        // Nothing reads any more: every kept handle is closed after the idle time.
        #expect(try await eventually(timeout: 40) { try await Self.keptHandles(backend).isEmpty })
        await backend.close()
    }

    /// A small read keeps its file on the second channel while the channel through `ssh` is
    /// not open; a large read then keeps its file on that channel. A sweep closes both (it
    /// looked only at the channel through `ssh` once that was open). The idle time is an hour,
    /// so nothing is swept before the test asks (a loaded machine took more than 3 s between
    /// the reads and the check), and the sweep is asked for a moment past it.
    @Test func keptHandlesOfBothChannelsAreClosedOnceIdle() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let large = Self.large(3 << 20, seed: 6)
        try large.write(to: URL(fileURLWithPath: folder).appendingPathComponent("large.bin"))
        let idleTime: UInt64 = 3_600_000_000_000
        let (contents, backend, destination) = try Self.twoFiles(30_000, in: folder, of: server, idleTime: idleTime)
        let small = try await backend.item(for: "a.bin")
        _ = try await backend.fetchPartialContents(for: small.identifier, version: small.version, range: 0..<1000, into: destination)
        let big = try await backend.item(for: "large.bin")
        let bigDestination = try TestServer.scratch().appendingPathComponent("large")
        try Data(count: large.count).write(to: bigDestination)
        _ = try await backend.fetchPartialContents(
            for: big.identifier, version: big.version, range: 0..<Int64(large.count), into: bigDestination)
        #expect(try Data(contentsOf: destination)[0..<1000] == contents[0..<1000])
        #expect(try Data(contentsOf: bigDestination) == large)
        let kept = try await backend.withConnection { connection throws(FileProviderError) -> [Bool] in
            connection.openChannels.map { !$0.readHandles.handles.isEmpty }
        }
        #expect(kept == [true, true], "a file kept on each channel (the second channel, the one through ssh)")
        backend.readHandleSweeper.sweep(now: DispatchTime.now().uptimeNanoseconds + idleTime + 1)
        #expect(try await eventually(timeout: 40) { try await Self.keptHandles(backend).isEmpty })
        await backend.close()
    }

    /// A range of 16 MiB or more goes in 8 MiB ranges over several connections.
    @Test func aLargeRangeIsReadOverSeveralConnections() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let contents = Self.large(40 << 20, seed: 4)
        try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent("large.bin"))
        let backend = try TestServer.backend(server, root: folder, streamsPerTransfer: 3)
        let destination = try TestServer.scratch().appendingPathComponent("d")
        let before = Self.large(41 << 20, seed: 5)
        try before.write(to: destination)
        let item = try await backend.item(for: "large.bin")
        let range: Range<Int64> = (1 << 20) + 17..<(37 << 20) + 3
        let result = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: range, into: destination)
        #expect(result.range == range)
        let after = try Data(contentsOf: destination)
        let bounds = Int(range.lowerBound)..<Int(range.upperBound)
        #expect(after[bounds] == contents[bounds])
        #expect(after[..<bounds.lowerBound] == before[..<bounds.lowerBound] && after[bounds.upperBound...] == before[bounds.upperBound...])
        // To the end of the file and past it, again over several connections (their kept files).
        let tail = try await backend.fetchPartialContents(
            for: item.identifier, version: item.version, range: (20 << 20)..<(50 << 20), into: destination)
        #expect(tail.range == (20 << 20)..<(40 << 20))
        #expect(try Data(contentsOf: destination)[(20 << 20)..<(40 << 20)] == contents[(20 << 20)...])
        await backend.close()
    }

    @Test func aKeptHandleIsNeverReadForAFileReplacedSinceOrAnotherVersion() async throws {
        let server = try await TestServer.shared()
        let folder = try server.makeFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let url = URL(fileURLWithPath: folder).appendingPathComponent("f.bin")
        let old = Self.bytes(100_000, seed: 2)
        try old.write(to: url)
        let backend = try TestServer.backend(server, root: folder, extra: ["connections": "1"])
        let destination = try TestServer.scratch().appendingPathComponent("d")
        try Data(count: 100_000).write(to: destination)
        let before = try await backend.item(for: "f.bin")
        _ = try await backend.fetchPartialContents(for: before.identifier, version: before.version, range: 0..<10, into: destination)
        #expect(try await Self.keptHandles(backend).count == 1)

        // Another writer renames a new file of the same size over it, a minute later.
        let new = Self.bytes(100_000, seed: 3)
        let staged = URL(fileURLWithPath: folder).appendingPathComponent(".new")
        try new.write(to: staged)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: before.contentModificationDate!.timeIntervalSince1970 + 60)],
            ofItemAtPath: staged.path)
        try FileManager.default.moveItem(at: staged, to: URL(fileURLWithPath: folder).appendingPathComponent("g.bin"))
        _ = rename(URL(fileURLWithPath: folder).appendingPathComponent("g.bin").path, url.path)

        let error = await #expect(throws: FileProviderError.self) {
            try await backend.fetchPartialContents(for: before.identifier, version: before.version, range: 10..<20, into: destination)
        }
        #expect(error?.code == .versionNoLongerAvailable)
        #expect(try await Self.keptHandles(backend).isEmpty, "the handle of the replaced file is closed")
        let after = try await backend.item(for: "f.bin")
        #expect(after.version.content != before.version.content)
        let result = try await backend.fetchPartialContents(
            for: after.identifier, version: after.version, range: 10..<50_000, into: destination)
        #expect(result.range == 10..<50_000)
        #expect(try Data(contentsOf: destination)[10..<50_000] == new[10..<50_000])
        // Asked for the old version again: the kept handle is of the new one, so it is not used.
        let stale = await #expect(throws: FileProviderError.self) {
            try await backend.fetchPartialContents(for: before.identifier, version: before.version, range: 0..<10, into: destination)
        }
        #expect(stale?.code == .versionNoLongerAvailable)
        await backend.close()
    }
}
