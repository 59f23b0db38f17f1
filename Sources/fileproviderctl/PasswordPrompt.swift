import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a password: typed at the terminal that is standard input, with echo off, or one line
/// of standard input when it is not a terminal (`printf %s "$pw" | fileproviderctl domain set
/// NAME --password`). The prompt goes to standard error. Reading waits on a thread of its own.
enum PasswordPrompt {
    private static let reader = BlockingExecutor(name: "password-prompt", threads: 1)

    /// Whether standard input is a terminal (a prompt can be answered).
    static var isTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Shows `prompt` and reads the password typed (without its newline). On a terminal echo
    /// is off while it is typed and back on afterwards, also when the command is interrupted.
    ///
    /// - Throws: `cancelled` when the command is interrupted (Ctrl-C) or input ends before a
    ///   newline on a terminal (Ctrl-D); `invalidArgument` when standard input is empty or is
    ///   not text; `localIOFailure` when it cannot be read.
    static func read(_ prompt: String) async throws(FileProviderError) -> String {
        let flag = CancellationFlag()
        return try await withCancellationFlag(flag) { () async throws(FileProviderError) -> String in
            try await reader.runEvenIfCancelled { try readBlocking(prompt, flag: flag) }
        }
    }

    private static func readBlocking(_ prompt: String, flag: CancellationFlag) throws(FileProviderError) -> String {
        let terminal = isTerminal
        var saved = termios()
        var restored = true
        if terminal, tcgetattr(STDIN_FILENO, &saved) == 0 {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            if tcsetattr(STDIN_FILENO, TCSANOW, &quiet) == 0 { restored = false }
        }
        defer {
            if !restored { _ = tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
        }
        if terminal { FileHandle.standardError.write(Data(prompt.utf8)) }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            // Wait for input a fifth of a second at a time, so Ctrl-C (which cancels the
            // command) is seen while nothing is typed.
            var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 200)
            if flag.isCancelled { throw FileProviderError(.cancelled, "interrupted at the password prompt") }
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { continue }
            let count = Glibc.read(STDIN_FILENO, &byte, 1)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileProviderError(.localIOFailure, "cannot read the password: \(String(cString: strerror(errno)))")
            }
            if count == 0 || byte == UInt8(ascii: "\n") {
                if count == 0 && terminal {
                    throw FileProviderError(.cancelled, "no password was typed (input ended)")
                }
                break
            }
            bytes.append(byte)
            guard bytes.count <= 4096 else { throw FileProviderError(.invalidArgument, "the password is longer than 4096 bytes") }
        }
        // The terminal shows the newline typed (ECHONL); an error output elsewhere gets its own.
        if terminal && isatty(STDERR_FILENO) == 0 { FileHandle.standardError.write(Data("\n".utf8)) }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw FileProviderError(.invalidArgument, "the password is not UTF-8 text")
        }
        guard !text.isEmpty else { throw FileProviderError(.invalidArgument, "the password is empty") }
        return text
    }
}
