import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// Printing helpers shared by the commands.
enum Output {
    static let isTerminal = isatty(STDERR_FILENO) == 1

    /// Writes `error: MESSAGE`; characters of the message that must not reach a terminal (from a
    /// name in it) are escaped (``TerminalText/escaped(_:)``).
    static func error(_ message: String) {
        FileHandle.standardError.write(Data("error: \(TerminalText.escaped(message))\n".utf8))
    }

    /// Writes `warning: MESSAGE`, escaped as ``error(_:)``.
    static func warning(_ message: String) {
        FileHandle.standardError.write(Data("warning: \(TerminalText.escaped(message))\n".utf8))
    }

    /// An item's `DOMAIN:/path` (or a path) for text output: as it is, or quoted as GNU `ls`
    /// quotes it when it holds characters that must not reach a terminal
    /// (``TerminalText/quoted(_:)``). JSON output never goes through this.
    static func name(_ name: String) -> String { TerminalText.quoted(name) }

    /// Free text that may hold a name (a reason, an error stored in the database), escaped for a
    /// terminal (``TerminalText/escaped(_:)``).
    static func text(_ text: String) -> String { TerminalText.escaped(text) }

    /// Writes to standard output in one call.
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Prints a value as JSON.
    static func json<T: Encodable>(_ value: T) throws {
        var data = try jsonEncoder().encode(value)
        data.append(0x0a)
        FileHandle.standardOutput.write(data)
    }

    /// The encoder of every JSON output (``JSONText/encoder()``, as `serve`'s D-Bus interface).
    static func jsonEncoder() -> JSONEncoder { JSONText.encoder() }

    /// A date as every JSON output writes it (``JSONText/date(_:)``).
    static func jsonDate(_ date: Date) -> String { JSONText.date(date) }

    /// `1.5 KiB`, `3.0 MiB` (``ByteCount/format(_:)``).
    static func bytes(_ count: Int64) -> String { ByteCount.format(count) }

    /// `text` followed by spaces up to `width` characters; longer text is returned whole. (Not
    /// Foundation's `padding(toLength:withPad:startingAt:)`: it bridges through `NSString`, a
    /// fifth of `ls`'s time for a 10,000-item folder, and cuts longer text.)
    static func padded(_ text: String, to width: Int) -> String {
        let count = text.count
        return count >= width ? text : text + String(repeating: " ", count: width - count)
    }

    /// A budget in binary units (`20.0 GiB`), or `none`.
    static func budget(_ bytes: Int64?) -> String {
        bytes.map { Output.bytes($0) } ?? "none"
    }

    /// `2026-11-21 14:03` in local time, without DateFormatter (slow for many rows).
    static func date(_ date: Date?) -> String {
        guard let date else { return "-" }
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `14:03:05` in local time.
    static func clock(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 16)
        let count = strftime(&buffer, buffer.count, "%H:%M:%S", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Prints failed outcomes; throws `CommandFailure` when any failed.
    ///
    /// After SIGINT or SIGTERM (see ``Interruption``) the outcomes the interruption stopped
    /// (`cancelled`) are not failures: standard error gets one line saying what was done and
    /// what was not (`interrupted: 120 of 500 items materialized; 380 not done; run the same
    /// command again to finish`), and `CommandInterrupted` is thrown.
    ///
    /// `jsonObject` wraps the rows `--json` prints in another value (`policy` prints the
    /// policies set beside them).
    static func finish(
        _ outcomes: [ItemOutcome], verb: String, json: Bool, jsonObject: (([OutcomeJSON]) -> any Encodable)? = nil
    ) throws {
        let interrupted = Interruption.shared.signal != nil
        // Plain loops: closures over the outcomes here crashed the release build's optimizer
        // (Swift 6.3.1, CopyPropagation).
        var failed: [ItemOutcome] = []
        var notDone: [ItemOutcome] = []
        for outcome in outcomes {
            guard let code = outcome.error?.code else { continue }
            if interrupted && code == .cancelled { notDone.append(outcome) } else { failed.append(outcome) }
        }
        if json {
            var rows: [OutcomeJSON] = []
            for outcome in outcomes {
                rows.append(
                    OutcomeJSON(path: outcome.path, ok: outcome.error == nil, error: outcome.error?.message, code: outcome.error?.code.name)
                )
            }
            if let jsonObject { try Output.json(jsonObject(rows)) } else { try Output.json(rows) }
        } else {
            for outcome in failed { error(outcome.message ?? outcome.path) }
            let done = outcomes.count - failed.count
            if !interrupted && (!isTerminal || done > 0 || failed.isEmpty) {
                print("\(verb) \(done) item\(done == 1 ? "" : "s")\(failed.isEmpty ? "" : ", \(failed.count) failed")")
            }
        }
        if interrupted {
            let done = outcomes.count - failed.count - notDone.count
            var line = "interrupted: \(done) of \(outcomes.count) item\(outcomes.count == 1 ? "" : "s") \(verb)"
            if !failed.isEmpty { line += ", \(failed.count) failed" }
            line += "; \(notDone.count) not done"
            // What an outcome says beyond "not done" (how far a recursive populate got).
            var details: [String] = []
            let notStarted = FileProviderError.notStarted.message
            for outcome in notDone {
                let reason = outcome.error?.message ?? "cancelled"
                if reason == "cancelled" || reason == notStarted { continue }
                details.append(outcome.message ?? reason)
            }
            if !details.isEmpty && details.count <= 3 { line += " (\(details.joined(separator: "; ")))" }
            FileHandle.standardError.write(Data((TerminalText.escaped(line) + "; run the same command again to finish\n").utf8))
            throw CommandInterrupted()
        }
        if !failed.isEmpty { throw CommandFailure() }
    }
}

struct OutcomeJSON: Encodable {
    var path: String
    var ok: Bool
    var error: String?
    var code: String?

    init(path: String, ok: Bool, error: String?, code: String?) { (self.path, self.ok, self.error, self.code) = (path, ok, error, code) }

    init(_ outcome: ItemOutcome) {
        self.init(path: outcome.path, ok: outcome.error == nil, error: outcome.error?.message, code: outcome.error?.code.name)
    }
}

/// The state of an item as the CLI shows it.
extension ItemRecord {
    var stateLabel: String {
        switch state {
        case .folder: return isDataless ? "folder,dataless" : "folder"
        case .symlink: return "symlink"
        case .placeholder: return "placeholder"
        case .materialized: return isOutdated ? "materialized,outdated" : "materialized"
        }
    }
}

/// A content policy as the CLI shows it: the policy, then where it is set.
extension EffectivePolicy {
    /// `eager (set on it)`, `eager (through photos:/2023)`, `lazy (the default)`.
    func label(domain: String) -> String {
        switch setOn {
        case nil: return "\(policy.rawValue) (the default)"
        case path: return "\(policy.rawValue) (set on it)"
        case let setOn?: return "\(policy.rawValue) (through \(domain):/\(setOn))"
        }
    }
}
