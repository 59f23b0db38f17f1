import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `domain convert NAME --mode`, through the real binary: a local-folder domain with downloaded,
/// pinned, not downloaded and locally edited files converts both ways and back without losing a
/// byte, and a conversion killed with SIGKILL is finished by running it again. CI runs as root on
/// ext4, where dataless domains can be made.
@Suite struct ReplicaConversionCLITests {
    static let edited = Data("edited in the replica".utf8)

    /// A store folder with six files, a domain `d` over it, synced, with `a.txt` and
    /// `sub/warm.txt` downloaded, `pinned.txt` pinned and `edit.txt` downloaded and edited.
    func prepared() async throws -> (TemporaryFolder, CLIRunner, URL) {
        let temp = try TemporaryFolder()
        try temp.write("src/a.txt", Data("a".utf8))
        try temp.write("src/pinned.txt", Data("pinned".utf8))
        try temp.write("src/cold.txt", Data(repeating: 7, count: 9000))
        try temp.write("src/edit.txt", Data("the store's version".utf8))
        try temp.write("src/sub/deep.txt", Data("deep".utf8))
        try temp.write("src/sub/warm.txt", Data("warm".utf8))
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), sync: true)
        #expect(try await cli.run(["materialize", "d:/a.txt", "d:/edit.txt", "d:/sub/warm.txt"]).status == 0)
        #expect(try await cli.run(["pin", "d:/pinned.txt"]).status == 0)
        let replica = cli.home.appendingPathComponent("domains/d")
        try Self.edited.write(to: replica.appendingPathComponent("edit.txt"))
        return (temp, cli, replica)
    }

    /// Every path below a folder with its bytes ("" for folders).
    func contents(_ root: URL) -> [String: Data] {
        var result: [String: Data] = [:]
        func walk(_ url: URL, _ prefix: String) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? [] {
                let child = url.appendingPathComponent(name)
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: child.path, isDirectory: &isFolder)
                if isFolder.boolValue {
                    result[prefix + name + "/"] = Data()
                    walk(child, prefix + name + "/")
                } else {
                    result[prefix + name] = (try? Data(contentsOf: child)) ?? Data("unreadable".utf8)
                }
            }
        }
        walk(root, "")
        return result
    }

    /// Whether a file is a sparse file of `size` bytes with no blocks: how a dataless file looks.
    func isSparse(_ url: URL, size: Int) -> Bool {
        var info = stat()
        return stat(url.path, &info) == 0 && info.st_size == size && info.st_blocks <= 8
    }

    @Test func convertingBothWaysAndBackKeepsEveryByteAndSyncSendsExactlyTheEdit() async throws {
        let (temp, cli, replica) = try await prepared()
        let backing = cli.home.appendingPathComponent("replicas/d")
        let before = contents(replica)
        #expect(before["cold.txt.placeholder"] != nil && before["cold.txt"] == nil)

        let converted = try await cli.run(["domain", "convert", "d", "--mode", "dataless"])
        #expect(converted.status == 0, "\(converted.stderr)")
        // --on-access auto's choice, recorded and said.
        let chosen = try #require(try await cli.json(["domain", "show", "d"]) as? [String: Any])
        let mechanism = try #require(chosen["onAccess"] as? String)
        let reason = try #require(chosen["onAccessReason"] as? String)
        #expect(reason.hasPrefix("auto: "), "\(reason)")
        #expect(
            converted.stdout
                == "converted domain 'd' to dataless: moved 5 entries from \(replica.path) to \(backing.path) (4 files and 1 folder kept as they were); 2 placeholders became dataless files\n"
                + "on access: \(mechanism): \(reason)\n"
                + "next: fileproviderctl serve d  (mounts \(backing.path) on \(replica.path)\(mechanism == "fuse" ? " through FUSE" : ""))\n"
        )
        #expect(contents(replica).isEmpty)
        #expect(isSparse(backing.appendingPathComponent("cold.txt"), size: 9000))
        #expect(isSparse(backing.appendingPathComponent("sub/deep.txt"), size: 4))
        for path in ["a.txt", "pinned.txt", "edit.txt", "sub/warm.txt"] {
            #expect(try Data(contentsOf: backing.appendingPathComponent(path)) == before[path], "\(path)")
        }
        let status = try await cli.run(["status", "d"]).stdout
        #expect(status.hasPrefix("d (local, dataless): "), "\(status)")
        let shown = try #require(try await cli.json(["domain", "show", "d"]) as? [String: Any])
        #expect(shown["mode"] as? String == "dataless")
        let listed = try #require(try await cli.json(["ls", "d:/"]) as? [[String: Any]])
        let states = Dictionary(
            uniqueKeysWithValues: listed.compactMap { row in (row["path"] as? String).map { ($0, row["state"] as? String) } })
        #expect(states["/cold.txt"] == "placeholder" && states["/a.txt"] == "materialized", "\(listed)")
        // The same command again: nothing to do.
        let again = try await cli.run(["domain", "convert", "d", "--mode", "dataless"])
        #expect(again.stdout == "domain 'd' is in dataless mode already; nothing was changed\n")

        // Back, with --json.
        let back = try #require(try await cli.json(["domain", "convert", "d", "--mode", "placeholder-files"]) as? [String: Any])
        #expect(back["from"] as? String == "dataless" && back["to"] as? String == "placeholder-files")
        #expect(back["convertedPlaceholders"] as? Int == 2 && back["movedEntries"] as? Int == 5)
        #expect(back["source"] as? String == backing.path && back["destination"] as? String == replica.path)
        #expect(contents(replica) == before)
        #expect(!FileManager.default.fileExists(atPath: backing.path))
        #expect(try await cli.run(["status", "d"]).stdout.hasPrefix("d (local, placeholder-files): "))

        // And to dataless again; a sync sends the edit and nothing else, with no conflict.
        #expect(try await cli.run(["domain", "convert", "d", "--mode", "dataless"]).status == 0)
        let sync = try await cli.run(["sync", "d"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(sync.stdout.hasPrefix("d: 1 local changes sent, 0 conflicts;"), "\(sync.stdout)")
        let store = temp.url.appendingPathComponent("src")
        #expect(try Data(contentsOf: store.appendingPathComponent("edit.txt")) == Self.edited)
        #expect(contents(store).keys.sorted() == ["a.txt", "cold.txt", "edit.txt", "pinned.txt", "sub/", "sub/deep.txt", "sub/warm.txt"])
        #expect(!contents(backing).keys.contains { $0.contains("conflicted copy") })
        #expect(isSparse(backing.appendingPathComponent("cold.txt"), size: 9000))
    }

    @Test func aServedDomainIsNotConvertedAndHelpExplainsTheCommand() async throws {
        let (temp, cli, replica) = try await prepared()
        _ = temp
        let before = contents(replica)
        // Hold the serve lock as a running `serve` does.
        let lockPath = cli.home.appendingPathComponent("locks/d.lock").path
        let fd = open(lockPath, O_RDWR | O_CREAT, 0o600)
        #expect(fd >= 0 && flock(fd, LOCK_EX) == 0)
        let refused = try await cli.run(["domain", "convert", "d", "--mode", "dataless"])
        close(fd)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("stop 'fileproviderctl serve' first"), "\(refused.stderr)")
        #expect(contents(replica) == before)

        let help = try await cli.run(["domain", "convert", "--help"], withHome: false)
        let text = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains("--mode <mode>"))
        #expect(text.contains("Interrupted (even by kill -9), the same command finishes it"), "\(text)")
    }

    /// kill -9 of `domain convert` at seeded moments in a domain of 1,500 placeholders and a few
    /// downloaded files: other commands refuse the domain meanwhile, reruns finish it, nothing is
    /// lost, and a sync afterwards sends nothing.
    @Test func aConversionKilledWithSIGKILLIsFinishedByARerun() async throws {
        let temp = try TemporaryFolder()
        for index in 0..<1500 { try temp.write("src/f\(index / 100)/file\(index).txt", Data("file \(index)".utf8)) }
        let cli = CLIRunner(in: temp)
        let src = temp.url.appendingPathComponent("src")
        try await cli.addLocalDomain("d", root: src)
        #expect(try await cli.run(["sync", "d", "--populate-limit", "100000"]).status == 0)
        #expect(try await cli.run(["materialize", "d:/f0/file1.txt", "d:/f3/file300.txt"]).status == 0)
        let replica = cli.home.appendingPathComponent("domains/d")
        let backing = cli.home.appendingPathComponent("replicas/d")
        let before = contents(replica)
        #expect(before.keys.filter { $0.hasSuffix(".placeholder") }.count == 1498)

        var generator = CrashTests.Generator(state: CrashTests.seed)
        var kills = 0
        for (mode, environment) in [("dataless", [String: String]()), ("placeholder-files", [:])] {
            var finished = false
            for round in 0..<40 {
                // The first attempt is killed almost at once (a loaded machine may start the
                // process late, and the conversion of 1,500 files can beat any later moment).
                let delay = round >= 12 ? 600 : round == 0 ? 0.002 : Double(Int.random(in: 5...150, using: &generator)) / 1000
                let attempt = try await CrashTests.runAndMaybeKill(
                    cli, ["domain", "convert", "d", "--mode", mode], environment: environment, after: delay)
                if attempt.killed || attempt.killSent {
                    kills += 1
                    continue
                }
                #expect(attempt.status == 0, "\(attempt.stderr)")
                finished = true
                break
            }
            #expect(finished)
            if mode == "dataless" {
                #expect(contents(replica).isEmpty)
                #expect(isSparse(backing.appendingPathComponent("f7/file700.txt"), size: "file 700".utf8.count))
                #expect(try Data(contentsOf: backing.appendingPathComponent("f3/file300.txt")) == Data("file 300".utf8))
            }
        }
        #expect(kills > 0)
        let after = contents(replica)
        let differing = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
        #expect(differing.isEmpty, "\(differing.prefix(10))")
        #expect(!FileManager.default.fileExists(atPath: backing.path))
        let sync = try await cli.run(["sync", "d"])
        #expect(sync.stdout.hasPrefix("d: 0 local changes sent, 0 conflicts;"), "\(sync.stdout) \(sync.stderr)")
        #expect(contents(src).count == 1515)
    }

    /// A kill in the middle leaves the marker: a check that other commands refuse the domain
    /// then, made on a conversion stopped by hand (the marker written as a killed run leaves it).
    @Test func otherCommandsRefuseADomainWhoseConversionDidNotFinish() async throws {
        let (temp, cli, replica) = try await prepared()
        _ = temp
        let marker = cli.home.appendingPathComponent("conversions/d")
        try FileManager.default.createDirectory(at: marker.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("dataless\n".utf8).write(to: marker)
        let finish = "finish it with 'fileproviderctl domain convert d --mode dataless'"
        for command in [["sync", "d"], ["materialize", "d:/cold.txt"], ["domain", "remove", "d"]] {
            let refused = try await cli.run(command)
            #expect(refused.status == 1, "\(command)")
            #expect(refused.stderr.contains(finish), "\(command): \(refused.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("cold.txt.placeholder").path))
        let finished = try await cli.run(["domain", "convert", "d", "--mode", "dataless"])
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(finished.stdout.hasPrefix("converted domain 'd' to dataless (finishing an interrupted conversion): "), "\(finished.stdout)")
        #expect(!FileManager.default.fileExists(atPath: marker.path))
        #expect(try await cli.run(["sync", "d"]).status == 0)
    }
}
