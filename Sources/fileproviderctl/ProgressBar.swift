import Dispatch
import Foundation
import ProviderEngine

/// Draws engine progress on standard error, one line that fits the terminal's width, in the
/// manner of rclone's `-P`: percent, a bar, bytes, files, a moving-average rate, the time left
/// and the time taken (``ProgressLine``).
///
/// Drawn when standard error is a terminal, or always with `--progress` (``ProgressOptions``);
/// redrawn at most ten times a second on events, twice a second by a timer (so the rate and
/// times stay current when no byte moves) and at once when the terminal's size changes
/// (``Terminal``). Bytes a download resumed from a checkpoint count as done, never as speed.
/// Lines are written from a dispatch queue of the bar's own, never from the tasks that report.
final class ProgressBar: @unchecked Sendable {
    private let lock = NSLock()
    private let label: String
    private let enabled: Bool
    private let started = DispatchTime.now()
    private var lastDraw: DispatchTime?
    private var drew = false
    private var finished = false
    /// What the line shows now; `nil` until the first event.
    private var state: State?
    private var meter = RateMeter()
    private var timer: (any DispatchSourceTimer)?

    private enum State {
        case listing(folders: Int, items: Int)
        case transfer(ProgressLine.Transfer)
        case text(String)
    }

    /// A bar for `label` (`photos`, `materialize photos`), drawn as `options` say.
    init(label: String, options: ProgressOptions = ProgressOptions()) {
        self.label = label
        enabled = options.shouldDraw
    }

    /// The handler to pass to the engine, or `nil` when no progress is drawn.
    var handler: EventHandler? {
        guard enabled else { return nil }
        return { [self] event in self.receive(event) }
    }

    private func receive(_ event: EngineEvent) {
        lock.lock()
        defer { lock.unlock() }
        guard !finished else { return }
        var final = false
        switch event {
        case .listing(let folders, let items):
            state = .listing(folders: folders, items: items)
        case .transfer(let bytes, let totalBytes, let items, let totalItems, let resumed):
            final = items == totalItems
            state = .transfer(
                ProgressLine.Transfer(
                    completedBytes: bytes, totalBytes: totalBytes, completedItems: items, totalItems: totalItems, resumedBytes: resumed
                ))
        case .notice, .waitingForSync:
            return
        }
        drawLocked(force: final)
    }

    /// Draws a line of the command's own (`label: text`), at most ten times a second; nothing
    /// when no progress is drawn.
    func show(_ text: String) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        guard !finished else { return }
        state = .text(text)
        drawLocked(force: false)
    }

    /// Erases the line and stops redrawing; later events draw nothing. Returns once the line is
    /// gone, so what the command prints next starts on a clean line.
    func finish() {
        lock.withLock {
            finished = true
            timer?.cancel()
            timer = nil
        }
        Terminal.shared.stopWatching(self)
        // After the lines still queued (each finds the bar finished and draws nothing).
        Self.queue.sync {
            let drew = lock.withLock { () -> Bool in
                defer { self.drew = false }
                return self.drew
            }
            if drew { Self.eraseLine() }
        }
    }

    /// Redraws with the current state (the timer, a new terminal size).
    func redraw() {
        lock.lock()
        defer { lock.unlock() }
        guard !finished, state != nil else { return }
        drawLocked(force: true)
    }

    private func drawLocked(force: Bool) {
        let now = DispatchTime.now()
        if !force, let lastDraw, now.uptimeNanoseconds - lastDraw.uptimeNanoseconds < 100_000_000 { return }
        guard let state else { return }
        lastDraw = now
        if timer == nil { startTimer() }
        let elapsed = Double(now.uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        let width = Terminal.shared.columns
        let line: String
        switch state {
        case .listing(let folders, let items):
            line = ProgressLine.listing(label: label, folders: folders, items: items, elapsed: elapsed, width: width)
        case .transfer(let transfer):
            let moved = max(0, transfer.completedBytes - transfer.resumedBytes)
            meter.record(moved, at: elapsed)
            line = ProgressLine.transfer(
                label: label, transfer, rate: meter.rate(moved, at: elapsed), elapsed: elapsed, width: width)
        case .text(let text):
            line = ProgressLine.fitted("\(label): \(text)", width: width)
        }
        // Written from the bar's queue: the engine's tasks that report progress never wait on
        // the terminal.
        Self.queue.async { [self] in
            guard
                lock.withLock({ () -> Bool in
                    if finished { return false }
                    drew = true
                    return true
                })
            else { return }
            Self.screen.lock.withLock {
                FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
                Self.screen.lineDrawn = true
            }
        }
    }

    /// Redraws twice a second from a queue of its own (never the cooperative pool), and on a
    /// new terminal size.
    private func startTimer() {
        let timer = DispatchSource.makeTimerSource(queue: Self.queue)
        timer.schedule(deadline: .now() + .milliseconds(500), repeating: .milliseconds(500))
        timer.setEventHandler { [weak self] in self?.redraw() }
        timer.resume()
        self.timer = timer
        Terminal.shared.watch(self)
    }

    private static let queue = DispatchQueue(label: "fileprovider.progress")

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

/// The rate of a transfer averaged over its last ten seconds (a sliding window, as rclone's
/// moving average), from samples taken at most every half second.
struct RateMeter {
    /// (seconds since the start, bytes moved), oldest first.
    private var samples: [(time: Double, bytes: Int64)] = []
    static let window = 10.0

    /// Records `bytes` moved so far at `time`.
    mutating func record(_ bytes: Int64, at time: Double) {
        if let last = samples.last, time - last.time < 0.5 {
            return
        }
        samples.append((time, bytes))
        while samples.count > 2, let first = samples.first, time - first.time > Self.window { samples.removeFirst() }
    }

    /// Bytes per second over the window, `bytes` moved so far at `time`; `nil` before any time
    /// passed.
    func rate(_ bytes: Int64, at time: Double) -> Double? {
        guard let first = samples.first else { return nil }
        // In the first half second the window is too short: the average since the start.
        let (start, base) = time - first.time >= 0.5 ? (first.time, first.bytes) : (0, 0)
        let span = time - start
        guard span > 0.05 else { return nil }
        return Double(max(0, bytes - base)) / span
    }
}
