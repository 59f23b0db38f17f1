import Foundation
import ProviderTesting

/// Runs the built `fileproviderctl` binary against a temporary home.
struct CLIRunner {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    let home: URL
    let binary: URL

    /// The binary: `$FILEPROVIDERCTL`, else `.build/debug/fileproviderctl` of this package.
    static func locateBinary() -> URL {
        if let path = ProcessInfo.processInfo.environment["FILEPROVIDERCTL"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/fileproviderctl")
    }

    init(home: URL) {
        self.home = home
        binary = Self.locateBinary()
    }

    /// Makes `process` run the binary with `arguments`, `--home` added after them, and the
    /// environment without `FILEPROVIDER_HOME`, plus
    /// `environment`.
    func configure(_ process: TestProcess, _ arguments: [String], withHome: Bool = true, environment extra: [String: String] = [:]) {
        process.executableURL = binary
        process.arguments = arguments + (withHome ? ["--home", home.path] : [])
        process.environment = environment(extra)
    }

    /// This process's environment without `FILEPROVIDER_HOME`, with `XDG_CACHE_HOME` in the
    /// temporary home (what the program remembers, such as a WebDAV server's probe, never goes
    /// to the real `~/.cache`), plus `extra`.
    func environment(_ extra: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "FILEPROVIDER_HOME")
        environment["XDG_CACHE_HOME"] = home.appendingPathComponent(".cache").path
        return environment.merging(extra) { _, new in new }
    }

    /// Runs the binary with `--home` added after the subcommand words.
    ///
    /// Its output goes to files, not pipes: a process that other tests start at the same moment
    /// (a media-server, an sshd) can inherit the write end of a pipe before it is marked
    /// close-on-exec, and a pipe one of those long-lived processes holds never reaches its end.
    @discardableResult
    func run(_ arguments: [String], withHome: Bool = true, environment: [String: String] = [:]) async throws -> Result {
        try await offThePool { [self] in try runBlocking(arguments, withHome: withHome, environment: environment) }
    }

    /// ``run(_:withHome:environment:)`` on the calling thread: only for code that is not async
    /// (a test's async code waiting on it would hold one of the cooperative pool's threads).
    @discardableResult
    func runBlocking(_ arguments: [String], withHome: Bool = true, environment: [String: String] = [:]) throws -> Result {
        let run = try ChildProcess.capture(
            binary.path, arguments + (withHome ? ["--home", home.path] : []), environment: self.environment(environment))
        let status: Int32
        switch run.ending {
        case .exited(let code): status = code
        case .signaled(let signal): status = signal
        }
        return Result(
            status: status, stdout: String(decoding: run.output, as: UTF8.self), stderr: String(decoding: run.errorOutput, as: UTF8.self))
    }

    /// Runs and decodes standard output as JSON.
    func json(_ arguments: [String], environment: [String: String] = [:]) async throws -> Any {
        let result = try await run(arguments + ["--json"], environment: environment)
        guard result.status == 0 else { throw CLIError(result: result) }
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    }
}

struct CLIError: Error, CustomStringConvertible {
    var result: CLIRunner.Result
    var description: String { "exit \(result.status): \(result.stderr)" }
}

/// A temporary folder removed at the end of a test.
final class TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Kept when `FPK_KEEP_TEMP` is set, to look into after a failure.
    deinit {
        if ProcessInfo.processInfo.environment["FPK_KEEP_TEMP"] == nil { try? FileManager.default.removeItem(at: url) }
    }

    /// Writes a file, creating folders.
    func write(_ relative: String, _ data: Data) throws {
        let target = url.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: target)
    }
}
