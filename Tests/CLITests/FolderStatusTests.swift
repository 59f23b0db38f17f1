import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `user.fileprovider.status` on folders, read with `getfattr` (the real program) while a
/// folder goes from never listed (`dataless`) to written (`downloaded`), pinned (`pinned`,
/// inherited by its subfolders) and unpinned again; the root and `user.fileprovider.domain`
/// too. In every layout: through a FUSE mount (worked out from the database), and written on
/// the folders themselves in the fanotify layout (through the replica path `serve` mounts; as
/// root on Linux ≥ 6.14, as the other on-access suites) and in `placeholder-files` mode. The
/// FUSE mount runs in the second `swift test` process (Makefile).
@Suite("Folder status attributes", .serialized, .timeLimit(.minutes(5)))
struct FolderStatusTests {
    /// `getfattr -n NAME --only-values PATH`, or `nil` when it fails.
    static func attribute(_ name: String, of path: String) async throws -> String? {
        try await StatusAttributeTests.attribute(name, of: path)
    }

    /// `pin` of DOMAIN:/sub: it and its subfolder `deeper` say `pinned` (the policy is
    /// inherited), the root stays `downloaded`; `unpin`: both say `downloaded` (written, no
    /// longer pinned).
    static func pinAndUnpin(_ domain: String, replica: String, cli: CLIRunner) async throws {
        let (sub, status) = (replica + "/sub", "user.fileprovider.status")
        let pinned = try await cli.run(["pin", domain + ":/sub"])
        #expect(pinned.status == 0, "\(pinned)")
        #expect(try await attribute(status, of: sub) == "pinned")
        #expect(try await attribute(status, of: sub + "/deeper") == "pinned")
        #expect(try await attribute(status, of: replica) == "downloaded")
        let unpinned = try await cli.run(["unpin", domain + ":/sub"])
        #expect(unpinned.status == 0, "\(unpinned)")
        #expect(try await attribute(status, of: sub) == "downloaded")
        #expect(try await attribute(status, of: sub + "/deeper") == "downloaded")
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

        try await Self.pinAndUnpin("d", replica: domain.replica, cli: domain.cli)

        // getfattr -d lists both on a folder; setting one is refused.
        let dumped = try await runProgram(["getfattr", "-d", sub])
        let text = String(decoding: dumped.output, as: UTF8.self)
        #expect(text.contains("user.fileprovider.status=\"downloaded\"") && text.contains("user.fileprovider.domain=\"d\""), "\(text)")
        let set = try await runProgram(["setfattr", "-n", status, "-v", "pinned", sub])
        #expect(!set.succeeded, "\(set)")
        #expect(try await Self.attribute(status, of: sub) == "downloaded")
    }

    /// The fanotify layout: a folder a sync made dataless says so; opening it (a listing)
    /// writes its items and it says `downloaded` (its new subfolder `dataless`), and `tar` of
    /// the tree, which opens every folder, finds no folder changed as it read it; `pin` and
    /// `unpin` follow down the tree; a folder made here says `downloaded` once sent.
    @Test func foldersCarryTheirStatusInTheFanotifyLayout() async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store, backend: "local", options: ["root": store], files: ["top.txt": Data("top".utf8)],
            layout: .fanotify)
        // Added to the store after the first sync, and not written by the next: dataless.
        try domain.write("sub/a.txt", Data("alpha".utf8))
        try domain.write("sub/deeper/b.txt", Data("bravo".utf8))
        let synced = try await domain.cli.run(["sync", "d", "--populate-limit", "0"])
        #expect(synced.status == 0, "\(synced)")
        // Not populated behind the test's back.
        try await domain.startServe(["--no-populate-in-background"])
        let sub = domain.replica + "/sub"
        let status = "user.fileprovider.status"

        #expect(try await Self.attribute(status, of: domain.replica) == "downloaded")
        #expect(try await Self.attribute(status, of: sub) == "dataless")
        #expect(try await Self.attribute("user.fileprovider.domain", of: sub) == "d")
        // The attributes are on the folder itself: the backing folder has them.
        #expect(try await Self.attribute(status, of: domain.backing + "/sub") == "dataless")

        // Listed: populated on open, with its status before the listing returns.
        let listed = try await runProgram(["ls", sub])
        #expect(listed.succeeded && String(decoding: listed.output, as: UTF8.self).contains("deeper"), "\(listed)")
        #expect(try await Self.attribute(status, of: sub) == "downloaded")
        #expect(try await Self.attribute(status, of: sub + "/deeper") == "dataless")

        // tar opens every folder (the dataless one populated as it opens it) and compares each
        // one's change time after reading it with the one after opening it.
        let archived = try await runProgram(["tar", "-cf", temp.url.appendingPathComponent("tree.tar").path, "-C", domain.replica, "."])
        #expect(archived.succeeded && !archived.errorText.contains("changed as we read it"), "\(archived)")
        #expect(try await Self.attribute(status, of: sub + "/deeper") == "downloaded")

        try await Self.pinAndUnpin("d", replica: domain.replica, cli: domain.cli)

        // Made here: serve sends it, then it says so.
        try FileManager.default.createDirectory(atPath: domain.replica + "/made", withIntermediateDirectories: false)
        let sent = await waitUntil(timeout: 60) { (try? await Self.attribute(status, of: domain.replica + "/made")) == "downloaded" }
        #expect(sent, "\(domain.logs.suffix(1500))")
        #expect(FileManager.default.fileExists(atPath: store + "/made"))
        try await domain.stopServe()
    }

    /// `placeholder-files` mode, without `serve`: the same values, written on the folders by
    /// `sync`, `populate`, `pin` and `unpin`.
    @Test func foldersCarryTheirStatusInPlaceholderFilesMode() async throws {
        let domain = try await PlaceholderFilesDomain(
            "p", files: ["sub/a.txt": Data("alpha".utf8), "sub/deeper/b.txt": Data("bravo".utf8)], syncArguments: ["--populate-limit", "0"])
        let (cli, replica) = (domain.cli, domain.replica)
        let (sub, status) = (replica + "/sub", "user.fileprovider.status")

        #expect(try await Self.attribute(status, of: replica) == "downloaded")
        #expect(try await Self.attribute(status, of: sub) == "dataless")
        #expect(try await Self.attribute("user.fileprovider.domain", of: sub) == "p")
        #expect(try await cli.run(["populate", "p:/sub"]).status == 0)
        #expect(try await Self.attribute(status, of: sub) == "downloaded")
        #expect(try await Self.attribute(status, of: sub + "/deeper") == "dataless")
        try await Self.pinAndUnpin("p", replica: replica, cli: cli)

        // Made here and sent.
        try FileManager.default.createDirectory(atPath: replica + "/made", withIntermediateDirectories: false)
        #expect(try await cli.run(["sync", "p"]).status == 0)
        #expect(try await Self.attribute(status, of: replica + "/made") == "downloaded")
    }

    /// A folder moved in the store into a pinned folder (`sync` moves its local copy): it and
    /// its downloaded file say `pinned`; moved back out, `downloaded`. `placeholder-files` mode.
    @Test func aFolderMovedInTheStoreAcrossAPinSaysSo() async throws {
        let domain = try await PlaceholderFilesDomain("m", files: ["a/sub/f.txt": Data("alpha".utf8)], folders: ["p"])
        let (cli, store, replica) = (domain.cli, domain.store, domain.replica)
        #expect(try await cli.run(["pin", "m:/p"]).status == 0)
        #expect(try await cli.run(["materialize", "m:/a/sub/f.txt"]).status == 0)
        let status = "user.fileprovider.status"
        #expect(try await Self.attribute(status, of: replica + "/a/sub") == "downloaded")
        #expect(try await Self.attribute(status, of: replica + "/a/sub/f.txt") == "downloaded")

        try FileManager.default.moveItem(atPath: store + "/a/sub", toPath: store + "/p/sub")
        let into = try await cli.run(["sync", "m"])
        #expect(into.status == 0, "\(into)")
        #expect(try await Self.attribute(status, of: replica + "/p/sub") == "pinned")
        #expect(try await Self.attribute(status, of: replica + "/p/sub/f.txt") == "pinned")

        try FileManager.default.moveItem(atPath: store + "/p/sub", toPath: store + "/a/sub")
        let out = try await cli.run(["sync", "m"])
        #expect(out.status == 0, "\(out)")
        #expect(try await Self.attribute(status, of: replica + "/a/sub") == "downloaded")
        #expect(try await Self.attribute(status, of: replica + "/a/sub/f.txt") == "downloaded")
    }
}
