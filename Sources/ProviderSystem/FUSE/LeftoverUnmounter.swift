import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A `fusermount3` that an `auto_unmount` mount left behind when its process died, still about
/// to unmount its folder. `fusermount3` looks at the mount (an open of the folder fails with
/// `ENOTCONN`), then unmounts whatever is mounted at that path (`umount2(MNT_DETACH)` of the
/// path): when the machine is busy, a new mount made on the folder between the two steps (a
/// `serve` started again at once, which detaches the dead mount itself) is the one it takes
/// away, and programs find the folder empty. ``FUSEMountCheck`` waits for these first.
/// Read from `/proc`; sees the processes this one may inspect (`/proc/PID/cmdline` is readable
/// by every user unless `/proc` is mounted with `hidepid`). Blocking.
enum LeftoverUnmounter {
    /// The processes named `fusermount3` (or `fusermount`) watching a mount at `mountPoint`:
    /// their arguments end with `--` and the path, and carry `auto_unmount` in their options
    /// (how libfuse runs them).
    static func processes(unmounting mountPoint: String) -> [Int32] {
        let own = getpid()
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), pid > 0, pid != own else { return nil }
            guard let name = ProcessScan.processName(pid), name == "fusermount3" || name == "fusermount" else { return nil }
            guard let bytes = ProcessScan.contents(of: "/proc/\(pid)/cmdline") else { return nil }
            let arguments = bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
                String(decoding: $0, as: UTF8.self)
            }
            guard arguments.count >= 4, arguments[arguments.count - 2] == "--", arguments.last == mountPoint,
                arguments.contains(where: { $0.split(separator: ",").contains("auto_unmount") }), !isGone(pid)
            else { return nil }
            return pid
        }
    }

    /// Waits until no leftover `fusermount3` watches `mountPoint` (each ended: gone, or a zombie
    /// its parent has not reaped), or `limit` passed; returns whether none is left. Returns at
    /// once when there is none.
    static func waitUntilGone(_ mountPoint: String, limit: Duration = .seconds(10)) -> Bool {
        var left = processes(unmounting: mountPoint)
        if left.isEmpty { return true }
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while !left.isEmpty {
            if clock.now >= deadline { return false }
            usleep(10_000)
            left.removeAll(where: isGone)
        }
        return true
    }

    /// Whether the process `pid` ended: no longer in `/proc`, or a zombie (state `Z` or `X` in
    /// `/proc/PID/stat`, after the name in parentheses).
    static func isGone(_ pid: Int32) -> Bool {
        guard let bytes = ProcessScan.contents(of: "/proc/\(pid)/stat"),
            let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count
        else { return true }
        let state = bytes[close + 2]
        return state == UInt8(ascii: "Z") || state == UInt8(ascii: "X")
    }
}
