import Foundation
import Logging
import ProviderCore
import ProviderEngine

/// The outcomes of `materialize` and `evict`, kept as they come (``handler``): counts, the first
/// ``failureLimit`` failures and what an interruption left, so a command over a million files
/// holds no million outcomes. With `--json` each outcome is written as it comes: the same bytes
/// as one array written at the end. ``finish(verb:)`` prints what ``Output/finish(_:verb:json:jsonObject:)``
/// prints for the same outcomes (the failures past the limit as one line that counts them).
final class OutcomeTally: @unchecked Sendable {
    /// The most failures kept (and printed one per line).
    static let failureLimit = 1_000

    private let lock = NSLock()
    private let json: Bool
    private let encoder = Output.jsonEncoder()
    private var total = 0
    /// The first failures, in order (those that say `cancelled` included).
    private var failures: [ItemOutcome] = []
    private var failureCount = 0
    private var cancelledCount = 0
    /// What the first `cancelled` outcomes say beyond "not done" (at most 4: more are not shown).
    private var notDoneDetails: [String] = []
    private var wroteRows = false

    /// Logs each item that worked at `debug` level (`-v`) as `DOMAIN:/path: VERB`, when set.
    private let itemVerb: String?
    private let logger = Logger(label: "fileprovider.engine")

    init(json: Bool, itemVerb: String? = nil) {
        self.json = json
        self.itemVerb = itemVerb
    }

    /// The handler to give the engine.
    var handler: OutcomeHandler { { [self] batch in add(batch) } }

    /// Counts `batch`, and writes its JSON rows with `--json`.
    func add(_ batch: [ItemOutcome]) {
        if batch.isEmpty { return }
        lock.lock()
        defer { lock.unlock() }
        let notStarted = FileProviderError.notStarted.message
        let logsItems = itemVerb != nil && logger.logLevel <= .debug
        for outcome in batch {
            total += 1
            guard let error = outcome.error else {
                if logsItems, let itemVerb { logger.debug("\(TerminalText.quoted(outcome.path)): \(itemVerb)") }
                continue
            }
            failureCount += 1
            if failures.count < Self.failureLimit { failures.append(outcome) }
            guard error.code == .cancelled else { continue }
            cancelledCount += 1
            if error.message != "cancelled" && error.message != notStarted && notDoneDetails.count < 4 {
                notDoneDetails.append(outcome.message ?? error.message)
            }
        }
        guard json else { return }
        var out = Data((wroteRows ? "," : "[").utf8)
        for (index, outcome) in batch.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            // An outcome of plain strings and a Bool always encodes.
            out.append((try? encoder.encode(OutcomeJSON(outcome))) ?? Data("{}".utf8))
        }
        wroteRows = true
        FileHandle.standardOutput.write(out)
    }

    /// Prints the summary (text) or closes the array (`--json`), as ``Output/finish(_:verb:json:jsonObject:)``.
    /// - Throws: ``CommandInterrupted`` after an interruption; ``CommandFailure`` when an item failed.
    func finish(verb: String) throws {
        lock.lock()
        defer { lock.unlock() }
        let interrupted = Interruption.shared.signal != nil
        // After an interruption `cancelled` means not done; otherwise it is a failure like others.
        let failed = interrupted ? failures.filter { $0.error?.code != .cancelled } : failures
        let failedCount = interrupted ? failureCount - cancelledCount : failureCount
        let notDone = interrupted ? cancelledCount : 0
        if json {
            Output.write(wroteRows ? "]\n" : "[]\n")
        } else {
            for outcome in failed { Output.error(outcome.message ?? outcome.path) }
            if failedCount > failed.count {
                Output.error("\(failedCount - failed.count) more items failed (the first \(failed.count) are shown)")
            }
            let done = total - failedCount
            if !interrupted && (!Output.isTerminal || done > 0 || failedCount == 0) {
                print("\(verb) \(done) item\(done == 1 ? "" : "s")\(failedCount == 0 ? "" : ", \(failedCount) failed")")
            }
        }
        if interrupted {
            let done = total - failedCount - notDone
            var line = "interrupted: \(done) of \(total) item\(total == 1 ? "" : "s") \(verb)"
            if failedCount > 0 { line += ", \(failedCount) failed" }
            line += "; \(notDone) not done"
            if !notDoneDetails.isEmpty && notDoneDetails.count <= 3 { line += " (\(notDoneDetails.joined(separator: "; ")))" }
            FileHandle.standardError.write(Data((TerminalText.escaped(line) + "; run the same command again to finish\n").utf8))
            throw CommandInterrupted()
        }
        if failedCount > 0 { throw CommandFailure() }
    }
}
