import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Names the calling thread for the system, so `top -H`, `ps -L`, `perf` and `/proc/<pid>/task`
/// tell the engine's threads apart (Foundation's `Thread.name` is not passed to the kernel on
/// Linux: every thread showed the program's name).
public enum ThreadName {
    /// The name the kernel keeps for `name`: at most 15 bytes, `fileprovider-` shortened to
    /// `fp-` (`fileprovider-engine-2` is `fp-engine-2`), cut at a character's boundary.
    public static func system(_ name: String) -> String {
        var short = name.hasPrefix("fileprovider-") ? "fp-" + name.dropFirst("fileprovider-".count) : name
        while short.utf8.count > 15 { short.removeLast() }
        return short
    }

    /// Gives the calling thread ``system(_:)`` of `name` (through `/proc/thread-self/comm`;
    /// nothing happens where it cannot be written). Call it first in a thread's body.
    public static func setCurrent(_ name: String) {
        #if canImport(Glibc)
            let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            defer { close(fd) }
            let bytes = Array(system(name).utf8)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        #endif
    }

    /// The calling thread's name as the system shows it; `nil` where it cannot be read.
    public static func current() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) else { return nil }
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }
}
