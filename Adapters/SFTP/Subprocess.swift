import CLibSSH2
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A program the adapter starts: `ssh -G` to resolve a host, a proxy command to reach one.
///
/// Started with `posix_spawn` in a session of its own (no controlling terminal, so it cannot
/// stop on a password prompt; its own process group, so stopping it stops what it started too),
/// with only the descriptors it is given and default signal handling. Every wait is bounded (a
/// pidfd polled with a timeout) and the process is always reaped: ``stop(grace:)`` ends it, and
/// `deinit` stops one still running.
///
/// Blocking: used on the adapter's own threads (a connection's thread), never on Swift's
/// cooperative pool.
final class Subprocess {
    /// How a program ended.
    enum Ending: Equatable, CustomStringConvertible {
        case exited(Int32)
        case signaled(Int32)
        /// Reaped by someone else (`SIGCHLD` ignored); the status is unknown.
        case unknown

        var description: String {
            switch self {
            case .exited(let code): return "exit status \(code)"
            case .signaled(let signal): return "signal \(signal)"
            case .unknown: return "an unknown status"
            }
        }
    }

    /// Why ``run(_:timeout:outputLimit:)`` gave up.
    enum Failure: Error, Equatable {
        /// The program could not be started (the reason).
        case cannotStart(String)
        /// It did not end within the timeout (it was stopped).
        case timedOut
        /// It printed more than the limit on its standard output (it was stopped).
        case tooMuchOutput
    }

    /// What a program printed and how it ended.
    struct Captured {
        var ending: Ending
        var output: [UInt8]
        /// The last ``errorTail`` bytes of its standard error.
        var errorOutput: [UInt8]
    }

    /// How many bytes of a program's standard error are kept (the end).
    static let errorTail = 4096

    let pid: pid_t
    /// A descriptor that becomes readable when the process ends; -1 when the kernel has none.
    private let pidfd: Int32
    private(set) var ending: Ending?

    /// Starts `arguments[0]` (an absolute path) with `arguments`, in this process's environment.
    ///
    /// - Parameters:
    ///   - standardInput, standardOutput, standardError: descriptors the program gets as 0, 1
    ///     and 2 (the same one may be given twice); -1 means `/dev/null`.
    /// - Throws: ``Failure/cannotStart(_:)`` with the reason.
    init(_ arguments: [String], standardInput: Int32, standardOutput: Int32, standardError: Int32)
        throws(Failure)
    {
        precondition(!arguments.isEmpty)
        func stream(_ descriptor: Int32) -> ProgramLaunch.Stream { descriptor < 0 ? .null : .descriptor(descriptor) }
        var launch = ProgramLaunch(path: arguments[0], arguments: Array(arguments.dropFirst()))
        launch.standardInput = stream(standardInput)
        launch.standardOutput = stream(standardOutput)
        launch.standardError = stream(standardError)
        switch launch.start() {
        case .success(let pid): self.pid = pid
        case .failure(let error): throw .cannotStart(error.description)
        }
        pidfd = pidfd_open(pid, 0)
    }

    deinit {
        if ending == nil { _ = stop(grace: 1) }
        if pidfd >= 0 { close(pidfd) }
    }

    /// Reaps the process if it has ended.
    private func reap(blocking: Bool) -> Ending? {
        if let ending { return ending }
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if result == pid { break }
            if result == 0 { return nil }
            if errno == EINTR { continue }
            ending = .unknown
            return ending
        }
        let signal = status & 0x7f
        ending = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
        return ending
    }

    /// Waits up to `seconds` for the process to end; its ending, or `nil` while it still runs.
    func wait(seconds: Double) -> Ending? {
        let deadline = Date().addingTimeInterval(max(0, seconds))
        while true {
            if let ending = reap(blocking: false) { return ending }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return nil }
            let milliseconds = Int32(min(left * 1000, 60_000).rounded(.up))
            if pidfd >= 0 {
                var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, milliseconds)
            } else {
                // A kernel without pidfds (before 5.3): look again in a while.
                _ = poll(nil, 0, min(milliseconds, 10))
            }
        }
    }

    /// Ends the program and what it started (its process group): `SIGTERM`, then `SIGKILL`
    /// after `grace` seconds; returns once it is reaped.
    @discardableResult
    func stop(grace: Double = 2) -> Ending {
        if let ending = reap(blocking: false) { return ending }
        // Signals go to the group only while its leader is not reaped, so the id is still ours.
        kill(-pid, SIGTERM)
        if let ending = wait(seconds: grace) { return ending }
        kill(-pid, SIGKILL)
        return reap(blocking: true) ?? .unknown
    }

    /// Runs a program to its end with its standard input from `/dev/null`, collecting its
    /// standard output (up to `outputLimit` bytes) and the end of its standard error.
    ///
    /// - Throws: ``Failure/cannotStart(_:)``; ``Failure/timedOut`` when it has not ended (and
    ///   closed its output) within `timeout` seconds; ``Failure/tooMuchOutput`` past
    ///   `outputLimit` bytes. In both of the last cases the program was stopped.
    static func run(_ arguments: [String], timeout: Double, outputLimit: Int) throws(Failure) -> Captured {
        var outPipe: [Int32] = [-1, -1]
        var errorPipe: [Int32] = [-1, -1]
        guard Self.pipe(&outPipe) else { throw .cannotStart(String(cString: strerror(errno))) }
        guard Self.pipe(&errorPipe) else {
            let reason = String(cString: strerror(errno))
            close(outPipe[0])
            close(outPipe[1])
            throw .cannotStart(reason)
        }
        let process: Subprocess
        do {
            process = try Subprocess(arguments, standardInput: -1, standardOutput: outPipe[1], standardError: errorPipe[1])
        } catch {
            for descriptor in outPipe + errorPipe { close(descriptor) }
            throw error
        }
        close(outPipe[1])
        close(errorPipe[1])
        defer {
            close(outPipe[0])
            close(errorPipe[0])
        }
        var output: [UInt8] = []
        var errorOutput: [UInt8] = []
        var open = [outPipe[0], errorPipe[0]]
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 16384)
        while !open.isEmpty {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 {
                process.stop(grace: 0.5)
                throw .timedOut
            }
            var entries = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&entries, nfds_t(entries.count), Int32(min(left * 1000, 60_000).rounded(.up)))
            if ready < 0 && errno != EINTR { break }
            for entry in entries where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                if count <= 0 {
                    open.removeAll { $0 == entry.fd }
                    continue
                }
                if entry.fd == outPipe[0] {
                    output += buffer[0..<count]
                    if output.count > outputLimit {
                        process.stop(grace: 0.5)
                        throw .tooMuchOutput
                    }
                } else {
                    errorOutput += buffer[0..<count]
                    if errorOutput.count > 2 * errorTail { errorOutput.removeFirst(errorOutput.count - errorTail) }
                }
            }
        }
        guard let ending = process.wait(seconds: max(0.1, deadline.timeIntervalSinceNow)) else {
            process.stop(grace: 0.5)
            throw .timedOut
        }
        if errorOutput.count > errorTail { errorOutput.removeFirst(errorOutput.count - errorTail) }
        return Captured(ending: ending, output: output, errorOutput: errorOutput)
    }

    /// A pipe whose ends are closed on exec (`pipe2` is not in Swift's Glibc module; the
    /// programs started here get only the descriptors they are given anyway).
    private static func pipe(_ ends: inout [Int32]) -> Bool {
        guard Glibc.pipe(&ends) == 0 else { return false }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return true
    }

    /// The last non-empty line of a program's standard error, made printable (control
    /// characters replaced, at most 300 characters), or `nil`.
    static func lastLine(of bytes: [UInt8]) -> String? { lastLines(of: bytes, count: 1) }

    /// The last `count` non-empty lines of a program's standard error, made printable (control
    /// characters replaced, each at most 300 characters), joined with "; ", or `nil`.
    static func lastLines(of bytes: [UInt8], count: Int) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let lines = text.split(whereSeparator: \.isNewline).map { line -> String in
            let printable = String(
                line.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : Character($0) })
            let trimmed = printable.trimmingCharacters(in: .whitespaces)
            return trimmed.count > 300 ? String(trimmed.prefix(300)) + "…" : trimmed
        }.filter { !$0.isEmpty }
        guard !lines.isEmpty else { return nil }
        return lines.suffix(count).joined(separator: "; ")
    }
}
