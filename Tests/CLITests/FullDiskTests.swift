import Foundation
import ProviderTesting
import Testing

/// `materialize` on a replica whose disk is too small for the domain: a small tmpfs.
@Suite struct FullDiskTests {
    @Test func materializeOnAFullDiskRefusesWhatDoesNotFitAndLeavesNoPartialFile() async throws {
        try await SmallFileSystem.with(size: 8 << 20) { disk in
            let temp = try TemporaryFolder()
            let cli = CLIRunner(in: temp)
            let size = 1536 << 10
            for index in 0..<6 {
                try temp.write("src/f\(index).bin", Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* (index + 3)) }))
            }
            let replica = disk.root.appendingPathComponent("replica")
            try await cli.addLocalDomain(
                "d", root: temp.url.appendingPathComponent("src"), options: ["--replica", replica.path], sync: true)
            let before = disk.available

            let result = try await cli.run(["materialize", "-R", "d:/", "--json"])
            #expect(result.status == 1, "\(result.stderr)")
            let outcomes = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
            let failed = outcomes.filter { $0["ok"] as? Bool == false }
            let done = outcomes.count - failed.count
            #expect(done >= 1 && !failed.isEmpty, "\(outcomes)")
            #expect(failed.allSatisfy { $0["code"] as? String == "fileWriteOutOfSpace" }, "\(failed)")
            // No partial file stays: what is used is what was downloaded.
            let staged =
                FileManager.default.enumerator(atPath: replica.appendingPathComponent(".fileprovider-staging").path)?
                .compactMap { $0 as? String }.filter { $0.hasSuffix(".part") } ?? []
            #expect(staged.isEmpty, "\(staged)")
            #expect(abs(before - disk.available - Int64(done * size)) <= 64 << 10)

            // The message says what is needed, what is free and what to free.
            let first = try #require(failed.first?["path"] as? String)
            let again = try await cli.run(["materialize", first])
            #expect(again.status == 1)
            #expect(
                again.stderr.hasPrefix("error: \(first): not enough space: the file needs 1.5 MiB; \(disk.root.path) has "),
                "\(again.stderr)")
            #expect(again.stderr.contains(" kept in reserve; free "), "\(again.stderr)")
            #expect(again.stderr.hasSuffix(" on \(disk.root.path) and try again\n"), "\(again.stderr)")

            // Space freed (the downloaded files evicted): the rest is downloaded.
            #expect(try await cli.run(["evict", "-R", "d:/"]).status == 0)
            let rest = try await cli.run(["materialize"] + failed.compactMap { $0["path"] as? String })
            #expect(rest.status == 0, "\(rest.stderr)")
            for path in failed.compactMap({ $0["path"] as? String }) {
                let name = String(path.dropFirst("d:/".count))
                let same =
                    try Data(contentsOf: replica.appendingPathComponent(name))
                    == Data(contentsOf: temp.url.appendingPathComponent("src/" + name))
                #expect(same, "\(name) differs from the store")
            }
        }
    }
}
