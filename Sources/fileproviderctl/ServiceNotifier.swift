import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// systemd's notify protocol (`sd_notify(3)`), spoken directly: datagrams such as `READY=1` to
/// the `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or `@name` in the abstract
/// namespace). Without `$NOTIFY_SOCKET` (not started by systemd with `Type=notify`) every call
/// does nothing. No libsystemd.
///
/// With `$WATCHDOG_USEC` set (`WatchdogSec=` in the unit) and `$WATCHDOG_PID` unset or this
/// process, ``startWatchdog()`` sends `WATCHDOG=1` every half interval from a task on the
/// cooperative pool: a pool that no longer runs tasks stops the pings, and systemd restarts the
/// service.
final class ServiceNotifier: @unchecked Sendable {
    /// The socket's address as given, `nil` when there is none to talk to.
    let address: String?
    /// The watchdog interval in microseconds, when systemd asked for pings.
    let watchdogMicroseconds: UInt64?
    private let lock = NSLock()
    private var watchdog: (any DispatchSourceTimer)?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let address = environment["NOTIFY_SOCKET"].flatMap { $0.hasPrefix("/") || $0.hasPrefix("@") ? $0 : nil }
        self.address = address
        var interval: UInt64?
        if let text = environment["WATCHDOG_USEC"], let value = UInt64(text), value > 0 {
            let pid = environment["WATCHDOG_PID"].flatMap { Int32($0) }
            if pid == nil || pid == getpid() { interval = value }
        }
        watchdogMicroseconds = address == nil ? nil : interval
    }

    /// Sends `READY=1` and a status line.
    @discardableResult
    func ready(status: String) -> Bool { send("READY=1\nSTATUS=\(Self.oneLine(status))\nMAINPID=\(getpid())") }

    /// Sends `STOPPING=1` and a status line.
    @discardableResult
    func stopping(status: String) -> Bool { send("STOPPING=1\nSTATUS=\(Self.oneLine(status))") }

    /// Sends `WATCHDOG=1` every half interval until ``stopWatchdog()``; nothing without
    /// `$WATCHDOG_USEC`.
    func startWatchdog() {
        guard let microseconds = watchdogMicroseconds else { return }
        let half = DispatchTimeInterval.microseconds(Int(min(microseconds / 2, UInt64(Int32.max))))
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "fileprovider.watchdog"))
        timer.schedule(deadline: .now(), repeating: half)
        timer.setEventHandler { [self] in
            // The ping goes out from a task: it proves the cooperative pool still runs them.
            Task { self.send("WATCHDOG=1") }
        }
        timer.resume()
        lock.withLock { watchdog = timer }
    }

    func stopWatchdog() {
        lock.withLock {
            watchdog?.cancel()
            watchdog = nil
        }
    }

    /// Sends one datagram (never blocks: `MSG_DONTWAIT`); returns whether it went out.
    @discardableResult
    func send(_ message: String) -> Bool {
        guard let address else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        var path = Array(address.utf8)
        // `@name`: the abstract namespace, a leading NUL and no terminating one.
        let abstract = path.first == UInt8(ascii: "@")
        if abstract { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: storage.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &storage.sun_path) { bytes in
            bytes.copyBytes(from: path)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (abstract ? 0 : 1))
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                sendto(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), address, length)
            }
        }
        return sent == bytes.count
    }

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
