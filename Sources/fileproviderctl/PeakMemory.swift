import Foundation

/// The peak resident memory of this process, for `sync --json`.
enum PeakMemory {
    /// This process's peak resident set size in bytes (`VmHWM` of `/proc/self/status`), or
    /// `nil` where there is none. Unlike `getrusage`'s `ru_maxrss`, it counts only this program:
    /// `ru_maxrss` starts from the peak of the process that spawned it (the kernel carries the
    /// old image's peak over `execve`), so a large parent would show as our own.
    static func residentBytes() -> Int64? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            // "VmHWM:     53832 kB"
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 3, fields[2] == "kB", let kibibytes = Int64(fields[1]), kibibytes >= 0 else { return nil }
            let (bytes, overflow) = kibibytes.multipliedReportingOverflow(by: 1024)
            return overflow ? nil : bytes
        }
        return nil
    }
}
