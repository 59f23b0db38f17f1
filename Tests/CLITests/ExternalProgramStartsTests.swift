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

    /// `domain add` and `sync` start the program once each: the program started to describe
    /// itself is the one the domain opens its store in.
    @Test func eachCommandStartsTheProgramOnce() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(home: temp.url.appendingPathComponent("home"))
        let (environment, log) = try Self.countedBackend(temp)
        try temp.write("store/readme.txt", Data("hello\n".utf8))

        let added = try await cli.run(
            ["domain", "add", "docs", "--backend", "counted", "--root", temp.url.appendingPathComponent("store").path],
            environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try Self.starts(log) == 1)

        let synced = try await cli.run(["sync", "docs"], environment: environment)
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(try Self.starts(log) == 2)
        let listed = try await cli.run(["ls", "docs:/", "--json"], environment: environment)
        #expect(listed.stdout.contains("readme.txt"))
    }
}
