import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Folders for one on-access test: `backing` (the files, sparse until filled), `replica` (where
/// the test mounts `backing`), `store` (the contents the listener fills files with) and `run`
/// (the guardian's folder), under `<tmp>/fp-precontent-<pid>-<uuid>`. ``remove()`` detaches
/// whatever is still mounted at `replica` before it deletes anything, and a new lab detaches
/// what labs of dead test processes left mounted.
final class PreContentLab: @unchecked Sendable {
    let root: String
    var backing: String { root + "/backing" }
    var replica: String { root + "/replica" }
    var store: String { root + "/store" }
    var run: String { root + "/run" }

    private static let prefix = "fp-precontent-"

    init() throws {
        let temporary = URL(fileURLWithPath: NSTemporaryDirectory()).standardizedFileURL.path
        Self.detachLeftovers(in: temporary)
        root = "\(temporary)/\(Self.prefix)\(getpid())-\(UUID().uuidString.prefix(8))"
        for folder in [backing, replica, store, run] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
    }

    /// Writes `contents` to the store and a sparse file of the same size (no blocks) under the
    /// same name to the backing folder. A new inode each time: no ignore mark of an earlier one
    /// applies.
    func makeDataless(_ name: String, _ contents: Data) throws {
        try contents.write(to: URL(fileURLWithPath: store + "/" + name))
        let path = backing + "/" + name
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXError.error("cannot create", path: path) }
        defer { close(fd) }
        guard ftruncate(fd, off_t(contents.count)) == 0 else { throw POSIXError.error("cannot size", path: path) }
    }

    /// `stat` of a path.
    func status(_ path: String) -> stat? {
        var status = stat()
        return stat(path, &status) == 0 ? status : nil
    }

    /// The inode of a backing file.
    func inode(_ name: String) -> UInt64 { UInt64(status(backing + "/" + name)?.st_ino ?? 0) }

    /// Waits (at most 30 s) until the listener's first logged event is of the file `name`.
    func listenerSawEvent(of name: String) async -> Bool {
        let inode = self.inode(name)
        let log = root + "/events.log"
        return await eventually(timeout: 30) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").hasPrefix("\(inode) ")
        }
    }

    /// Detaches every mount at the replica folder, then deletes the lab.
    func remove() {
        for _ in 0..<8 where ReplicaMount.isMountPoint(replica) { _ = fp_test_detach(replica) }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Detaches mounts that labs of test processes no longer running left in `folder` (a test
    /// run killed before its cleanup).
    private static func detachLeftovers(in folder: String) {
        guard let table = readProcFile("/proc/self/mountinfo") else { return }
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4 else { continue }
            let point = String(fields[4])
            guard point.hasPrefix(folder + "/" + prefix) else { continue }
            let rest = point.dropFirst(folder.count + 1 + prefix.count)
            guard let pid = Int32(rest.prefix(while: { $0.isNumber })), pid != getpid(), kill(pid, 0) != 0 else { continue }
            _ = fp_test_detach(point)
        }
    }
}

/// `umount2(path, MNT_DETACH)` for the tests' cleanup.
func fp_test_detach(_ path: String) -> Int32 { umount2(path, Int32(MNT_DETACH)) }

/// What a program did.
struct ProgramOutcome: Sendable, CustomStringConvertible {
    var status: Int32
    /// Whether it ended by a signal (`status` is then the signal).
    var signaled: Bool
    var output: Data
    var errorText: String
    var timedOut: Bool

    var succeeded: Bool { !signaled && !timedOut && status == 0 }
    var description: String {
        "\(signaled ? "signal" : "exit") \(status)\(timedOut ? " (timed out)" : ""), \(output.count) bytes out, stderr: \(errorText)"
    }
}

/// Runs a program (not ours: `cat`, `cmp`, `python3`, ...) to its end, off the cooperative pool,
/// with its output in files (a pipe could fill up); kills it after `timeout` seconds.
func runProgram(_ arguments: [String], timeout: Double = 60) async throws -> ProgramOutcome {
    let started = try startProgram(arguments)
    return try await started.finish(timeout: timeout)
}

/// A program started by ``startProgram(_:)``.
final class StartedProgram: @unchecked Sendable {
    let process: TestProcess
    let exit: ProcessExit
    let outputPath: String
    let errorPath: String

    init(process: TestProcess, exit: ProcessExit, outputPath: String, errorPath: String) {
        self.process = process
        self.exit = exit
        self.outputPath = outputPath
        self.errorPath = errorPath
    }

    /// Waits for the end (killing it after `timeout` seconds) and collects what it wrote.
    func finish(timeout: Double = 60) async throws -> ProgramOutcome {
        let ended = try await offThePool { [exit] in exit.wait(seconds: timeout) }
        if !ended {
            kill(process.processIdentifier, SIGKILL)
            _ = try await offThePool { [exit] in exit.wait(seconds: 10) }
        }
        defer {
            unlink(outputPath)
            unlink(errorPath)
        }
        // A program still running after SIGKILL (stuck in the kernel) is reported, never read
        // as ended: Foundation traps when asked for the status of a running process.
        let termination = exit.termination
        return ProgramOutcome(
            status: termination?.status ?? -1, signaled: termination?.signaled ?? false,
            output: FileManager.default.contents(atPath: outputPath) ?? Data(),
            errorText: (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "", timedOut: !ended)
    }
}

/// Starts a program with its output going to temporary files.
func startProgram(_ arguments: [String], environment: [String: String] = [:]) throws -> StartedProgram {
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    var merged = ProcessInfo.processInfo.environment
    for (key, value) in environment { merged[key] = value }
    process.environment = merged
    let base = NSTemporaryDirectory() + "/fp-program-\(UUID().uuidString)"
    let (outputPath, errorPath) = (base + ".out", base + ".err")
    _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
    process.standardOutput = FileHandle(forWritingAtPath: outputPath)
    process.standardError = FileHandle(forWritingAtPath: errorPath)
    process.standardInput = FileHandle.nullDevice
    let exit = ProcessExit(process)
    try process.run()
    return StartedProgram(process: process, exit: exit, outputPath: outputPath, errorPath: errorPath)
}

/// Deterministic bytes that are never all zeros in a page.
func patterned(_ count: Int, seed: UInt8) -> Data {
    var bytes = [UInt8](repeating: 0, count: count)
    var state = UInt32(seed) &* 2_654_435_761 &+ 1
    for index in 0..<count {
        state = state &* 1_103_515_245 &+ 12345
        bytes[index] = UInt8(truncatingIfNeeded: state >> 16) | 1
    }
    return Data(bytes)
}

/// The programs that read a file in the tests, each printing what it read (or failing).
enum Reader: String, CaseIterable, Sendable {
    case cat, cmp, python, tail, mmap

    /// The command for the file at `path` (`expected` is the store's copy, for `cmp`).
    func command(path: String, expected: String) -> [String] {
        switch self {
        case .cat: return ["cat", path]
        case .cmp: return ["cmp", path, expected]
        case .python: return ["python3", "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", path]
        case .tail: return ["tail", "-c", "10", path]
        case .mmap:
            return [
                "python3", "-c",
                "import mmap, os, sys\nf = open(sys.argv[1], 'rb')\nif os.fstat(f.fileno()).st_size:\n    sys.stdout.buffer.write(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)[:])",
                path,
            ]
        }
    }

    /// What it prints when it read `contents` right.
    func expectedOutput(_ contents: Data) -> Data {
        switch self {
        case .cmp: return Data()
        case .tail: return contents.suffix(10)
        default: return contents
        }
    }

    /// Whether `outcome` shows no wrong byte: a success that printed exactly the right output,
    /// or a failure that printed nothing wrong (a prefix of the right output; for `cmp`, any
    /// exit but 1, "differ").
    func neverWrong(_ outcome: ProgramOutcome, contents: Data) -> Bool {
        let expected = expectedOutput(contents)
        if self == .cmp { return outcome.timedOut == false && !(outcome.status == 1 && !outcome.signaled) }
        if outcome.timedOut { return false }
        if outcome.succeeded { return outcome.output == expected }
        return outcome.output.count <= expected.count && outcome.output == expected.prefix(outcome.output.count)
    }
}
