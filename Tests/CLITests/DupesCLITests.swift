import Foundation
import ProviderTesting
import Testing

/// `dupes` and `whereis` over two domains holding some of the same files under other names:
/// by size while nothing is hashed (and said so), by hash once hashes are recorded.
@Suite("CLI dupes and whereis")
struct DupesCLITests {
    static let hashX = "sha256:" + String(repeating: "ab", count: 32)
    static let hashY = "sha256:" + String(repeating: "cd", count: 32)

    @Test func sameContentsAcrossTwoDomains() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let files: [(String, String, UInt8, Int)] = [
            ("a", "x.bin", 0x41, 100), ("a", "same size, other bytes.bin", 0x42, 100), ("a", "unique.bin", 0x43, 50),
            ("a", "empty", 0, 0), ("b", "copy of x.bin", 0x41, 100), ("b", "dir/-other name\n.bin", 0x43, 50), ("b", "empty too", 0, 0),
            ("b", "alone.bin", 0x44, 77),
        ]
        for (domain, path, byte, size) in files {
            try temp.write("\(domain)-store/\(path)", Data(repeating: byte, count: size))
        }
        for domain in ["a", "b"] {
            try await cli.addLocalDomain(domain, root: temp.url.appendingPathComponent("\(domain)-store"), sync: true)
        }
        // Nothing hashed: every group is by size only, the empty files left out.
        let bySize = try #require(try await cli.json(["dupes", "--json"]) as? [[String: Any]])
        #expect(bySize.map { $0["size"] as? Int } == [50, 100])
        #expect(bySize.allSatisfy { $0["comparedBy"] as? String == "size" })
        #expect(Self.locations(bySize[0]) == ["a:/unique.bin", "b:/dir/-other name\n.bin"])
        #expect(Self.locations(bySize[1]) == ["a:/same size, other bytes.bin", "a:/x.bin", "b:/copy of x.bin"])
        let text = try await cli.run(["dupes"])
        #expect(text.status == 0 && text.stdout.hasPrefix("# 2 files, 50 B (50 bytes), same size only\na:/unique.bin\n"), "\(text.stdout)")
        let maybe = try await cli.run(["whereis", "a:/unique.bin"])
        #expect(maybe.stdout == "a:/unique.bin  (this file)\nb:/dir/-other name\n.bin  (same size only)\n", "\(maybe.stdout)")

        // Hashes recorded (as downloads and uploads record them): x and its copy share one.
        let database = temp.url.appendingPathComponent("home/metadata.sqlite").path
        let update = try await offThePool {
            try ChildProcess.capture(
                "/usr/bin/sqlite3",
                [
                    database,
                    "UPDATE item SET contentHash = '\(Self.hashX)' WHERE path IN ('x.bin', 'copy of x.bin'); UPDATE item SET contentHash = '\(Self.hashY)' WHERE path = 'same size, other bytes.bin';",
                ])
        }
        #expect(update.ending == .exited(0), "\(String(decoding: update.errorOutput, as: UTF8.self))")
        let byHash = try #require(try await cli.json(["dupes", "--json"]) as? [[String: Any]])
        // A page of one size at a time gives the same groups.
        let paged = try await cli.run(["dupes"], environment: ["FILEPROVIDERCTL_PAGE": "1"])
        #expect(
            paged.stdout == (try await cli.run(["dupes"])).stdout && paged.stdout.contains("same hash \(Self.hashX)"), "\(paged.stdout)")
        #expect(byHash.map { $0["comparedBy"] as? String } == ["size", "contentHash"])
        #expect(Self.locations(byHash[1]) == ["a:/x.bin", "b:/copy of x.bin"])
        #expect(byHash[1]["contentHash"] as? String == Self.hashX)
        let whereis = try #require(try await cli.json(["whereis", "b:/copy of x.bin", "--json"]) as? [[String: Any]])
        #expect(whereis.map { $0["location"] as? String } == ["b:/copy of x.bin", "a:/x.bin"])
        #expect(whereis.map { $0["comparedBy"] as? String } == ["contentHash", "contentHash"])
        let found = try await cli.run(["find", "--hash", String(Self.hashX.dropFirst(7)).uppercased(), "-print0"])
        #expect(Set(found.stdout.split(separator: "\0").map(String.init)) == ["a:/x.bin", "b:/copy of x.bin"], "\(found.stderr)")
        let alone = try await cli.run(["whereis", "b:/alone.bin"])
        #expect(alone.stdout == "b:/alone.bin  (this file)\n")
        let folder = try await cli.run(["whereis", "b:/dir"])
        #expect(folder.status == 2 && folder.stderr.contains("whereis takes a file"), "\(folder.stderr)")
        let missing = try await cli.run(["whereis", "b:/nothing"])
        #expect(missing.status == 1 && missing.stderr.contains("no item at"), "\(missing.stderr)")
    }

    static func locations(_ group: [String: Any]) -> [String] {
        ((group["files"] as? [[String: Any]]) ?? []).compactMap { $0["location"] as? String }
    }
}
