import Foundation
import Testing

/// How often a command starts an external backend program: a wrapper around the Python
/// reference backend writes a line to a log at every start.
@Suite struct ExternalProgramStartsTests {
    /// A folder on PATH with `fileprovider-backend-counted`, which logs its start to `log`
    /// and runs the Python reference backend; the environment to run the CLI with.
    static func countedBackend(_ temp: TemporaryFolder) throws -> (environment: [String: String], log: URL) {
        let folder = temp.url.appendingPathComponent("counted-bin")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let log = temp.url.appendingPathComponent("starts.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let pyfolder = ExternalBackendCLITests.pythonBackends + "/fileprovider-backend-pyfolder"
        let script = "#!/bin/sh\necho start >> '\(log.path)'\nexec '\(pyfolder)'\n"
        let program = folder.appendingPathComponent("fileprovider-backend-counted")
        try Data(script.utf8).write(to: program)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: program.path)
        var environment = ExternalBackendCLITests.environment(temp)
        environment["PATH"] = folder.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        return (environment, log)
    }

    static func starts(_ log: URL) throws -> Int {
        String(decoding: try Data(contentsOf: log), as: UTF8.self).split(separator: "\n").count
    }

    /// The description `domain add` remembered for the counted program.
    static func entry(_ temp: TemporaryFolder) -> URL {
        temp.url.appendingPathComponent("cache/fileprovider/backends/counted.json")
    }

    /// Adds the domain `docs` of the counted program (one start: the program started to
    /// describe itself is the one the domain opens its store in).
    static func addDomain(_ cli: CLIRunner, _ temp: TemporaryFolder, _ environment: [String: String], log: URL) async throws {
        try temp.write("store/readme.txt", Data("hello\n".utf8))
        let added = try await cli.run(
            [
                "domain", "add", "--mode", "placeholder-files", "docs", "--backend", "counted", "--root",
                temp.url.appendingPathComponent("store").path,
            ],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try starts(log) == 1)
        #expect(FileManager.default.fileExists(atPath: entry(temp).path))
    }

    /// `domain add` and `sync` start the program once each; with its description remembered,
    /// `status` and `domain list` do not start it.
    @Test func eachCommandStartsTheProgramOnceAtMost() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, log) = try Self.countedBackend(temp)
        try await Self.addDomain(cli, temp, environment, log: log)

        let synced = try await cli.run(["sync", "docs"], environment: environment)
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(try Self.starts(log) == 2)
        let listed = try await cli.run(["ls", "docs:/", "--json"], environment: environment)
        #expect(listed.stdout.contains("readme.txt"))

        let status = try await cli.run(["status"], environment: environment)
        #expect(status.status == 0, "\(status.stderr)")
        #expect(!status.stdout.contains("not available"), "\(status.stdout)")
        let domains = try await cli.run(["domain", "list"], environment: environment)
        #expect(domains.status == 0, "\(domains.stderr)")
        #expect(try Self.starts(log) == 2)
    }

    /// A program whose file changed is described again; so is one whose remembered
    /// description is malformed or breaks the rules of a program's reply.
    @Test func aStaleOrHostileEntryIsNotUsed() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let (environment, log) = try Self.countedBackend(temp)
        try await Self.addDomain(cli, temp, environment, log: log)
        let program = temp.url.appendingPathComponent("counted-bin/fileprovider-backend-counted")
        var expected = 1
        func status() async throws {
            let result = try await cli.run(["status"], environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(!result.stdout.contains("not available"), "\(result.stdout)")
        }

        // The program's file changes (a line more): described again, and remembered.
        let handle = try FileHandle(forWritingTo: program)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("# changed\n".utf8))
        try handle.close()
        try await status()
        expected += 1
        #expect(try Self.starts(log) == expected)
        try await status()
        #expect(try Self.starts(log) == expected)

        let good = try Data(contentsOf: Self.entry(temp))
        let text = String(decoding: good, as: UTF8.self)
        let hostile: [(String, Data)] = [
            ("not JSON", Data("{\"format\":1,".utf8)),
            ("an option with an unsafe name", Data(text.replacingOccurrences(of: "\"name\":\"root\"", with: "\"name\":\"..x\"").utf8)),
            ("another format", Data(text.replacingOccurrences(of: "\"format\":1", with: "\"format\":2").utf8)),
            ("over 1 MiB", Data(repeating: 0x20, count: (1 << 20) + 1) + good),
        ]
        for (what, data) in hostile {
            #expect(data != good, "\(what)")
            try data.write(to: Self.entry(temp))
            try await status()
            expected += 1
            #expect(try Self.starts(log) == expected, "\(what)")
            #expect(try Data(contentsOf: Self.entry(temp)) == good, "\(what): the entry is written again")
        }
        // A symlink in its place is not followed.
        try FileManager.default.removeItem(at: Self.entry(temp))
        let elsewhere = temp.url.appendingPathComponent("elsewhere.json")
        try good.write(to: elsewhere)
        try FileManager.default.createSymbolicLink(at: Self.entry(temp), withDestinationURL: elsewhere)
        try await status()
        expected += 1
        #expect(try Self.starts(log) == expected)
    }
}
