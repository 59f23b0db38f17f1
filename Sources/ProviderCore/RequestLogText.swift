import Foundation

/// How request log lines (``LogRedaction``'s callers: the HTTP client, SFTP, external programs)
/// write sizes and times, so every adapter's lines read alike.
public enum RequestLogText {
    /// `0 B`, `512 B`, `1.2 KiB`, `3.0 MiB`.
    public static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(count) / 1024
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }

    /// `4 ms` under a second, `1.25 s` from there.
    public static func duration(_ seconds: Double) -> String {
        seconds < 1 ? "\(Int((seconds * 1000).rounded())) ms" : String(format: "%.2f s", seconds)
    }

    /// Seconds since `start` (from `DispatchTime.now().uptimeNanoseconds`).
    public static func seconds(since start: UInt64) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds &- start) / 1e9
    }
}
