import Foundation
import ProviderCore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Where a WebDAV domain's password comes from (Docs/CLI.md, "Passwords"): the Secret Service
/// (gnome-keyring-daemon in a D-Bus session of the test's own), a systemd credential in
/// `$CREDENTIALS_DIRECTORY`, netrc, and the prompt of `domain add` on a terminal, which stores
/// into the Secret Service. Every domain is synced with the password found, against Apache
/// with HTTP Basic authentication on 127.0.0.1.
@Suite("CLI passwords from the Secret Service, systemd credentials, netrc and the prompt")
struct PasswordSourceTests {
    static let password = "dav pw: spaces & ünïcode"
    static let startup = Task { try await offThePool { try ApacheDAVServer(users: ["alice": password]) } }

    /// A home of its own, no D-Bus session, no systemd credentials: only the sources a test
    /// names are there.
    static func isolated(_ temp: TemporaryFolder) throws -> [String: String] {
        let user = temp.url.appendingPathComponent("user")
        try FileManager.default.createDirectory(at: user, withIntermediateDirectories: true)
        return [
            "HOME": user.path, "DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": "", "CREDENTIALS_DIRECTORY": "", "SSH_AUTH_SOCK": "",
        ]
    }

    /// A store folder on the server with one file, and the options of a domain over it.
    static func store(_ server: ApacheDAVServer) throws -> (options: [String], folder: String) {
        let url = try server.makeFolder()
        let folder = String(url.split(separator: "/").last!)
        try server.writeFile("\(folder)/hello.txt", Data("hello from the server\n".utf8))
        return (["--backend", "webdav", "--url", url, "--user", "alice"], folder)
    }

    /// Syncs `name`, downloads `hello.txt`, uploads a new file; checks both ends.
    static func syncBothWays(
        _ cli: CLIRunner, _ name: String, replica: URL, server: ApacheDAVServer, folder: String, environment: [String: String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let synced = try await cli.run(["sync", name], environment: environment)
        #expect(synced.status == 0, "sync: \(synced.stderr)", sourceLocation: sourceLocation)
        let materialized = try await cli.run(["materialize", "\(name):/hello.txt"], environment: environment)
        #expect(materialized.status == 0, "materialize: \(materialized.stderr)", sourceLocation: sourceLocation)
        let local = try? String(contentsOf: replica.appendingPathComponent("hello.txt"), encoding: .utf8)
        #expect(local == "hello from the server\n", sourceLocation: sourceLocation)
        try Data("from the replica\n".utf8).write(to: replica.appendingPathComponent("up.txt"))
        let up = try await cli.run(["sync", name], environment: environment)
        #expect(up.status == 0, "sync up: \(up.stderr)", sourceLocation: sourceLocation)
        let remote = try? String(contentsOf: server.root.appendingPathComponent("\(folder)/up.txt"), encoding: .utf8)
        #expect(remote == "from the replica\n", sourceLocation: sourceLocation)
    }

    @Test func aSyncTakesThePasswordFromTheSecretServiceAndRemoveDeletesIt() async throws {
        let server = try await Self.startup.value
        let keyring = try await offThePool { try SecretServiceSession() }
        defer { keyring.stop() }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let isolated = try Self.isolated(temp)
        let withKeyring = isolated.merging(keyring.environment) { _, new in new }
        let (options, folder) = try Self.store(server)
        let replica = temp.url.appendingPathComponent("replica")
        // Stored by hand, as Docs/CLI.md shows with secret-tool.
        try await offThePool { try keyring.store(Self.password, domain: "dav") }

        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "dav", "--replica", replica.path] + options, environment: withKeyring)
        #expect(added.status == 0, "\(added.stderr)")
        try await Self.syncBothWays(cli, "dav", replica: replica, server: server, folder: folder, environment: withKeyring)
        for file in try FileManager.default.contentsOfDirectory(atPath: cli.home.path) where file.hasPrefix("metadata.sqlite") {
            let data = try Data(contentsOf: cli.home.appendingPathComponent(file))
            #expect(data.range(of: Data(Self.password.utf8)) == nil, "the password is in \(file)")
        }

        // Without the Secret Service, the error names every source tried and what to do.
        let without = try await cli.run(["sync", "dav"], environment: isolated)
        #expect(without.status != 0)
        for part in [
            "the systemd credential fileprovider.dav ($CREDENTIALS_DIRECTORY is not set)", "the Secret Service (no D-Bus session bus",
            "/.netrc (no such file)", "fileproviderctl domain set NAME --password",
        ] {
            #expect(without.stderr.contains(part), "\(part) not in: \(without.stderr)")
        }

        let removed = try await cli.run(["domain", "remove", "dav", "--force"], environment: withKeyring)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout.contains("deleted its password from the Secret Service"), "\(removed.stdout)")
        #expect(try await offThePool { try keyring.lookup(domain: "dav") } == nil)
    }

    @Test func aSystemdCredentialIsUsed() async throws {
        let server = try await Self.startup.value
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let credentials = temp.url.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        // As `systemd-creds decrypt` leaves it: the newline echo put there is not the password's.
        try Data((Self.password + "\n").utf8).write(to: credentials.appendingPathComponent("fileprovider.unit"))
        var environment = try Self.isolated(temp)
        environment["CREDENTIALS_DIRECTORY"] = credentials.path
        let (options, folder) = try Self.store(server)
        let replica = temp.url.appendingPathComponent("replica")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "unit", "--replica", replica.path] + options, environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        try await Self.syncBothWays(cli, "unit", replica: replica, server: server, folder: folder, environment: environment)

        // A credential of another name is not this domain's.
        try FileManager.default.moveItem(
            at: credentials.appendingPathComponent("fileprovider.unit"), to: credentials.appendingPathComponent("fileprovider.other"))
        let missing = try await cli.run(["sync", "unit"], environment: environment)
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("the systemd credential fileprovider.unit (not in $CREDENTIALS_DIRECTORY)"), "\(missing.stderr)")
    }

    @Test func aNetrcEntryIsUsed() async throws {
        let server = try await Self.startup.value
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = try Self.isolated(temp)
        let netrc = URL(fileURLWithPath: environment["HOME"]!).appendingPathComponent(".netrc")
        try Data(
            """
            machine example.org login alice password other
            machine 127.0.0.1 login bob password not-alices
            machine 127.0.0.1
              login alice
              password "\(Self.password)"
            """.utf8
        ).write(to: netrc)
        chmod(netrc.path, 0o600)
        let (options, folder) = try Self.store(server)
        let replica = temp.url.appendingPathComponent("replica")
        let added = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "rc", "--replica", replica.path] + options, environment: environment)
        #expect(added.status == 0, "\(added.stderr)")
        try await Self.syncBothWays(cli, "rc", replica: replica, server: server, folder: folder, environment: environment)
    }

    @Test func domainAddAsksOnATerminalAndStoresInTheSecretService() async throws {
        let server = try await Self.startup.value
        let keyring = try await offThePool { try SecretServiceSession() }
        defer { keyring.stop() }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = try Self.isolated(temp).merging(keyring.environment) { _, new in new }
        let (options, folder) = try Self.store(server)
        let replica = temp.url.appendingPathComponent("replica")

        let added = try await offThePool {
            try TerminalRun(
                cli, ["domain", "add", "--mode", "placeholder-files", "typed", "--replica", replica.path] + options,
                environment: environment,
                prompt: "Password of alice on 127.0.0.1 (domain 'typed'): ", answers: ["not it", Self.password])
        }
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stderr.contains("the password was refused; try again"), "\(added.stderr)")
        #expect(added.stdout.contains("stored the password in the Secret Service"), "\(added.stdout)")
        #expect(!added.terminal.contains("not it"), "the password was echoed: \(added.terminal)")
        #expect(!added.terminal.contains("dav pw"), "the password was echoed: \(added.terminal)")
        #expect(try await offThePool { try keyring.lookup(domain: "typed") } == Self.password)
        try await Self.syncBothWays(cli, "typed", replica: replica, server: server, folder: folder, environment: environment)

        // A wrong password given to `domain set --password` (on standard input) is not kept.
        let wrong = try await offThePool {
            try TerminalRun.piped(cli, ["domain", "set", "typed", "--password"], environment: environment, input: "wrong\n")
        }
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("the one stored before is back"), "\(wrong.stderr)")
        #expect(try await offThePool { try keyring.lookup(domain: "typed") } == Self.password)
        // The right one is stored (over a password deleted by hand meanwhile).
        _ = try await offThePool { try keyring.store("stale", domain: "typed") }
        let right = try await offThePool {
            try TerminalRun.piped(cli, ["domain", "set", "typed", "--password"], environment: environment, input: Self.password + "\n")
        }
        #expect(right.status == 0, "\(right.stderr)")
        #expect(right.stdout.contains("password stored in the Secret Service"), "\(right.stdout)")
        #expect(try await offThePool { try keyring.lookup(domain: "typed") } == Self.password)

        // Three refused passwords: the domain is not added and none is kept.
        let third = temp.url.appendingPathComponent("r3").path
        let refused = try await offThePool {
            try TerminalRun(
                cli, ["domain", "add", "--mode", "placeholder-files", "never", "--replica", third] + options,
                environment: environment, prompt: "Password of alice on 127.0.0.1 (domain 'never'): ", answers: ["a", "b", "c"])
        }
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("answered 401"), "\(refused.stderr)")
        #expect(refused.stderr.contains("check --user and the password (from the Secret Service)"), "\(refused.stderr)")
        #expect(try await offThePool { try keyring.lookup(domain: "never") } == nil)
        #expect(try await cli.run(["domain", "show", "never"]).status != 0)

        // Without a terminal nothing is asked: the refusal says what was tried.
        let quiet = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "asked", "--replica", temp.url.appendingPathComponent("r2").path] + options,
            environment: environment)
        #expect(quiet.status != 0)
        #expect(quiet.stderr.contains("the Secret Service (no password stored for domain"), "\(quiet.stderr)")
    }

    @Test func anSFTPDomainSignsInWithThePasswordFromTheSecretServiceOrNetrc() async throws {
        try await HostileSFTPServer.withStarted { server in
            let keyring = try await offThePool { try SecretServiceSession() }
            defer { keyring.stop() }
            let temp = try TemporaryFolder()
            let cli = CLIRunner(in: temp)
            let isolated = try Self.isolated(temp)
            let withKeyring = isolated.merging(keyring.environment) { _, new in new }
            // The user "password" has no key: the key offered is refused, the password signs in.
            let options =
                ["--backend", "sftp"]
                + server.options(user: "password").sorted(by: { $0.key < $1.key }).flatMap { ["--\($0.key)", $0.value] }
            try await offThePool { try keyring.store(HostileSFTPServer.password, domain: "keyed") }
            let added = try await cli.run(["domain", "add", "--mode", "placeholder-files", "keyed"] + options, environment: withKeyring)
            #expect(added.status == 0, "\(added.stderr)")

            // Without the Secret Service, the key is refused and no password is found.
            let without = try await cli.run(["domain", "add", "--mode", "placeholder-files", "nokeyring"] + options, environment: isolated)
            #expect(without.status != 0)
            for part in ["tried key ", "no password (tried the systemd credential fileprovider.nokeyring", "the Secret Service (no D-Bus"] {
                #expect(without.stderr.contains(part), "\(part) not in: \(without.stderr)")
            }

            // netrc: machine = the host given.
            let netrc = URL(fileURLWithPath: isolated["HOME"]!).appendingPathComponent(".netrc")
            try Data("machine 127.0.0.1 login password password \"\(HostileSFTPServer.password)\"\n".utf8).write(to: netrc)
            let fromNetrc = try await cli.run(["domain", "add", "--mode", "placeholder-files", "rc"] + options, environment: isolated)
            #expect(fromNetrc.status == 0, "\(fromNetrc.stderr)")
        }
    }

    @Test func withoutLibsecretTheLookupSaysWhatToInstall() async throws {
        let server = try await Self.startup.value
        let keyring = try await offThePool { try SecretServiceSession() }
        defer { keyring.stop() }
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        var environment = try Self.isolated(temp).merging(keyring.environment) { _, new in new }
        environment["FILEPROVIDER_LIBSECRET"] = "libsecret-not-installed.so.0"
        try await offThePool { try keyring.store(Self.password, domain: "nolib") }
        let (options, _) = try Self.store(server)
        let added = try await cli.run(["domain", "add", "--mode", "placeholder-files", "nolib"] + options, environment: environment)
        #expect(added.status != 0)
        #expect(
            added.stderr.contains("the Secret Service (libsecret is not installed (libsecret-not-installed.so.0"), "\(added.stderr)")
        #expect(added.stderr.contains("install libsecret-1-0"), "\(added.stderr)")
    }

    @Test func withoutASecretServiceTheRefusalSaysWhatToDoInstead() async throws {
        let server = try await Self.startup.value
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let environment = try Self.isolated(temp)
        let (options, _) = try Self.store(server)
        let added = try await offThePool {
            try TerminalRun(
                cli, ["domain", "add", "--mode", "placeholder-files", "nobus"] + options, environment: environment, prompt: nil, answers: []
            )
        }
        #expect(added.status != 0)
        for part in [
            "the Secret Service cannot be used (no D-Bus session bus", "--password-env", "systemd credential fileprovider.nobus", "netrc",
        ] {
            #expect(added.stderr.contains(part), "\(part) not in: \(added.stderr)")
        }
    }
}

/// The CLI run with a pseudo-terminal as standard input (what a user types at), its output and
/// error output going to files: for each of `answers`, waits for one more `prompt` in the error
/// output, then types the answer and a newline.
struct TerminalRun {
    var status: Int32
    var stdout: String
    var stderr: String
    /// What the program wrote to the terminal (echo).
    var terminal: String

    /// Runs; blocks: call it off the cooperative pool. With `prompt` `nil` nothing is typed.
    init(_ cli: CLIRunner, _ arguments: [String], environment: [String: String], prompt: String?, answers: [String]) throws {
        // posix_openpt, unlockpt and ptsname by hand (Glibc's module has none of them):
        // TIOCSPTLCK and TIOCGPTN, whose numbers Swift cannot import from their macros.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var locked: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &locked) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw CLIError(result: .init(status: -1, stdout: "", stderr: "no pseudo-terminal: \(String(cString: strerror(errno)))"))
        }
        defer { close(master) }
        let terminal = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard terminal >= 0 else { throw CLIError(result: .init(status: -1, stdout: "", stderr: "cannot open /dev/pts/\(number)")) }
        let (status, stdout, stderr) = try Self.run(cli, arguments, environment: environment, input: terminal) { errorFile in
            close(terminal)
            guard let prompt else { return }
            for (index, answer) in answers.enumerated() {
                // The prompt is written once echo is off: typing after it is never echoed.
                for _ in 0..<600 {
                    if let text = try? String(contentsOfFile: errorFile, encoding: .utf8),
                        text.components(separatedBy: prompt).count > index + 1
                    {
                        break
                    }
                    usleep(50_000)
                }
                let typed = Array((answer + "\n").utf8)
                _ = typed.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
            }
        }
        var echoed: [UInt8] = []
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(master, &buffer, buffer.count)
            if count <= 0 { break }
            echoed += buffer[..<count]
        }
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.terminal = String(decoding: echoed, as: UTF8.self)
    }

    /// Runs with standard input read from `input` (not a terminal).
    static func piped(_ cli: CLIRunner, _ arguments: [String], environment: [String: String], input: String) throws -> CLIRunner.Result {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-input-\(UUID().uuidString)")
        try Data(input.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let descriptor = open(file.path, O_RDONLY | O_CLOEXEC)
        defer { close(descriptor) }
        let (status, stdout, stderr) = try run(cli, arguments, environment: environment, input: descriptor) { _ in }
        return CLIRunner.Result(status: status, stdout: stdout, stderr: stderr)
    }

    /// Starts the CLI with `input` as standard input, runs `started` with the error output's
    /// path, waits for the end.
    private static func run(
        _ cli: CLIRunner, _ arguments: [String], environment: [String: String], input: Int32, started: (String) -> Void
    ) throws -> (Int32, String, String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-tty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("out").path
        let error = folder.appendingPathComponent("err").path
        var launch = ProgramLaunch(path: cli.binary.path, arguments: arguments + ["--home", cli.home.path])
        launch.environment = cli.environment(environment)
        launch.standardInput = .descriptor(input)
        launch.standardOutput = .appending(output)
        launch.standardError = .appending(error)
        guard case .success(let pid) = launch.start() else {
            throw CLIError(result: .init(status: -1, stdout: "", stderr: "cannot start \(cli.binary.path)"))
        }
        started(error)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (
            code, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "", (try? String(contentsOfFile: error, encoding: .utf8)) ?? ""
        )
    }
}
