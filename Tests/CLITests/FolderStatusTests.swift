import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `user.fileprovider.status` on folders through a FUSE mount, read with `getfattr` (the real
/// program) while a folder goes from never listed (`dataless`) to written (`downloaded`),
/// pinned (`pinned`, inherited by its subfolders) and unpinned again; the root and
/// `user.fileprovider.domain` too. The FUSE mount runs in the second `swift test` process
/// (Makefile).
@Suite("Folder status attributes", .serialized, .timeLimit(.minutes(5)))
struct FolderStatusTests {
    /// `getfattr -n NAME --only-values PATH`, or `nil` when it fails.
    static func attribute(_ name: String, of path: String) async throws -> String? {
        let run = try await runProgram(["getfattr", "-n", name, "--only-values", path])
        return run.succeeded ? String(decoding: run.output, as: UTF8.self) : nil
    }

    @Test func aFolderSaysWhetherItIsWrittenOrPinnedThroughItsTransitions() async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let files = ["top.txt": Data("top".utf8), "sub/a.txt": Data("alpha".utf8), "sub/deeper/b.txt": Data("bravo".utf8)]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store, backend: "local", options: ["root": store], files: files, layout: .fuse)
        try await domain.startServe()
        let sub = domain.replica + "/sub"
        let status = "user.fileprovider.status"

        #expect(try await Self.attribute(status, of: domain.replica) == "downloaded")
        #expect(try await Self.attribute("user.fileprovider.domain", of: sub) == "d")
        // Never listed: its items are not written.
        let first = try #require(try await domain.cli.json(["ls", "d:/"]) as? [[String: Any]])
        let wasDataless = first.first { ($0["path"] as? String) == "/sub" }?["dataless"] as? Bool
        #expect(wasDataless == true, "\(first)")
        #expect(try await Self.attribute(status, of: sub) == "dataless")
        #expect(try await Self.attribute(status, of: sub + "/deeper") == "dataless")
        // A file keeps its own status.
        #expect(try await Self.attribute(status, of: domain.replica + "/top.txt") == "dataless")

        // Written: populated.
        let populated = try await domain.cli.run(["populate", "d:/sub"])
        #expect(populated.status == 0, "\(populated)")
        #expect(try await Self.attribute(status, of: sub) == "downloaded")

        // Pinned, and its subfolder with it (the policy is inherited).
        let pinned = try await domain.cli.run(["pin", "d:/sub"])
        #expect(pinned.status == 0, "\(pinned)")
        #expect(try await Self.attribute(status, of: sub) == "pinned")
        #expect(try await Self.attribute(status, of: sub + "/deeper") == "pinned")
        #expect(try await Self.attribute(status, of: domain.replica) == "downloaded")

        // Unpinned: written, no longer pinned.
        let unpinned = try await domain.cli.run(["unpin", "d:/sub"])
        #expect(unpinned.status == 0, "\(unpinned)")
        #expect(try await Self.attribute(status, of: sub) == "downloaded")

        // getfattr -d lists both on a folder; setting one is refused.
        let dumped = try await runProgram(["getfattr", "-d", sub])
        let text = String(decoding: dumped.output, as: UTF8.self)
        #expect(text.contains("user.fileprovider.status=\"downloaded\"") && text.contains("user.fileprovider.domain=\"d\""), "\(text)")
        let set = try await runProgram(["setfattr", "-n", status, "-v", "pinned", sub])
        #expect(!set.succeeded, "\(set)")
        #expect(try await Self.attribute(status, of: sub) == "downloaded")
    }
}
