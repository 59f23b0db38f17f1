import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A program run to its end with `posix_spawn` and `waitpid`, its standard output and error
/// going to files: what tests use for the many short programs they run at once.
///
/// Foundation's `Process` is not used for these: started from many threads at once, its exit
/// monitor sometimes never reaps a child (a zombie stays, its termination handler is never
/// called, and the test waits forever).
///
/// At most ``concurrentRuns`` programs run at once; the others wait for a turn: the tests of a
/// bundle all start together, and hundreds of programs at once on two cores made the tests
/// that measure time (a stall timeout, an idle handle) fail.
public enum ChildProcess {
    /// How many programs run at once.
    public static let concurrentRuns = 3
    private static let turns = DispatchSemaphore(value: concurrentRuns)

    /// How a program ended.
    public enum Ending: Sendable, Equatable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signaled(Int32)
    }

    /// What a program printed, and how it ended.
    public struct Captured: Sendable {
        public var ending: Ending
        public var output: Data
        public var errorOutput: Data
    }

    /// Starts the program at `path` (absolute; not looked up on PATH) with `arguments`, standard
    /// input from /dev/null, standard output and error appended to the files at `output` and
    /// `error` (created when missing; the same path: one file for both), no other descriptor of
    /// this process, in `environment` (this process's when `nil`); returns its pid at once, for
    /// the caller to `waitpid`.
    /// - Throws: `CocoaError.executableLoad` when the program cannot be started.
    ///
    /// With `ownSession` the program leads a session (and process group) of its own, so that
    /// `kill(-pid, …)` reaches what it forks, and starts with no signal blocked and every
    /// signal's default action (this process's test threads block some, and a child inherits
    /// that).
    public static func spawn(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil, output: String, error: String,
        ownSession: Bool = false
    ) throws -> pid_t {
        var launch = ProgramLaunch(path: path, arguments: arguments)
        launch.environment = environment
        launch.standardOutput = .appending(output)
        launch.standardError = error == output ? .standardOutput : .appending(error)
        launch.ownSession = ownSession
        switch launch.start() {
        case .success(let pid): return pid
        case .failure(let failure):
            throw CocoaError(
                .executableLoad,
                userInfo: [NSLocalizedDescriptionKey: "cannot start \(path): \(failure)"])
        }
    }

    /// ``spawn(_:_:environment:output:error:)``, then waits for the program's end (and first
    /// for its turn) on the calling thread: call it off Swift's cooperative pool.
    /// - Throws: `CocoaError.executableLoad` when the program cannot be started.
    public static func run(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil, output: String, error: String
    ) throws -> Ending {
        turns.wait()
        defer { turns.signal() }
        let pid = try spawn(path, arguments, environment: environment, output: output, error: error)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { return .exited(-1) }
        }
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }

    /// The first line the program `pid` (spawned by ``spawn(_:_:environment:output:error:ownSession:)``)
    /// writes to the file at `url`, without its line end: what a daemon prints once it listens
    /// (an address). `nil` when the program ends first or 20 s pass. Blocking.
    public static func firstLine(of url: URL, whileRunning pid: pid_t) -> String? {
        for _ in 0..<400 {
            if let text = try? String(contentsOf: url, encoding: .utf8), text.hasSuffix("\n") {
                let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
                return line.isEmpty ? nil : line
            }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { return nil }
            usleep(50_000)
        }
        return nil
    }

    /// Kills the child `pid` with SIGKILL and reaps it (a server a test started and stops).
    public static func killAndReap(_ pid: pid_t) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }

    /// ``run(_:_:environment:output:error:)`` with the output and error going to files of a
    /// temporary folder, read whole and removed at the end.
    /// - Throws: `CocoaError.executableLoad` when the program cannot be started; the error of
    ///   creating the temporary folder.
    public static func capture(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> Captured {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("out").path
        let error = folder.appendingPathComponent("err").path
        let ending = try run(path, arguments, environment: environment, output: output, error: error)
        return Captured(
            ending: ending, output: FileManager.default.contents(atPath: output) ?? Data(),
            errorOutput: FileManager.default.contents(atPath: error) ?? Data())
    }
}
