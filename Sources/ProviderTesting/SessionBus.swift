import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A D-Bus session bus of a test's own: `dbus-daemon --session` listening on a socket in a
/// temporary folder (never the user's bus), stopped by its pid with ``stop()`` or when the test
/// process exits. Programs reach it through ``environment`` (`DBUS_SESSION_BUS_ADDRESS`).
///
/// Needs Debian's `dbus-daemon`.
public final class SessionBus: @unchecked Sendable {
    /// The bus's address (`unix:path=…,guid=…`).
    public let address: String
    /// What a program needs to reach this bus.
    public var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }
    private let daemon: SpawnedDaemon

    /// Starts the bus and waits (20 seconds at most) until it listens: until it printed its
    /// address. Blocks: call it off the cooperative pool.
    /// - Throws: ``MediaServerError`` when `dbus-daemon` is missing or does not start.
    public init() throws {
        let program = "/usr/bin/dbus-daemon"
        guard FileManager.default.isExecutableFile(atPath: program) else {
            throw MediaServerError(message: "\(program) is missing: install dbus-daemon (make deps)")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-bus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let printed = folder.appendingPathComponent("address")
        let pid = try ChildProcess.spawn(
            program,
            ["--session", "--nofork", "--nopidfile", "--address=unix:path=\(folder.path)/bus", "--print-address=1"],
            output: printed.path, error: folder.appendingPathComponent("daemon.log").path, ownSession: true)
        daemon = SpawnedDaemon(pid: pid, folder: folder)
        // The address is printed once the daemon listens.
        guard let found = ChildProcess.firstLine(of: printed, whileRunning: pid) else {
            let log = daemon.tail(of: "daemon.log")
            daemon.stop()
            throw MediaServerError(message: "dbus-daemon did not start: \(log)")
        }
        address = found
    }

    /// Kills the daemon, reaps it and removes its folder; only the first call does anything.
    public func stop() { daemon.stop() }
}
