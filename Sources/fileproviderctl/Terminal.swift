import ArgumentParser
import Dispatch
import Foundation
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The terminal standard error writes to: its width (`TIOCGWINSZ`), read again when it changes
/// (SIGWINCH, watched with a dispatch signal source while a progress bar is drawn).
final class Terminal: @unchecked Sendable {
    static let shared = Terminal()

    private let lock = NSLock()
    private var width: Int?
    private var source: (any DispatchSourceSignal)?
    private var bars: [ObjectIdentifier: ProgressBar] = [:]
    private let queue = DispatchQueue(label: "fileprovider.terminal")

    /// The width in columns: the terminal's, else `$COLUMNS`, else 80.
    var columns: Int {
        lock.withLock {
            if let width { return width }
            let measured = Self.measure()
            width = measured
            return measured
        }
    }

    private static func measure() -> Int {
        let columns = Int(SystemCalls.terminalColumns(STDERR_FILENO))
        if columns > 0 { return columns }
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let value = Int(text), value > 0 { return min(value, 10_000) }
        return 80
    }

    /// Starts watching SIGWINCH. Called first thing in `main`, with ``Interruption/install()``:
    /// dispatch receives signals through a signalfd and blocks them only in the threads that
    /// exist then and their children, so a source made later could miss them.
    func install() {
        lock.withLock {
            guard source == nil else { return }
            // SIGWINCH is ignored by default; the source sees it all the same.
            let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: queue)
            source.setEventHandler { [self] in
                let watching = lock.withLock { () -> [ProgressBar] in
                    width = Self.measure()
                    return Array(bars.values)
                }
                for bar in watching { bar.redraw() }
            }
            source.resume()
            self.source = source
        }
    }

    /// Redraws `bar` at once whenever the terminal's size changes, until ``stopWatching(_:)``.
    func watch(_ bar: ProgressBar) {
        lock.withLock { bars[ObjectIdentifier(bar)] = bar }
    }

    func stopWatching(_ bar: ProgressBar) {
        lock.withLock { _ = bars.removeValue(forKey: ObjectIdentifier(bar)) }
    }
}

/// `--progress` and `--no-progress`, for commands that draw a progress line.
struct ProgressOptions: ParsableArguments {
    @Flag(
        inversion: .prefixedNo,
        help: "Draw a progress line on standard error (default: when it is a terminal).")
    var progress: Bool?

    /// Whether to draw: as asked, else when standard error is a terminal.
    var shouldDraw: Bool { progress ?? Output.isTerminal }
}
