import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Who a process is, as access rules by program match it: its executable, its command name
/// and its systemd unit, read from `/proc/PID/exe`, `/proc/PID/comm` and `/proc/PID/cgroup`.
///
/// Each part is `nil` when it cannot be read: the process has exited (an on-access request can
/// outlive its reader), `/proc` hides it (`hidepid`), or it lives in another pid namespace
/// (fanotify then reports pid 0). A process of which nothing can be read is *unknown*
/// (``isKnown``): no rule names it.
public struct ProcessIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The process id the request carried.
    public var pid: Int32
    /// The executable's path (`/proc/PID/exe`), without the kernel's ` (deleted)` suffix.
    public var executable: String?
    /// The command name (`/proc/PID/comm`): the executable's name cut to 15 bytes, unless the
    /// program renamed itself (`prctl(PR_SET_NAME)`).
    public var command: String?
    /// The systemd unit the process runs in (`tracker-miner-fs-3.service`, `app-…​.scope`): the
    /// deepest `.service` or `.scope` of its cgroup path.
    public var unit: String?
    /// Its cgroup path (the unified hierarchy's, else systemd's named one).
    public var cgroup: String?

    public init(pid: Int32, executable: String?, command: String?, unit: String?, cgroup: String?) {
        self.pid = pid
        self.executable = executable
        self.command = command
        self.unit = unit
        self.cgroup = cgroup
    }

    /// Whether anything about the process could be read.
    public var isKnown: Bool { executable != nil || command != nil || cgroup != nil }

    /// The executable's file name (`/usr/bin/baloo_file` → `baloo_file`).
    public var executableName: String? {
        executable.flatMap { $0.split(separator: "/").last.map(String.init) }
    }

    /// The program for people: its command name, else its executable's name, else `unknown`.
    public var programName: String { command ?? executableName ?? "unknown program" }

    /// `baloo_file (pid 42, /usr/bin/baloo_file, unit plasma-baloorunner.service)`.
    public var description: String {
        var parts = ["pid \(pid)"]
        if let executable { parts.append(executable) }
        if let unit { parts.append("unit \(unit)") }
        return "\(programName) (\(parts.joined(separator: ", ")))"
    }

    /// Reads what `/proc` tells of the process `pid`. Blocking (three small reads); never
    /// throws: what cannot be read is `nil`.
    public static func of(pid: Int32) -> ProcessIdentity {
        guard pid > 0 else { return ProcessIdentity(pid: pid, executable: nil, command: nil, unit: nil, cgroup: nil) }
        let executable = link("/proc/\(pid)/exe").map { $0.hasSuffix(" (deleted)") ? String($0.dropLast(10)) : $0 }
        let command = ProcessScan.processName(pid)
        let cgroup = ProcessScan.contents(of: "/proc/\(pid)/cgroup").flatMap { cgroupPath(String(decoding: $0, as: UTF8.self)) }
        return ProcessIdentity(pid: pid, executable: executable, command: command, unit: cgroup.flatMap(unit(ofCgroup:)), cgroup: cgroup)
    }

    /// The cgroup path in the text of `/proc/PID/cgroup`: the unified hierarchy's line
    /// (`0::/path`), else the systemd hierarchy's (`N:name=systemd:/path`) on a host with
    /// cgroup v1; `nil` when there is neither.
    public static func cgroupPath(_ text: String) -> String? {
        var named: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[0] == "0" && fields[1].isEmpty { return String(fields[2]) }
            if fields[1] == "name=systemd" { named = String(fields[2]) }
        }
        return named
    }

    /// The systemd unit of a cgroup path: its deepest component that ends in `.service` or
    /// `.scope` (a service's own sub-cgroups are below it), or `nil` (a slice, the root).
    public static func unit(ofCgroup path: String) -> String? {
        path.split(separator: "/").last { $0.hasSuffix(".service") || $0.hasSuffix(".scope") }.map(String.init)
    }

    /// The target of a `/proc` link, or `nil`.
    private static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
