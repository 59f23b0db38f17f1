import Foundation
import ProviderEngine

/// Draws engine progress on a terminal (standard error); silent when it is not a terminal.
final class ProgressBar: @unchecked Sendable {
    private let lock = NSLock()
    private var lastDraw = Date.distantPast
    private let started = Date()
    private var drew = false
    private let label: String

    init(label: String) { self.label = label }

    /// The handler to pass to the engine, or `nil` when standard error is not a terminal.
    var handler: EventHandler? {
        guard Output.isTerminal else { return nil }
        return { [self] event in self.draw(event) }
    }

    private func draw(_ event: EngineEvent) {
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        var final = false
        if case .transfer(_, _, let items, let total) = event, items == total { final = true }
        guard final || now.timeIntervalSince(lastDraw) > 0.1 else { return }
        lastDraw = now
        let line: String
        switch event {
        case .listing(let folders, let items):
            line = "\(label): listing… \(folders) folders, \(items) items"
        case .transfer(let bytes, let totalBytes, let items, let totalItems):
            let fraction = totalBytes > 0 ? Double(bytes) / Double(totalBytes) : Double(items) / Double(max(totalItems, 1))
            let width = 24
            let filled = min(width, Int(fraction * Double(width)))
            let rate = Double(bytes) / max(now.timeIntervalSince(started), 0.001)
            line =
                "\(label) [\(String(repeating: "#", count: filled))\(String(repeating: " ", count: width - filled))] "
                + "\(Int(fraction * 100))% \(items)/\(totalItems) files \(Output.bytes(bytes))/\(Output.bytes(totalBytes)) \(Output.bytes(Int64(rate)))/s"
        case .notice, .waitingForSync:
            return
        }
        Self.screen.lock.withLock {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
            Self.screen.lineDrawn = true
        }
        drew = true
    }

    /// Draws a progress line of the command's own (`label: text`), at most ten times a second;
    /// nothing when standard error is not a terminal.
    func show(_ text: String) {
        guard Output.isTerminal else { return }
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        guard now.timeIntervalSince(lastDraw) > 0.1 else { return }
        lastDraw = now
        Self.screen.lock.withLock {
            FileHandle.standardError.write(Data("\r\u{1B}[K\(label): \(text)".utf8))
            Self.screen.lineDrawn = true
        }
        drew = true
    }

    /// Ends the progress line.
    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if drew { Self.eraseLine() }
        drew = false
    }

    /// Whether a progress line (of any bar) is on the screen now.
    private final class Screen: @unchecked Sendable {
        let lock = NSLock()
        var lineDrawn = false
    }

    private static let screen = Screen()

    /// Erases the progress line on the screen, if there is one (also when the process is about to
    /// stop at once).
    static func eraseLine() {
        screen.lock.withLock {
            if screen.lineDrawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            screen.lineDrawn = false
        }
    }
}
