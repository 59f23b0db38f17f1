import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What a program that is not ours did: its exit status, output and error text.
struct ProgramRun: CustomStringConvertible {
    var status: Int32
    var output: Data
    var errorText: String
    var timedOut: Bool { status == 124 }
    var succeeded: Bool { status == 0 }
    var description: String { "exit \(status), \(output.count) bytes out, stderr: \(errorText.suffix(400))" }
}

/// Runs `arguments` (a program and its arguments, found on PATH) under `timeout(1)`, off the
/// cooperative pool; its output is captured whole.
func runProgram(_ arguments: [String], timeout: Double = 60) async throws -> ProgramRun {
    try await offThePool {
        let run = try ChildProcess.capture("/usr/bin/timeout", ["-s", "KILL", String(Int(timeout.rounded(.up)))] + arguments)
        let status: Int32
        switch run.ending {
        case .exited(let code): status = code
        case .signaled: status = 124
        }
        return ProgramRun(status: status, output: run.output, errorText: String(decoding: run.errorOutput, as: UTF8.self))
    }
}

/// Whether `path` is a mount point now (from this process's mount table).
func isMountPoint(_ path: String) -> Bool {
    guard let table = readProcFile("/proc/self/mountinfo") else { return false }
    let escaped = path.replacingOccurrences(of: "\\", with: "\\134").replacingOccurrences(of: " ", with: "\\040")
    return table.split(separator: "\n").contains { line in
        let fields = line.split(separator: " ")
        return fields.count > 4 && fields[4] == escaped
    }
}

/// `stat` of a path, or `nil`.
func fileStatus(_ path: String) -> stat? {
    var status = stat()
    return stat(path, &status) == 0 ? status : nil
}

/// Bytes that differ from file to file.
func patterned(_ count: Int, seed: UInt64) -> Data {
    var generator = CrashTests.Generator(state: seed &+ 0x9E37_79B9_7F4A_7C15)
    var bytes = [UInt8](repeating: 0, count: count)
    for index in 0..<count { bytes[index] = UInt8(truncatingIfNeeded: generator.next()) }
    return Data(bytes)
}

/// How programs reach a dataless domain's files (`domain add --on-access`): the program suites
/// run against each.
enum OnAccessLayout: String, CaseIterable, CustomStringConvertible {
    case fanotify, fuse
    var description: String { rawValue }
}

/// A dataless domain served by the real `fileproviderctl serve`: its store, replica path
/// (where programs see the files) and backing folder.
final class ServedDomain {
    enum Store: String, CaseIterable, CustomStringConvertible {
        case local, sftp, media
        var description: String { rawValue }
    }

    let temp: TemporaryFolder
    let cli: CLIRunner
    let name = "d"
    let replica: String
    var backing: String { cli.home.path + "/replicas/" + name }
    /// Writes a file into the store (the store's own folder, as its server sees it).
    let storeFolder: String
    private(set) var serve: ServeProcess?
    private var serveCount = 0

    /// How programs reach its files.
    let layout: OnAccessLayout

    /// Adds a dataless domain on `storeFolder` with the backend options `options`, reached
    /// through `layout`, writes `files` into the store, and syncs (every file is dataless then).
    init(
        temp: TemporaryFolder, storeFolder: String, backend: String, options: [String: String], files: [String: Data],
        addArguments: [String] = [], layout: OnAccessLayout = .fanotify
    ) async throws {
        self.layout = layout
        self.temp = temp
        self.storeFolder = storeFolder
        cli = CLIRunner(in: temp)
        replica = temp.url.appendingPathComponent("replica").path
        for (path, contents) in files { try write(path, contents) }
        let add =
            ["domain", "add", name, "--backend", backend, "--mode", "dataless", "--replica", replica]
            + ["--on-access", layout.rawValue] + addArguments + options.sorted { $0.key < $1.key }.flatMap { ["--\($0.key)", $0.value] }
        let added = try await cli.run(add)
        guard added.status == 0 else { throw CLIError(result: added) }
        let synced = try await cli.run(["sync", name])
        guard synced.status == 0 else { throw CLIError(result: synced) }
    }

    /// Writes a file of the store.
    func write(_ relative: String, _ contents: Data) throws {
        let url = URL(fileURLWithPath: storeFolder + "/" + relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: url)
    }

    /// A file of the store, or `nil`.
    func stored(_ relative: String) -> Data? { FileManager.default.contents(atPath: storeFolder + "/" + relative) }

    /// Starts `serve` and waits until the replica path shows the files.
    func startServe(_ extra: [String] = []) async throws {
        serveCount += 1
        let log = temp.url.appendingPathComponent("serve-\(serveCount).log")
        let started = try ServeProcess(cli, [name, "--poll-interval", "60"] + extra, log: log)
        serve = started
        // A FUSE mount must also answer: a dead one left by the serve killed before (FUSE.md)
        // is a mount point too until the new serve detaches it and mounts again.
        let mounted = await waitUntil(timeout: 30) {
            guard started.process.isRunning else { return true }
            return isMountPoint(self.replica) && (self.layout != .fuse || self.lookupError() == ENOENT)
        }
        try #require(mounted && started.process.isRunning, "serve did not mount \(replica): \(started.output)")
    }

    /// The error of a lookup of a name never looked up in the replica's root: `ENOENT` from a
    /// served mount, `ENOTCONN` or `ECONNABORTED` from a dead FUSE mount. (`access()` of the root
    /// is answered from cached attributes even when no one serves the mount.)
    private func lookupError() -> Int32 {
        var status = stat()
        return lstat(replica + "/.fpk-probe-\(UUID().uuidString)", &status) == 0 ? 0 : errno
    }

    /// kill -9 of `serve`, then waits until its guardian (fanotify) or `fusermount3` (FUSE's
    /// `auto_unmount`) took the mount away. A FUSE mount that `fusermount3` lost the race for
    /// (FUSE.md) stays dead (`ENOTCONN`, or `ECONNABORTED` once the connection was aborted)
    /// until the next `serve` detaches it: that is accepted.
    func killServe() async throws {
        guard let serve else { return }
        _ = await serve.stop(SIGKILL, timeout: 30)
        var lastError: Int32 = 0
        let detached = await waitUntil(timeout: 30) {
            guard isMountPoint(self.replica) else { return true }
            guard self.layout == .fuse else { return false }
            let error = self.lookupError()
            lastError = error == ENOENT ? 0 : error
            return lastError == ENOTCONN || lastError == ECONNABORTED
        }
        try #require(
            detached,
            "\(replica) is still served after kill -9 (a lookup: \(lastError == 0 ? "answered" : String(cString: strerror(lastError))))")
    }

    /// Stops `serve` cleanly (SIGTERM) and checks the mount is gone.
    func stopServe() async throws {
        guard let serve else { return }
        let status = await serve.stop(SIGTERM, timeout: 30)
        #expect(status == 0, "serve: \(serve.output.suffix(2000))")
        #expect(!isMountPoint(replica))
        self.serve = nil
    }

    /// Every serve log so far.
    var logs: String {
        (1...max(1, serveCount)).map {
            (try? String(contentsOf: temp.url.appendingPathComponent("serve-\($0).log"), encoding: .utf8)) ?? ""
        }.joined(separator: "\n")
    }

    /// How many times the log says `path` was fetched on access.
    func fetches(of path: String) -> Int {
        logs.components(separatedBy: "\n").filter { $0.contains(": \(path): fetched on access") }.count
    }

    /// ``fetches(of:)`` once it reached `expected` (or after 30 s): a progressive fill says it
    /// fetched the file when it completes, which a read that found every byte it asked for
    /// does not wait for.
    func fetches(of path: String, reaching expected: Int) async -> Int {
        _ = await waitUntil(timeout: 30) { self.fetches(of: path) >= expected }
        return fetches(of: path)
    }

    deinit {
        if let serve { _ = serve.process.isRunning ? kill(serve.process.processIdentifier, SIGKILL) : 0 }
        serve?.exit.wait()
        // The guardian detaches the mount once serve is gone; never leave it mounted.
        for _ in 0..<50 where isMountPoint(replica) { usleep(100_000) }
        if isMountPoint(replica) { _ = umount2(replica, Int32(MNT_DETACH)) }
        if layout == .fuse && isMountPoint(replica) { _ = try? ChildProcess.capture("/usr/bin/fusermount3", ["-u", "-z", replica]) }
    }
}
