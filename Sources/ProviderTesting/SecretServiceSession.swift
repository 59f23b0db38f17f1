import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A Secret Service for tests: `gnome-keyring-daemon` in a D-Bus session bus of its own
/// (`dbus-run-session`), its keyrings in a temporary folder (never the user's), the login
/// keyring created and unlocked with ``keyringPassword``. Programs reach it through
/// ``environment`` (`DBUS_SESSION_BUS_ADDRESS`). Stopped with `SIGKILL` to its process group
/// by ``stop()``, or when the test process exits; the daemon leaves with its bus.
///
/// Needs Debian's `dbus-daemon` (`dbus-run-session`), `gnome-keyring` and `libsecret-tools`
/// (`secret-tool`, with which ``lookup(domain:)`` and ``store(_:domain:)`` check and prepare
/// what the program under test sees).
public final class SecretServiceSession: @unchecked Sendable {
    /// The password the login keyring is unlocked with.
    public static let keyringPassword = "keyring pw"
    /// What a program needs to reach this Secret Service.
    public let environment: [String: String]
    private let daemon: SpawnedDaemon
    private let folder: URL

    /// Starts the session and waits (20 seconds at most) until the keyring is unlocked and the
    /// bus's address known. Blocks: call it off the cooperative pool.
    /// - Throws: ``MediaServerError`` when a program is missing or the session does not start.
    public init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-keyring-\(UUID().uuidString)")
        let runtime = folder.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
        chmod(runtime.path, 0o700)
        for program in ["/usr/bin/dbus-run-session", "/usr/bin/gnome-keyring-daemon", "/usr/bin/secret-tool"]
        where !FileManager.default.isExecutableFile(atPath: program) {
            throw MediaServerError(
                message: "\(program) is missing: install dbus-daemon, gnome-keyring and libsecret-tools (make deps)")
        }
        let address = folder.appendingPathComponent("address")
        let log = folder.appendingPathComponent("session.log")
        // The keyring's password in a variable, not an argument; the shell stays (sleep) so the
        // session lasts until it is killed.
        let script = """
            printf %s "$FPK_KEYRING_PASSWORD" | gnome-keyring-daemon --unlock --components=secrets >/dev/null || exit 1
            printf '%s\\n' "$DBUS_SESSION_BUS_ADDRESS" > "$FPK_ADDRESS_FILE.tmp" && mv "$FPK_ADDRESS_FILE.tmp" "$FPK_ADDRESS_FILE"
            exec sleep infinity
            """
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = folder.appendingPathComponent("home").path
        environment["XDG_DATA_HOME"] = folder.appendingPathComponent("data").path
        environment["XDG_CONFIG_HOME"] = folder.appendingPathComponent("config").path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["FPK_KEYRING_PASSWORD"] = Self.keyringPassword
        environment["FPK_ADDRESS_FILE"] = address.path
        environment.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        let pid = try ChildProcess.spawn(
            "/usr/bin/dbus-run-session", ["--", "/bin/sh", "-c", script], environment: environment, output: log.path,
            error: log.path, ownSession: true)
        daemon = SpawnedDaemon(pid: pid, folder: folder)
        guard let found = ChildProcess.firstLine(of: address, whileRunning: pid) else {
            let text = daemon.tail(of: "session.log")
            daemon.stop()
            throw MediaServerError(message: "the Secret Service session did not start: \(text)")
        }
        self.environment = ["DBUS_SESSION_BUS_ADDRESS": found]
    }

    /// Kills the session's process group, reaps it and removes its folder; only the first call
    /// does anything.
    public func stop() { daemon.stop() }

    /// The password stored for the domain `domain` (`secret-tool lookup service fileprovider
    /// domain NAME`), or `nil`. Blocks.
    /// - Throws: when `secret-tool` cannot be run.
    public func lookup(domain: String) throws -> String? {
        let run = try ChildProcess.capture(
            "/usr/bin/secret-tool", ["lookup", "service", "fileprovider", "domain", domain], environment: programEnvironment)
        guard run.ending == .exited(0) else { return nil }
        return String(decoding: run.output, as: UTF8.self)
    }

    /// Stores `password` for the domain `domain` as a user would by hand (`secret-tool store
    /// --label=… service fileprovider domain NAME`). Blocks.
    /// - Throws: ``MediaServerError`` when `secret-tool` fails.
    public func store(_ password: String, domain: String) throws {
        let input = folder.appendingPathComponent("input-\(UUID().uuidString)")
        try Data(password.utf8).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        let descriptor = open(input.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw MediaServerError(message: "cannot open \(input.path)") }
        defer { close(descriptor) }
        let log = folder.appendingPathComponent("store-\(UUID().uuidString).log")
        var launch = ProgramLaunch(
            path: "/usr/bin/secret-tool", arguments: ["store", "--label=test \(domain)", "service", "fileprovider", "domain", domain])
        launch.environment = programEnvironment
        launch.standardInput = .descriptor(descriptor)
        launch.standardOutput = .appending(log.path)
        launch.standardError = .standardOutput
        guard case .success(let child) = launch.start() else { throw MediaServerError(message: "cannot start secret-tool") }
        var status: Int32 = 0
        while waitpid(child, &status, 0) == -1 && errno == EINTR {}
        guard status == 0 else {
            throw MediaServerError(
                message: "secret-tool store failed: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
    }

    /// This process's environment with the session's bus.
    private var programEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    }
}
