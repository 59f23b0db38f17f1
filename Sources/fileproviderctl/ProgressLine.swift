import Foundation
import ProviderEngine

/// The text of a progress line, fitted to a width: what does not fit is left out, least
/// important first, so the line never wraps (a wrapped line leaves a stale row at each redraw).
///
/// In full: `photos   45%  [#####      ]  1.2/2.7 GiB  12/40 files  12.3 MiB/s  ETA 1m03s  elapsed 12s`.
/// Narrower, the bar goes first, then the time taken, the files, the rate, the time left and
/// the bytes; the label and the percent stay (the label shortened if it must).
enum ProgressLine {
    struct Transfer {
        var completedBytes: Int64
        var totalBytes: Int64
        var completedItems: Int
        var totalItems: Int
        var resumedBytes: Int64
    }

    /// A line for a transfer; `rate` in bytes per second, `elapsed` in seconds.
    static func transfer(label: String, _ transfer: Transfer, rate: Double?, elapsed: Double, width: Int) -> String {
        let fraction =
            transfer.totalBytes > 0
            ? Double(transfer.completedBytes) / Double(transfer.totalBytes)
            : Double(transfer.completedItems) / Double(max(transfer.totalItems, 1))
        let clamped = min(1, max(0, fraction))
        let percent = "\(Int(clamped * 100))%"
        var eta = "ETA -"
        if let rate, rate > 0 {
            let left = Double(max(0, transfer.totalBytes - transfer.completedBytes)) / rate
            eta = "ETA \(duration(left))"
        } else if transfer.completedItems == transfer.totalItems {
            eta = "ETA 0s"
        }
        // Segments in the order shown, each with its rank: the lowest rank goes first.
        let segments: [(text: String, rank: Int)] = [
            (label, 100),
            (padded(percent, 4), 90),
            (bytes(transfer.completedBytes, of: transfer.totalBytes), 80),
            ("\(transfer.completedItems)/\(transfer.totalItems) files", 50),
            (rate.map { "\(Output.bytes(Int64(min($0, 9e18))))/s" } ?? "- B/s", 60),
            (eta, 70),
            ("elapsed \(duration(elapsed))", 40),
        ]
        return layout(segments, barFraction: clamped, barAfter: 1, width: width)
    }

    /// A line while a store is listed.
    static func listing(label: String, folders: Int, items: Int, elapsed: Double, width: Int) -> String {
        let segments: [(text: String, rank: Int)] = [
            ("\(label): listing…", 100), ("\(folders) folders", 60), ("\(items) items", 80), ("elapsed \(duration(elapsed))", 40),
        ]
        return layout(segments, barFraction: nil, barAfter: 0, width: width)
    }

    /// `text` cut to fit `width` columns (an ellipsis where it was cut).
    static func fitted(_ text: String, width: Int) -> String {
        truncated(text, to: max(1, width - 1))
    }

    /// Joins the segments that fit in `width - 1` columns (the last column is never written:
    /// some terminals wrap as soon as it is) and, after segment `barAfter`, a bar filling what
    /// is left when at least 10 columns are.
    private static func layout(_ segments: [(text: String, rank: Int)], barFraction: Double?, barAfter: Int, width: Int) -> String {
        let room = max(1, width - 1)
        var kept = Array(segments.indices)
        func length(_ indices: [Int]) -> Int {
            indices.reduce(0) { $0 + columns(segments[$1].text) } + 2 * max(0, indices.count - 1)
        }
        while length(kept) > room, let lowest = kept.dropFirst().min(by: { segments[$0].rank < segments[$1].rank }) {
            kept.removeAll { $0 == lowest }
        }
        var parts = kept.map { segments[$0].text }
        if let barFraction {
            let left = room - length(kept) - 2
            if left >= 10 {
                let inner = min(left - 2, 40)
                let filled = min(inner, Int(barFraction * Double(inner)))
                let bar = "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: inner - filled) + "]"
                let position = min(parts.count, kept.firstIndex { $0 > barAfter } ?? parts.count)
                parts.insert(bar, at: position)
            }
        }
        return truncated(parts.joined(separator: "  "), to: room)
    }

    /// `1.2/2.7 GiB`, or `512.0 KiB/2.7 GiB` when the units differ.
    static func bytes(_ done: Int64, of total: Int64) -> String {
        let (doneText, totalText) = (Output.bytes(done), Output.bytes(total))
        let doneUnit = doneText.split(separator: " ").last
        if doneUnit == totalText.split(separator: " ").last, let number = doneText.split(separator: " ").first {
            return "\(number)/\(totalText)"
        }
        return "\(doneText)/\(totalText)"
    }

    /// `12s`, `1m03s`, `2h05m`, `3d04h`.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds < 1e9 else { return "-" }
        let total = Int(max(0, seconds.rounded()))
        let (days, hours, minutes, secs) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60)
        if days > 0 { return "\(days)d" + twoDigits(hours) + "h" }
        if hours > 0 { return "\(hours)h" + twoDigits(minutes) + "m" }
        if minutes > 0 { return "\(minutes)m" + twoDigits(secs) + "s" }
        return "\(secs)s"
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    private static func padded(_ text: String, _ count: Int) -> String {
        String(repeating: " ", count: max(0, count - text.count)) + text
    }

    /// Columns a text takes: one per Unicode scalar that is not a combining mark (the labels are
    /// domain names and command words; wide characters count as one, an approximation).
    static func columns(_ text: String) -> Int {
        text.unicodeScalars.reduce(0) { count, scalar in
            scalar.properties.generalCategory == .nonspacingMark ? count : count + 1
        }
    }

    private static func truncated(_ text: String, to room: Int) -> String {
        guard columns(text) > room else { return text }
        var result = ""
        var used = 0
        for character in text {
            let width = columns(String(character))
            if used + width > room - 1 { break }
            result.append(character)
            used += width
        }
        return result + "…"
    }
}
