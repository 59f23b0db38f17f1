import Foundation
import ProviderTesting
import Testing

/// The command line's warts of issue #36: each is a command that did something surprising and
/// now does what a user expects, or says what to do.
@Suite struct CLIWartsTests {
    let temp: TemporaryFolder
    let cli: CLIRunner

    init() throws {
        temp = try TemporaryFolder()
        cli = CLIRunner(in: temp)
        try temp.write("src/a.txt", Data("a".utf8))
    }

    var root: String { temp.url.appendingPathComponent("src").path }

    @Test func backendOptionsParseWhereverTheNameStands() async throws {
        let orders: [(String, [String])] = [
            ("first", ["domain", "add", "first", "--backend", "local", "--root", root]),
            ("before", ["domain", "add", "--backend", "local", "--root", root, "before"]),
            ("inline", ["domain", "add", "--root=\(root)", "--backend=local", "inline"]),
            (
                "between",
                ["domain", "add", "--backend", "local", "--root", root, "--replica", temp.url.appendingPathComponent("r").path, "between"]
            ),
        ]
        for (name, arguments) in orders {
            let added = try await cli.run(arguments + ["--mode", "placeholder-files"])
            #expect(added.status == 0, "\(arguments): \(added.stderr)")
            #expect(added.stdout.contains("added domain '\(name)' (local)"))
        }
        // A boolean option of a built-in backend takes the next word only when it is a boolean
        // (the store is not there: what matters is the name the error names).
        for flag in [["--accept-new-host-key"], ["--accept-new-host-key", "yes"]] {
            let sftp = try await cli.run(["domain", "add", "--backend", "sftp", "--host", "127.0.0.1", "--port", "1"] + flag + ["far"])
            #expect(sftp.stderr.contains("cannot reach the store of 'far'"), "\(flag): \(sftp.stderr)")
        }
        let shown = try await cli.run(["domain", "show", "between"])
        #expect(shown.stdout.contains(temp.url.appendingPathComponent("r").path))
        // An option neither `domain add` nor the backend takes is named, wherever it stands.
        let typo = try await cli.run(["domain", "add", "--backend", "local", "--rooot", root, "other"])
        #expect(typo.status == 2)
        #expect(typo.stderr == "error: unknown option '--rooot'; did you mean '--root'?\n")
        let own = try await cli.run(["domain", "add", "--backend", "local", "--root", root, "--replcia", root + "2", "other"])
        #expect(own.stderr == "error: unknown option '--replcia'; did you mean '--replica'?\n")
        let unknown = try await cli.run(["domain", "add", "--backend", "local", "--root", root, "--colour", "red", "other"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("the local backend has no option --colour; its options are --root"))
        let missing = try await cli.run(["domain", "add", "--backend", "local", "--root", root])
        #expect(missing.status == 2)
        #expect(
            missing.stderr == "error: the domain's name is missing: fileproviderctl domain add NAME --backend KIND [backend options]\n")
    }

    @Test func aMistypedCommandGetsADidYouMean() async throws {
        let sync = try await cli.run(["sycn"])
        #expect(sync.status == 2)
        #expect(sync.stderr == "error: unknown command 'sycn'; did you mean 'sync'?\n")
        let global = try await cli.run(["--json", "--home", cli.home.path, "sycn"], withHome: false)
        #expect(global.stderr == "error: unknown command 'sycn'; did you mean 'sync'?\n")
        let add = try await cli.run(["domain", "ad", "x", "--backend", "local"])
        #expect(add.status == 2)
        #expect(add.stderr == "error: unknown command 'domain ad'; did you mean 'domain add'?\n")
        let far = try await cli.run(["xyzzy"], withHome: false)
        #expect(far.status == 2)
        #expect(far.stderr.hasPrefix("error: unknown command 'xyzzy'; the commands are domain, sync, "))
        // Arguments of a command that takes no subcommand are left to it.
        #expect(try await cli.run(["help", "sync"], withHome: false).status == 0)
    }

    @Test func materializingAFolderOfFoldersSaysToUseRecursive() async throws {
        try temp.write("tree/one/a.txt", Data("a".utf8))
        try temp.write("tree/two/deep/b.txt", Data("b".utf8))
        try temp.write("tree/two/c.txt", Data("c".utf8))
        try await cli.addLocalDomain("tree", root: temp.url.appendingPathComponent("tree"), sync: true)
        let result = try await cli.run(["materialize", "tree:/"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "materialized 0 items\n")
        #expect(
            result.stderr
                == "warning: tree:/: 2 subfolders with 4 items below them not materialized; add -R to materialize everything below the folder\n"
        )
        let one = try await cli.run(["materialize", "tree:/two"])
        #expect(one.stdout == "materialized 1 item\n")
        #expect(one.stderr.contains("warning: tree:/two: 1 subfolder with 1 item below it not materialized; add -R"))
        let recursive = try await cli.run(["materialize", "-R", "tree:/"])
        #expect(recursive.status == 0)
        #expect(recursive.stderr.isEmpty)
    }

    @Test func aDamagedDatabaseSaysHowToRecover() async throws {
        for index in 0..<400 { try temp.write("many/folder\(index % 20)/file-\(index)-with-a-longer-name.txt", Data("\(index)".utf8)) }
        try await cli.addLocalDomain("many", root: temp.url.appendingPathComponent("many"), sync: true)
        let database = cli.home.appendingPathComponent("metadata.sqlite")
        // Everything in the database file first (a process's last connection does it as it
        // closes, but a loaded machine may end it before): the pages damaged below hold it.
        let checkpoint = try await runProgram(["sqlite3", database.path, "PRAGMA wal_checkpoint(TRUNCATE);"])
        #expect(checkpoint.succeeded, "\(checkpoint)")
        // The write-ahead log goes too (lost with the disk), so the damaged pages are read.
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database.path + suffix) }
        // Every page but the first (the header and the schema's root) overwritten with garbage.
        var bytes = try Data(contentsOf: database)
        let pageSize = Int(bytes[16]) << 8 | Int(bytes[17])
        #expect(bytes.count > 8 * pageSize)
        for offset in stride(from: pageSize * 2, to: bytes.count - pageSize, by: 1) {
            bytes[offset] = UInt8(truncatingIfNeeded: offset &* 31)
        }
        try bytes.write(to: database)
        for arguments in [
            ["status"], ["sync"], ["ls", "many:/"], ["domain", "list"], ["materialize", "-R", "many:/"], ["dump", "many"],
        ] {
            let result = try await cli.run(arguments)
            #expect(result.status == 1, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("the metadata database \(database.path) is damaged"), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("PRAGMA integrity_check"))
            #expect(result.stderr.contains("The files in the replica folders are safe"))
            #expect(result.stderr.contains("--adopt-replica"))
            #expect(!result.stderr.contains("SQLite error"), "\(arguments): \(result.stderr)")
        }
    }

    @Test func backendKindsCompleteAsKindsNotFiles() async throws {
        let words = ["fileproviderctl", "domain", "add", "x", "--backend", "sf"]
        let result = try await cli.run(
            ["---completion", "domain", "add", "--", "--backend", "5", "2"] + words, withHome: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n") == ["sftp"])
        let all = try await cli.run(
            ["---completion", "domain", "add", "--", "--backend", "5", "0", "fileproviderctl", "domain", "add", "x", "--backend", ""],
            withHome: false)
        #expect(Set(all.stdout.split(separator: "\n")).isSuperset(of: ["local", "sftp", "media", "webdav"]))
    }

    /// bash's completion of `--backend sf` in a folder holding a folder `sftp`: the candidate is
    /// the kind, and bash is told it is no file name (`complete -o filenames` made it `sftp/`).
    @Test func bashDoesNotTakeBackendKindsForFolders() async throws {
        let script = try await cli.run(["--generate-completion-script", "bash"], withHome: false)
        #expect(script.status == 0)
        try temp.write("completion.bash", Data(script.stdout.utf8))
        let folder = temp.url.appendingPathComponent("cwd")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("sftp"), withIntermediateDirectories: true)
        let program = """
            cd '\(folder.path)'
            source '\(temp.url.appendingPathComponent("completion.bash").path)'
            compopt() { echo "compopt $*"; }
            COMP_WORDS=('\(cli.binary.path)' domain add x --backend sf)
            COMP_CWORD=5
            COMP_LINE="${COMP_WORDS[*]}"
            COMP_POINT=${#COMP_LINE}
            _fileproviderctl fileproviderctl sf --backend
            printf 'reply %s\\n' "${COMPREPLY[@]}"
            """
        let completed = try await offThePool { try ChildProcess.capture("/bin/bash", ["--norc", "-c", program]) }
        let output = String(decoding: completed.output, as: UTF8.self)
        #expect(output == "compopt +o filenames\nreply sftp\n", "\(String(decoding: completed.errorOutput, as: UTF8.self))")
    }
}
