import Foundation
import ProviderCore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `verify` as a user runs it: clean after a download, then a flipped byte (bit rot) and an
/// edit no sync has seen, told apart in text and JSON, exit 1 for damage; `dupes` by hash once
/// files are downloaded.
@Suite("CLI verify")
struct VerifyCLITests {
    @Test func findsAFlippedByteAndAnUnsentEditAndSaysWhichIsWhich() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let first = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try temp.write("store/photo one.jpg", first)
        try temp.write("store/notes.txt", Data("notes\n".utf8))
        try temp.write("store/copy/photo again.jpg", first)
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("store"), sync: true)
        let materialized = try await cli.run(["materialize", "-R", "d:/"])
        #expect(materialized.status == 0, "\(materialized.stderr)")

        let clean = try await cli.run(["verify", "d"])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(
            clean.stdout.hasPrefix("3 downloaded files (")
                && clean.stdout.hasSuffix(": 3 verified, 0 not hashed before, 0 damaged, 0 unsent edits\n"), "\(clean.stdout)")
        // The two copies are the same contents by their recorded hashes.
        let dupes = try #require(try await cli.json(["dupes"]) as? [[String: Any]])
        var digest = SHA256Digest()
        first.withUnsafeBytes { digest.update($0) }
        let hash = "sha256:" + digest.finish()
        #expect(
            dupes.count == 1 && dupes.first?["comparedBy"] as? String == "contentHash" && dupes.first?["contentHash"] as? String == hash,
            "\(dupes)")

        // Bit rot: one byte, with size, date and inode kept.
        let photo = cli.home.appendingPathComponent("domains/d/photo one.jpg").path
        var info = stat()
        #expect(stat(photo, &info) == 0, "the replica is at \(photo)")
        let fd = open(photo, O_RDWR)
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, 4_096) == 1)
        byte = ~byte
        #expect(pwrite(fd, &byte, 1, 4_096) == 1)
        close(fd)
        var times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, photo, &times, 0) == 0)
        // An edit no sync has seen.
        try Data("notes, edited\n".utf8).write(to: cli.home.appendingPathComponent("domains/d/notes.txt"))

        let found = try await cli.run(["verify", "d", "--no-progress"])
        #expect(found.status == 1)
        let lines = found.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines.contains { $0.hasPrefix("bit-rot  d:/photo one.jpg  the bytes changed though size and modification time did not") },
            "\(found.stdout)")
        #expect(lines.contains { $0.hasPrefix("unsent-edit  d:/notes.txt  changed here") }, "\(found.stdout)")
        #expect(lines.last?.hasSuffix(": 1 verified, 0 not hashed before, 1 damaged, 1 unsent edit") == true, "\(found.stdout)")

        let reported = try await cli.run(["verify", "--json"])
        #expect(reported.status == 1)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(reported.stdout.utf8)) as? [String: Any])
        #expect(json["files"] as? Int == 3 && json["verified"] as? Int == 1)
        let problems = try #require(json["problems"] as? [[String: Any]])
        let kinds = Dictionary(
            uniqueKeysWithValues: problems.compactMap { p in (p["location"] as? String).map { ($0, p["kind"] as? String ?? "") } })
        #expect(kinds == ["d:/photo one.jpg": "bit-rot", "d:/notes.txt": "unsent-edit"], "\(problems)")
        let rot = try #require(problems.first { $0["kind"] as? String == "bit-rot" })
        #expect(rot["recordedHash"] as? String == hash)
        #expect((rot["foundHash"] as? String).map { $0 != hash && $0.hasPrefix("sha256:") } == true)

        // A scope: the folder holds only the intact copy; an unknown path is refused.
        let folder = try await cli.run(["verify", "d:/copy"])
        #expect(folder.status == 0 && folder.stdout.hasPrefix("1 downloaded file ("), "\(folder.stdout)\(folder.stderr)")
        let missing = try await cli.run(["verify", "d:/nothing"])
        #expect(missing.status == 1 && missing.stderr.contains("no item at"), "\(missing.stderr)")
        let unknown = try await cli.run(["verify", "nodomain"])
        #expect(unknown.status != 0, "\(unknown.stdout)")
    }

    /// The benchmarks' switch (`FILEPROVIDER_NO_CONTENT_HASH=1`, Docs/Performance.md) turns
    /// hashing off for that process only: its download has no hash, the next one has.
    @Test func theBenchmarksSwitchDownloadsWithoutAHash() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        try temp.write("store/a.bin", Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("store"), sync: true)

        let off = try await cli.run(["materialize", "d:/a.bin"], environment: ["FILEPROVIDER_NO_CONTENT_HASH": "1"])
        #expect(off.status == 0, "\(off.stderr)")
        let unhashed = try #require(try await cli.json(["verify", "d", "--json"]) as? [String: Any])
        #expect(unhashed["unhashed"] as? Int == 1 && unhashed["verified"] as? Int == 0, "\(unhashed)")

        #expect(try await cli.run(["evict", "d:/a.bin"]).status == 0)
        let on = try await cli.run(["materialize", "d:/a.bin"])
        #expect(on.status == 0, "\(on.stderr)")
        let hashed = try #require(try await cli.json(["verify", "d", "--json"]) as? [String: Any])
        #expect(hashed["unhashed"] as? Int == 0 && hashed["verified"] as? Int == 1, "\(hashed)")
    }
}
