import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `user.fileprovider.status` on folders, read with `getfattr` (the real program) while a
/// folder goes from never listed (`dataless`) to written (`downloaded`), pinned (`pinned`,
/// inherited by its subfolders) and unpinned again, or is moved by another client into a
/// pinned folder and out again; the root and `user.fileprovider.domain` too. In every layout: through a FUSE mount (worked out from the database), and written on
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

    /// A folder moved in the store into a pinned folder: it and its downloaded file say
    /// `pinned`; moved back out, `downloaded`. `placeholder-files` mode over the `local`
    /// backend, whose identifiers are paths: the folder is a new item at its new place and the
    /// downloaded file follows it as a move recognised by its content version (Sync.md);
    /// ``aFolderMovedInTheStoreAcrossAPinSaysSoInEveryLayout(_:)`` has a store whose
    /// identifiers stay with the items.
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

    /// Another process (`fileproviderctl materialize`) writes a folder a FUSE mount told the
    /// kernel about from the database (dataless), while `serve` runs and before it hears of it:
    /// through the mount, a file of it the kernel holds and one it never looked up say
    /// `downloaded` at once and are read from disk (nothing fetched on access). The mount takes a
    /// record that says an item is on disk as word that its folder is written.
    @Test func filesAnotherProcessDownloadsInAFolderTheMountHeldAsDatalessSayDownloadedAtOnce() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: [:], layout: .fuse)
        let files = ["a/cold/held.txt": Data("held\n".utf8), "a/cold/fresh.txt": Data("fresh\n".utf8)]
        for (path, contents) in files { try domain.write(path, contents) }
        // Past the population budget: `a` is written empty, nothing below it.
        let synced = try await domain.cli.run(["sync", domain.name, "--populate-limit", "0"])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(fileStatus(domain.backing + "/a/cold") == nil, "a/cold was written by the sync")
        try await domain.startServe(["--no-populate-in-background"])
        let (held, fresh) = (domain.replica + "/a/cold/held.txt", domain.replica + "/a/cold/fresh.txt")
        #expect(try await StatusAttributeTests.status(held) == "dataless")
        #expect(try await StatusAttributeTests.status(domain.replica + "/a/cold") == "dataless")

        let materialized = try await domain.cli.run(["materialize", "-R", "d:/a/cold"])
        #expect(materialized.status == 0, "\(materialized)")
        #expect(fileStatus(domain.backing + "/a/cold/fresh.txt")?.st_size == 6)
        #expect(try await StatusAttributeTests.status(held) == "downloaded", "\(domain.logs.suffix(2000))")
        #expect(try await StatusAttributeTests.status(fresh) == "downloaded", "\(domain.logs.suffix(2000))")
        for (path, contents) in files {
            let read = try await runProgram(["cat", domain.replica + "/" + path])
            #expect(read.succeeded && read.output == contents, "\(path): \(read)")
            #expect(domain.fetches(of: path) == 0, "\(path) was fetched on access: \(domain.logs.suffix(2000))")
        }
        try await domain.stopServe()
    }

    /// How the moved folders of ``aFolderMovedInTheStoreAcrossAPinSaysSoInEveryLayout(_:)`` are
    /// reached: a `placeholder-files` replica, or a dataless one through fanotify or a FUSE
    /// mount (`serve` running).
    enum MoveLayout: String, CaseIterable, CustomStringConvertible {
        case placeholderFiles = "placeholder-files"
        case fanotify, fuse
        var description: String { rawValue }
    }

    /// Another client moves folders in the store (the Nextcloud emulation, whose identifiers
    /// stay with an item across a `MOVE`, so sync sees a move, not a deletion and a new item)
    /// into a pinned folder and back out: a written folder holding a downloaded file and one not
    /// downloaded, and a folder never written (`dataless`). After the move and a sync, each
    /// folder and each of their files says `pinned`, and the files' bytes are on disk (`cmp`
    /// finds the store's bytes; in the dataless layouts nothing was fetched on access for it);
    /// moved back out and synced, `downloaded`, the bytes still there. In every layout.
    @Test(arguments: MoveLayout.allCases)
    func aFolderMovedInTheStoreAcrossAPinSaysSoInEveryLayout(_ layout: MoveLayout) async throws {
        let server = try await offThePool { try NextcloudDAVServer() }
        defer { server.stop() }
        let temp = try TemporaryFolder()
        let storeName = "store-\(UUID().uuidString)"
        let url = try server.makeFolder(storeName)
        let store = server.root.appendingPathComponent(storeName).path
        try FileManager.default.createDirectory(atPath: store + "/p", withIntermediateDirectories: true)
        let files = ["a/sub/f.txt": "alpha", "a/sub/g.txt": "bravo"].mapValues { Data($0.utf8) }
        let options = ["--url", url, "--vendor", "nextcloud"]
        // `serve` runs for the dataless layouts (their replica path is its mount).
        let served: ServedDomain?
        let (cli, replica): (CLIRunner, String)
        switch layout {
        case .placeholderFiles:
            served = nil
            (cli, replica) = (CLIRunner(in: temp), temp.url.appendingPathComponent("replica").path)
            for (path, contents) in files {
                let file = URL(fileURLWithPath: store + "/" + path)
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try contents.write(to: file)
            }
            let added = try await cli.run(
                ["domain", "add", "--mode", "placeholder-files", "d", "--backend", "webdav", "--replica", replica] + options)
            try #require(added.status == 0, "\(added)")
            let synced = try await cli.run(["sync", "d"])
            #expect(synced.status == 0, "\(synced)")
        case .fanotify, .fuse:
            let domain = try await ServedDomain(
                temp: temp, storeFolder: store, backend: "webdav", options: ["url": url, "vendor": "nextcloud"], files: files,
                layout: layout == .fuse ? .fuse : .fanotify)
            (served, cli, replica) = (domain, domain.cli, domain.replica)
        }
        // Added to the store after the first sync, and not written by the next: dataless.
        try FileManager.default.createDirectory(atPath: store + "/a/cold", withIntermediateDirectories: true)
        try Data("charlie".utf8).write(to: URL(fileURLWithPath: store + "/a/cold/c.txt"))
        let listed = try await cli.run(["sync", "d", "--populate-limit", "0"])
        #expect(listed.status == 0, "\(listed)")
        // Not populated behind the test's back.
        try await served?.startServe(["--no-populate-in-background"])

        func status(_ path: String) async throws -> String? { try await StatusAttributeTests.status(replica + "/" + path) }
        // The store's bytes in the replica, and none of them fetched on access.
        func present(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let compared = try await runProgram(["cmp", replica + "/" + path, store + "/" + path])
            #expect(compared.succeeded, "\(path): \(compared)", sourceLocation: sourceLocation)
            if let served {
                #expect(
                    served.fetches(of: path) == 0, "\(path) was not on disk: \(served.logs.suffix(1500))", sourceLocation: sourceLocation)
            }
        }
        // The item's identifier, from `ls --json` of its folder.
        func identifier(_ path: String) async throws -> String? {
            let folder = (path as NSString).deletingLastPathComponent
            let listed = try #require(try await cli.json(["ls", "d:/" + folder]) as? [[String: Any]])
            return listed.first { ($0["path"] as? String) == "/" + path }?["identifier"] as? String
        }
        // What each step printed and how long it took, said when a status is wrong.
        var steps: [String] = []
        let began = Date()
        // A `MOVE` by another client (curl), then a sync.
        func move(_ from: String, to: String) async throws {
            let moved = try await runProgram([
                "curl", "-sS", "--fail", "-X", "MOVE", "-H", "Destination: \(url)/\(to)", "-H", "Overwrite: F", "\(url)/\(from)",
            ])
            try #require(moved.succeeded, "MOVE \(from) \(to): \(moved)")
            let started = Date()
            let synced = try await cli.run(["sync", "d", "--log-level", "info"])
            #expect(synced.status == 0, "\(synced)")
            let (at, took) = (Int(started.timeIntervalSince(began)), Int(Date().timeIntervalSince(started) * 1000))
            steps.append("\(at) s: MOVE \(from) \(to), sync in \(took) ms: \(synced.stdout)\(synced.stderr)")
        }

        let populated = try await cli.run(["populate", "d:/a/sub"])
        #expect(populated.status == 0, "\(populated)")
        let materialized = try await cli.run(["materialize", "d:/a/sub/f.txt"])
        #expect(materialized.status == 0, "\(materialized)")
        let pinned = try await cli.run(["pin", "d:/p"])
        #expect(pinned.status == 0, "\(pinned)")
        #expect(try await status("p") == "pinned")
        #expect(try await status("a/sub") == "downloaded")
        #expect(try await status("a/sub/f.txt") == "downloaded")
        #expect(try await status("a/cold") == "dataless")

        let moving = try #require(try await identifier("a/sub"))
        try await move("a/sub", to: "p/sub")
        try await move("a/cold", to: "p/cold")
        #expect(try await identifier("p/sub") == moving, "a move, not a new item")
        for path in ["p/sub", "p/sub/f.txt", "p/sub/g.txt", "p/cold", "p/cold/c.txt"] {
            #expect(try await status(path) == "pinned", "\(path)")
        }
        for path in ["p/sub/f.txt", "p/sub/g.txt", "p/cold/c.txt"] { try await present(path) }

        try await move("p/sub", to: "a/sub")
        try await move("p/cold", to: "a/cold")
        for path in ["a/sub", "a/sub/f.txt", "a/sub/g.txt", "a/cold", "a/cold/c.txt"] {
            let now = try await status(path)
            #expect(now == "downloaded", "\(path): \(now ?? "none"); \(steps.joined(separator: "\n")); \(served?.logs.suffix(3000) ?? "")")
        }
        for path in ["a/sub/f.txt", "a/sub/g.txt", "a/cold/c.txt"] { try await present(path) }
        try await served?.stopServe()
    }
}
