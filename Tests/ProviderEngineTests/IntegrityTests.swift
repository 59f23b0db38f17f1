import Foundation
import LocalAdapter
import ProviderCore
import ProviderStore
import ProviderTesting
import SFTPAdapter
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// The SHA-256 of `data` by ProviderCore's own implementation (the engine hashes with
/// swift-crypto's: two implementations that must agree).
private func sha256(_ data: Data) -> String {
    var digest = SHA256Digest()
    data.withUnsafeBytes { digest.update($0) }
    return digest.finish()
}

/// Changes one byte of the file at `path` in place and puts its modification time back: the
/// size, date and inode stay, as after bit rot.
private func flipByte(atPath path: String, offset: Int64) throws {
    var before = stat()
    #expect(stat(path, &before) == 0)
    let fd = open(path, O_RDWR)
    #expect(fd >= 0)
    var byte: UInt8 = 0
    #expect(pread(fd, &byte, 1, off_t(offset)) == 1)
    byte ^= 0x20
    #expect(pwrite(fd, &byte, 1, off_t(offset)) == 1)
    close(fd)
    var times = [before.st_atim, before.st_mtim]
    #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    var after = stat()
    #expect(stat(path, &after) == 0)
    #expect(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec && after.st_size == before.st_size && after.st_ino == before.st_ino)
}

/// Content hashes end to end: computed while a download is written and an upload is read,
/// recorded with the item, kept across moves, used by `whereis`; `verify` tells bit rot from
/// an unsent edit, over a local store and over SFTP (a real sshd on loopback).
@Suite struct IntegrityTests {
    static let files: [String: Data] = [
        "a.txt": Data("alpha, the first file\n".utf8),
        "b.txt": Data("bravo, edited later\n".utf8),
        "docs/c.bin": Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }),
        "docs/d.txt": Data("delta\n".utf8),
    ]

    @Test func overALocalStore() async throws {
        try await StoreFolderFixture.with("hashes") { f in try await Self.hashesAndVerify(f) }
    }

    @Test(.enabled(if: SSHServer.isAvailable)) func overAnSFTPStore() async throws {
        let server = try await SSHServer.shared()
        try await StoreFolderFixture.with("hashes", sftp: server) { f in try await Self.hashesAndVerify(f) }
    }

    private static func hashesAndVerify(_ f: StoreFolderFixture) async throws {
        for (path, data) in files { try f.write(path, data) }
        let controller = try await f.addDomain()
        try await controller.sync()
        // Listed, not downloaded: nothing is hashed yet.
        #expect(try controller.record(at: "a.txt").sha256 == nil)
        let outcomes = await controller.materialize(paths: [""], recursive: true)
        #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.error))")
        for (path, data) in files {
            let record = try controller.record(at: path)
            #expect(record.sha256 == sha256(data), "\(path) was hashed as it was written")
            #expect(record.localSHA256 == sha256(data))
        }
        var report = try await f.manager.verify(ItemLocation(domain: "d", path: ""))
        #expect(report.files == files.count && report.verified == files.count && report.problems.isEmpty, "\(report)")

        // Bit rot in the replica (size, date and inode unchanged) and an edit not synced yet.
        try flipByte(atPath: controller.replica.path("docs/c.bin"), offset: 123_456)
        try Data("bravo, edited here\n".utf8).write(to: controller.replica.url("b.txt"))
        let progress = ProgressLog()
        report = try await f.manager.verify(ItemLocation(domain: "d", path: "")) { progress.add($0) }
        let kinds = Dictionary(uniqueKeysWithValues: report.problems.map { ($0.path, $0.kind) })
        #expect(kinds == ["docs/c.bin": .bitRot, "b.txt": .unsentEdit], "\(report.problems)")
        #expect(report.verified == 2 && report.foundDamage)
        let rot = try #require(report.problems.first { $0.kind == .bitRot })
        #expect(rot.recordedHash == "sha256:" + sha256(files["docs/c.bin"]!))
        let flipped = try Data(contentsOf: controller.replica.url("docs/c.bin"))
        #expect(rot.foundHash == "sha256:" + sha256(flipped))
        let steps = progress.all
        #expect(steps.last?.files == files.count && steps.last?.totalFiles == files.count, "\(steps)")
        #expect(steps.last?.bytes == steps.last?.totalBytes)
        // A scope: one folder.
        let scoped = try await f.manager.verify(ItemLocation(domain: "d", path: "docs"))
        #expect(scoped.files == 2 && scoped.problems.map(\.path) == ["docs/c.bin"])

        // The edit goes up: hashed as the backend read it.
        try await controller.sync()
        #expect(try controller.record(at: "b.txt").sha256 == sha256(Data("bravo, edited here\n".utf8)))
        // A rename keeps the hash (the same bytes).
        try FileManager.default.moveItem(at: controller.replica.url("a.txt"), to: controller.replica.url("docs/renamed a.txt"))
        try await controller.sync()
        #expect(try controller.record(at: "docs/renamed a.txt").sha256 == sha256(files["a.txt"]!))
        // The rotten file evicted and downloaded again: the store's bytes, verified.
        _ = await controller.evict(paths: ["docs/c.bin"], recursive: false)
        _ = await controller.materialize(paths: ["docs/c.bin"], recursive: false)
        report = try await f.manager.verify()
        #expect(report.problems.isEmpty && report.verified == files.count, "\(report)")

        // New contents in the store: the old hash no longer describes the item.
        try f.write("docs/d.txt", Data("delta, changed in the store\n".utf8))
        try await controller.sync()
        let changed = try controller.record(at: "docs/d.txt")
        #expect(changed.sha256 == nil || changed.sha256 == sha256(Data("delta, changed in the store\n".utf8)))
    }

    /// 20 MiB over SFTP come in 8 MiB ranges over two connections, out of order: the sink
    /// hashes them in file order all the same (checked against `sha256sum` of the store's file).
    @Test(.enabled(if: SSHServer.isAvailable)) func aRangedSFTPDownloadIsHashedInFileOrder() async throws {
        let server = try await SSHServer.shared()
        try await StoreFolderFixture.with("hashes", sftp: server) { f in
            let path = f.store.appendingPathComponent("big.bin").path
            let expected = try await offThePool { () throws -> String in
                var bytes = [UInt8](repeating: 0, count: (20 << 20) + 3)
                var state: UInt32 = 0x1234_5678
                for index in bytes.indices {
                    state = state &* 1_664_525 &+ 1_013_904_223
                    bytes[index] = UInt8(truncatingIfNeeded: state >> 24)
                }
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                let sum = try ChildProcess.capture("/usr/bin/sha256sum", [path])
                return String(String(decoding: sum.output, as: UTF8.self).prefix(64))
            }
            let controller = try await f.addDomain()
            try await controller.sync()
            let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.error))")
            let recorded = try controller.record(at: "big.bin").sha256
            #expect(expected.count == 64 && recorded == expected)
            #expect(try await Self.sha256sum(controller.replica.path("big.bin")) == expected, "the placed file's")
            let report = try await f.manager.verify()
            #expect(report.verified == 1 && report.problems.isEmpty, "\(report)")
        }
    }

    /// `sha256sum` of a file, run off the pool.
    static func sha256sum(_ path: String) async throws -> String {
        try await offThePool { () throws -> String in
            let sum = try ChildProcess.capture("/usr/bin/sha256sum", [path])
            return String(String(decoding: sum.output, as: UTF8.self).prefix(64))
        }
    }

    /// A 40 MiB file from a local store, more than the sink's queue holds (the copy runs ahead
    /// of the hashing thread and waits for it): the recorded hash is `sha256sum` of the file
    /// placed in the replica.
    @Test func aLargeLocalDownloadIsHashedOnItsOwnThread() async throws {
        try await StoreFolderFixture.with("hashes") { f in
            let path = f.store.appendingPathComponent("big.bin").path
            try await offThePool { try Data(ContentSinkTests.bytes((40 << 20) + 11, seed: 41)).write(to: URL(fileURLWithPath: path)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            let outcomes = await controller.materialize(paths: ["big.bin"], recursive: false)
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.error))")
            let expected = try await Self.sha256sum(controller.replica.path("big.bin"))
            let recorded = try controller.record(at: "big.bin").sha256
            #expect(expected.count == 64 && recorded == expected)
        }
    }

    /// A dataless file filled where it stands (the fill a program's read starts, 6 MiB in
    /// 1 MiB pieces from the memory store): the recorded hash is `sha256sum` of the filled file.
    @Test func aFillInPlaceIsHashed() async throws {
        try await Fixture.with { f in
            let contents = Data(ContentSinkTests.bytes((6 << 20) + 5, seed: 43))
            let file = try await DatalessLayoutTests.PartialFile(f, contents: contents)
            let filled = try await file.downloader.fillInPlace(file.record)
            let expected = try await Self.sha256sum(file.replica.path("a.bin"))
            #expect(expected.count == 64 && filled.sha256 == expected)
            #expect(try file.controller.record(at: "a.bin").sha256 == expected)
        }
    }

    /// Two domains on one store: once both downloaded a file, `whereis` and `dupes` compare it
    /// by the recorded hash, not by size only.
    @Test func whereisComparesByTheRecordedHash() async throws {
        try await StoreFolderFixture.with("hashes") { f in
            try f.write("x.bin", Data(repeating: 0x41, count: 1000))
            try f.write("y.bin", Data(repeating: 0x42, count: 1000))
            let one = try await f.addDomain("one")
            let two = try await f.addDomain("two")
            try await one.sync()
            try await two.sync()
            _ = await one.materialize(paths: ["x.bin", "y.bin"], recursive: false)
            _ = await two.materialize(paths: ["x.bin"], recursive: false)
            // two:/y.bin, never downloaded, is of the same size only; one:/y.bin has another hash.
            var copies = try await f.manager.whereis(ItemLocation(domain: "one", path: "x.bin"))
            #expect(copies.map(\.location) == ["one:/x.bin", "two:/x.bin", "two:/y.bin"], "\(copies)")
            #expect(copies.map(\.comparedBy) == [.contentHash, .contentHash, .size])
            var groups: [SameContent] = []
            try await f.manager.duplicates { page throws(FileProviderError) in groups += page }
            #expect(groups.map(\.comparedBy) == [.size], "two:/y.bin was never hashed: \(groups)")
            _ = await two.materialize(paths: ["y.bin"], recursive: false)
            copies = try await f.manager.whereis(ItemLocation(domain: "one", path: "x.bin"))
            #expect(copies.map(\.location) == ["one:/x.bin", "two:/x.bin"], "y.bin has another hash: \(copies)")
            groups = []
            try await f.manager.duplicates { page throws(FileProviderError) in groups += page }
            #expect(groups.count == 2 && groups.allSatisfy { $0.comparedBy == .contentHash && $0.files.count == 2 }, "\(groups)")
        }
    }
}

/// What `verify` reported as progress.
private final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var steps: [VerifyProgress] = []
    func add(_ step: VerifyProgress) { lock.withLock { steps.append(step) } }
    var all: [VerifyProgress] { lock.withLock { steps } }
}
