import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// How to reach a host through another program, from the ssh configuration: `ProxyCommand`,
/// run by the shell as `ssh` runs it, or `ProxyJump`, run as `ssh -W [host]:port jump` (earlier
/// hops of a chain go to `-J`), as `ssh` itself does.
struct ProxyCommand: Sendable, Hashable {
    /// The program and its arguments; the first is an absolute path.
    var arguments: [String]
    /// What the user configured, for messages: "ProxyJump bastion", "ProxyCommand `nc h 22`".
    var summary: String
    /// What to check when the proxy fails, for messages.
    var hint: String

    /// A program to run as it is (`arguments[0]` an absolute path).
    init(arguments: [String], summary: String, hint: String) {
        self.arguments = arguments
        self.summary = summary
        self.hint = hint
    }

    /// A `ProxyCommand` (its tokens already expanded), run as `$SHELL -c "exec COMMAND"`.
    init(shellCommand: String, environment: [String: String]) {
        let shell = environment["SHELL"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/bin/sh"
        arguments = [shell, "-c", "exec " + shellCommand]
        summary = "ProxyCommand `\(shellCommand)`"
        hint = "check the ProxyCommand in the ssh configuration"
    }

    /// A `ProxyJump` as `ssh -G` prints it (`[user@]host[:port]`, a numeric host in brackets,
    /// hops separated by commas) to `host`:`port`.
    ///
    /// The jump runs with `BatchMode=yes`: it cannot ask for a passphrase or a host key
    /// confirmation, so it fails with a message instead of waiting for an answer nobody gives.
    ///
    /// - Throws: `invalidArgument` for a hop that cannot be read.
    init(jump: String, to host: String, port: Int, ssh: String, configFile: String?) throws(FileProviderError) {
        let hops = jump.split(separator: ",").map(String.init)
        guard let last = hops.last, !last.isEmpty else {
            throw FileProviderError(.invalidArgument, "the ProxyJump \(jump.debugDescription) names no host")
        }
        let hop = try Self.hop(last, in: jump)
        var options: [String] = []
        if let configFile { options += ["-F", configFile] }
        if let user = hop.user { options += ["-l", user] }
        if let hopPort = hop.port { options += ["-p", String(hopPort)] }
        if hops.count > 1 { options += ["-J", hops.dropLast().joined(separator: ",")] }
        arguments = [ssh, "-o", "BatchMode=yes"] + options + ["-W", "[\(host)]:\(port)", "--", hop.host]
        summary = "ProxyJump \(jump)"
        let test = (["ssh"] + options + [hop.host]).joined(separator: " ")
        hint =
            "check that `\(test)` works on its own without a prompt (the jump runs with BatchMode=yes: an agent or a key without a passphrase, the jump host's key in its known_hosts)"
    }

    /// `[user@]host[:port]` or `[user@][host]:port`.
    static func hop(_ text: String, in jump: String) throws(FileProviderError) -> (user: String?, host: String, port: Int?) {
        let bad = FileProviderError(
            .invalidArgument, "the ProxyJump \(jump.debugDescription) has a hop that cannot be read: \(text.debugDescription)")
        var rest = Substring(text)
        var user: String?
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        var port: Int?
        if let portText {
            guard SSHHostConfig.isPort(portText), let number = Int(portText) else { throw bad }
            port = number
        }
        guard SSHHostConfig.isName(String(host), limit: 1025), user.map({ SSHHostConfig.isName($0, limit: 256) }) ?? true
        else { throw bad }
        return (user, String(host), port)
    }
}

/// A running proxy, and our end of the socket pair its standard input and output are connected
/// to: libssh2 speaks SSH over that end as over a TCP connection.
///
/// The proxy runs in a session and process group of its own. Closing (or freeing) the
/// connection closes our end and stops the group, `SIGTERM` then `SIGKILL`, and reaps it. The
/// proxy's standard error goes to an unlinked temporary file, so a proxy that dies can be
/// reported with its last message.
///
/// Blocking: used on a connection's thread.
final class ProxyConnection {
    let command: ProxyCommand
    /// Our end of the socket pair.
    let socket: Int32
    private let process: Subprocess
    private let errorFile: Int32
    private var isClosed = false

    /// Starts the proxy.
    ///
    /// - Throws: `serverUnreachable` when it cannot be started (the reason).
    init(_ command: ProxyCommand) throws(FileProviderError) {
        self.command = command
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw FileProviderError(
                .serverUnreachable, "cannot start the \(command.summary): socketpair: \(String(cString: strerror(errno)))")
        }
        let errorFile = Self.temporaryFile()
        do {
            process = try Subprocess(command.arguments, standardInput: pair[1], standardOutput: pair[1], standardError: errorFile)
        } catch {
            Glibc.close(pair[0])
            Glibc.close(pair[1])
            if errorFile >= 0 { Glibc.close(errorFile) }
            guard case .cannotStart(let reason) = error else {
                throw FileProviderError(.serverUnreachable, "cannot start the \(command.summary)")
            }
            throw FileProviderError(.serverUnreachable, "cannot start the \(command.summary): \(command.arguments[0]): \(reason)")
        }
        Glibc.close(pair[1])
        socket = pair[0]
        self.errorFile = errorFile
    }

    deinit { close() }

    /// Closes our end of the socket pair and stops the proxy and what it started.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(socket)
        // Without its input the proxy usually exits at once; SIGTERM and SIGKILL otherwise.
        process.stop(grace: 2)
        if errorFile >= 0 { Glibc.close(errorFile) }
    }

    /// How the proxy ended, if it has, waiting up to `seconds` for it.
    func ending(waiting seconds: Double) -> Subprocess.Ending? { process.wait(seconds: seconds) }

    /// A clause for an error message: how the proxy ended (waiting up to `seconds` for it) and
    /// the last line of its standard error; or that it still runs.
    func diagnosis(waiting seconds: Double) -> String {
        let line = lastErrorLine()
        if let ending = process.wait(seconds: seconds) {
            return "the \(command.summary) exited with \(ending)" + (line.map { ": \($0)" } ?? " and printed nothing")
        }
        return "the \(command.summary) is still running" + (line.map { "; its last message: \($0)" } ?? "")
    }

    /// The last line the proxy printed on its standard error.
    func lastErrorLine() -> String? {
        guard errorFile >= 0 else { return nil }
        var info = stat()
        guard fstat(errorFile, &info) == 0, info.st_size > 0 else { return nil }
        let count = Int(min(Int64(Subprocess.errorTail), Int64(info.st_size)))
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { pread(errorFile, $0.baseAddress, count, off_t(info.st_size) - off_t(count)) }
        guard read > 0 else { return nil }
        return Subprocess.lastLine(of: Array(bytes.prefix(read)))
    }

    /// An unlinked temporary file, or -1 (then the proxy's standard error goes to /dev/null).
    private static func temporaryFile() -> Int32 {
        var template = Array((NSTemporaryDirectory() + "/fileprovider-proxy-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { return -1 }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return descriptor
    }
}
