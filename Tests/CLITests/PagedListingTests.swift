import Foundation
import ProviderCore
import Testing

@testable import ProviderStore

/// `ls -R` and `dump` print as they read, a page of the subtree at a time
/// (`FILEPROVIDERCTL_PAGE` records; 4,096 unless set): the output is the same bytes whatever the
/// page size, every item once, in path order, and items beside the folder that sort around its
/// subtree ("-" and "." come before "/") are not in it.
@Suite struct PagedListingTests {
    static let inside = ["a/f0", "a/f1", "a/x/g0", "a/x/g1", "a/x/g2", "a/x/deep/h0", "a/x/deep/h1", "a/y/i0", "a/y/more/k", "a/z"]
    static let outside = ["a-b/j", "a.c/k", "b/l"]

    @Test func listingAndDumpAreTheSameWhateverThePageSize() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let src = temp.url.appendingPathComponent("src")
        for path in Self.inside + Self.outside { try temp.write("src/" + path, Data(path.utf8)) }
        try FileManager.default.createDirectory(at: src.appendingPathComponent("e"), withIntermediateDirectories: true)
        try await cli.addLocalDomain("d", root: src)
        #expect(try await cli.run(["sync"]).status == 0)

        let commands: [[String]] = [
            ["ls", "-R", "d:/a"], ["ls", "-R", "d:/a", "--json"], ["ls", "-R", "d:/"], ["ls", "-R", "d:/", "--json"], ["dump", "d"],
            ["ls", "-R", "d:/e", "--json"], ["ls", "d:/a", "--json"], ["ls", "d:/a/z", "--json"],
        ]
        for command in commands {
            let whole = try await cli.run(command)
            #expect(whole.status == 0, "\(command): \(whole.stderr)")
            for page in ["1", "3"] {
                let paged = try await cli.run(command, environment: ["FILEPROVIDERCTL_PAGE": page])
                #expect(paged.status == 0, "\(command): \(paged.stderr)")
                #expect(paged.stdout == whole.stdout, "\(command) in pages of \(page)")
            }
        }
        let below = Set(
            Self.inside.flatMap { path in
                let parts = path.split(separator: "/")
                return (2...parts.count).map { "/" + parts[..<$0].joined(separator: "/") }
            })
        let paged = try await cli.run(["ls", "-R", "d:/a", "--json"], environment: ["FILEPROVIDERCTL_PAGE": "3"])
        let items = try JSONSerialization.jsonObject(with: Data(paged.stdout.utf8)) as? [[String: Any]] ?? []
        let paths = items.compactMap { $0["path"] as? String }
        #expect(paths == below.sorted())
        let text = try await cli.run(["ls", "-R", "d:/a"], environment: ["FILEPROVIDERCTL_PAGE": "3"])
        #expect(text.stdout.split(separator: "\n").count == below.count)
        #expect(try await cli.run(["ls", "-R", "d:/e", "--json"]).stdout == "[]\n")

        let dump = try await cli.run(["dump", "d"], environment: ["FILEPROVIDERCTL_PAGE": "2"])
        let dumped = (try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [[String: Any]] ?? []).compactMap {
            $0["path"] as? String
        }
        #expect(dumped.first == "/")
        #expect(dumped == dumped.sorted() && Set(dumped).count == dumped.count)
        #expect(Set(dumped).isSuperset(of: below) && dumped.contains("/a-b/j") && dumped.contains("/a.c/k") && dumped.contains("/e"))
    }
    /// The bytes present of partly fetched files are read per page, not for the whole domain:
    /// a damaged range row elsewhere in the domain (its sizes add up beyond 2^63, so SQLite's
    /// `SUM` fails) does not stop a listing of `a`, in pages of any size.
    @Test func partlyFetchedFilesAreReadWithEachPage() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        for path in Self.inside + Self.outside { try temp.write("src/" + path, Data(path.utf8)) }
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"))
        #expect(try await cli.run(["sync"]).status == 0)
        let store = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        let id = try #require(try store.domains().first { $0.name == "d" }?.id)
        let partial = ["a/f0", "a/x/g1", "a/y/more/k"]
        for path in partial {
            let record = try #require(try store.item(domainID: id, path: path))
            try store.addPresentRange(0..<2, domainID: id, identifier: record.identifier, contentVersion: record.contentVersion)
        }
        let broken = try #require(try store.item(domainID: id, path: "b/l"))
        try store.write { db in
            try db.execute(
                sql: """
                    INSERT INTO presentRange (domainID, identifier, contentVersion, start, "end")
                    VALUES (?, ?, ?, 0, 9223372036854775807), (?, ?, ?, 1, 9223372036854775807)
                    """,
                arguments: [id, broken.identifier.rawValue, broken.contentVersion, id, broken.identifier.rawValue, broken.contentVersion])
        }
        for page in ["1", "3", "4096"] {
            let text = try await cli.run(["ls", "-R", "d:/a"], environment: ["FILEPROVIDERCTL_PAGE": page])
            #expect(text.status == 0, "\(text.stderr)")
            let shown = text.stdout.split(separator: "\n").filter { $0.hasPrefix("partial ") }
            #expect(shown.count == 3, "pages of \(page): \(text.stdout)")
            #expect(shown.first?.hasPrefix("partial 50%") == true && shown.first?.hasSuffix(" f0") == true, "\(shown)")
            let json = try await cli.run(["ls", "-R", "d:/a", "--json"], environment: ["FILEPROVIDERCTL_PAGE": page])
            #expect(json.status == 0, "\(json.stderr)")
            let items = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]] ?? []
            var present: [String: Int] = [:]
            for item in items { if let bytes = item["presentBytes"] as? Int { present[item["path"] as? String ?? ""] = bytes } }
            #expect(present == ["/a/f0": 2, "/a/x/g1": 2, "/a/y/more/k": 2], "pages of \(page)")
        }
    }
}
