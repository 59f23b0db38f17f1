import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

#if canImport(Glibc)
    import Glibc
#endif

/// The connection's second channel through OpenSSH's `ssh` (``OpenSSHSubsystem``): used with
/// the credential the server accepted, never where `ssh` could not log in alone, and a `ssh`
/// that dies ends only its connection.
@Suite("SFTP channel through ssh")
struct OpenSSHChannelTests {
    /// Whether the second channel of the backend's (only) connection goes through `ssh`.
    static func usesSSH(_ backend: SFTPBackend) async throws -> Bool? {
        try await backend.withConnection { connection throws(FileProviderError) -> Bool? in
            try connection.transferChannel()?.isOpenSSH
        }
    }

    /// The `ssh` processes this process started for `server`'s SFTP channels (zombies too).
    static func sshProcesses(of server: SSHServer) -> [Int32] {
        SSHResolutionTests.children(containing: "-p \(server.port) -l \(server.user) -x -a -T -s -- ")
    }

    /// `name` of `count` bytes in a new folder of `server`, a backend over one connection, and a
    /// destination of `count` zero bytes.
    static func file(_ name: String, _ count: Int, of server: SSHServer) async throws -> (
        contents: Data, backend: SFTPBackend, item: Item, destination: URL
    ) {
        let folder = try server.makeFolder()
        let contents = PartialReadTests.large(count, seed: UInt32(count % 1000))
        try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent(name))
        let backend = try TestServer.backend(server, root: folder, extra: ["connections": "1"])
        let destination = try TestServer.scratch().appendingPathComponent(name)
        try Data(count: count).write(to: destination)
        return (contents, backend, try await backend.item(for: ItemIdentifier(name)), destination)
    }

    @Test func aLargeReadGoesThroughSSHByteIdentical() async throws {
        let server = try await TestServer.shared()
        let (contents, backend, item, destination) = try await Self.file("big.bin", 20 << 20, of: server)
        _ = try await backend.fetchPartialContents(
            for: item.identifier, version: item.version, range: 0..<Int64(contents.count), into: destination)
        #expect(try Data(contentsOf: destination) == contents)
        #expect(try await Self.usesSSH(backend) == true)
        await backend.close()
    }

    @Test func aKilledSSHEndsItsConnectionAndTheNextReadReconnects() async throws {
        try await SSHServer.withStarted { server in
            let (contents, backend, item, destination) = try await Self.file("a.bin", 4 << 20, of: server)
            let range: Range<Int64> = 0..<Int64(contents.count)
            _ = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: range, into: destination)
            let started = Self.sshProcesses(of: server)
            #expect(!started.isEmpty, "no ssh for the second channel")
            for pid in started { kill(pid, SIGKILL) }
            try Data(count: contents.count).write(to: destination)
            // The read that finds ssh gone may fail (serverUnreachable), never with wrong bytes;
            // the one after it runs on a new connection.
            do {
                _ = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: range, into: destination)
            } catch {
                #expect((error as? FileProviderError)?.code == .serverUnreachable, "\(error)")
                _ = try await backend.fetchPartialContents(for: item.identifier, version: item.version, range: range, into: destination)
            }
            #expect(try Data(contentsOf: destination) == contents)
            #expect(try await Self.usesSSH(backend) == true)
            #expect(started.allSatisfy { !Self.sshProcesses(of: server).contains($0) })
            await backend.close()
        }
    }

    /// `ssh` refuses a private key others may read (libssh2 takes it): its channel fails at
    /// the start, and the connection uses libssh2's channel, byte-identical, for that server
    /// from then on (its new connections for five minutes: below).
    @Test func aSSHThatCannotLogInLeavesTheChannelToLibSSH2() async throws {
        try await SSHServer.withStarted { server in
            let key = try TestServer.scratch().appendingPathComponent("open-key")
            try FileManager.default.copyItem(at: server.userKey, to: key)
            #expect(chmod(key.path, 0o644) == 0)
            let folder = try server.makeFolder()
            let contents = PartialReadTests.large(4 << 20, seed: 11)
            try contents.write(to: URL(fileURLWithPath: folder).appendingPathComponent("a.bin"))
            let backend = try TestServer.backend(server, root: folder, extra: ["connections": "1", "identity": key.path])
            let destination = try TestServer.scratch().appendingPathComponent("a.bin")
            try Data(count: contents.count).write(to: destination)
            let item = try await backend.item(for: ItemIdentifier("a.bin"))
            _ = try await backend.fetchPartialContents(
                for: item.identifier, version: item.version, range: 0..<Int64(contents.count), into: destination)
            #expect(try Data(contentsOf: destination) == contents)
            #expect(try await Self.usesSSH(backend) == false)
            #expect(Self.sshProcesses(of: server).isEmpty, "a refused ssh outlived its attempt")
            await backend.close()
        }
    }

    /// A server where `ssh` failed is left to libssh2's channel for the retry interval, then
    /// `ssh` is tried again; other servers are not affected.
    @Test func aServerWhereSSHFailedIsTriedAgainLater() {
        var refusals = OpenSSHRefusals()
        let start: UInt64 = 1_000_000_000_000
        #expect(!refusals.refuses("ann@files.example:22", now: start))
        refusals.record("ann@files.example:22", now: start)
        #expect(refusals.refuses("ann@files.example:22", now: start))
        #expect(refusals.refuses("ann@files.example:22", now: start + OpenSSHRefusals.retryInterval - 1))
        #expect(!refusals.refuses("ann@files.example:22", now: start + OpenSSHRefusals.retryInterval))
        #expect(!refusals.refuses("bob@files.example:22", now: start + 1))
        // A failure of the retry starts the interval again.
        refusals.record("ann@files.example:22", now: start + OpenSSHRefusals.retryInterval)
        #expect(refusals.refuses("ann@files.example:22", now: start + OpenSSHRefusals.retryInterval + 1))
    }

    @Test func onlyWhereSSHCanLogInAloneWithTheSameSettings() throws {
        let settings = ConnectionSettings(
            host: "files.example", port: 2222, user: "ann", identityFiles: ["/keys/id_ed25519"], knownHostsPath: "/kh/known_hosts",
            timeout: 30)
        let key = try #require(
            OpenSSHSubsystem.command(
                settings, credential: .key(path: "/keys/id_ed25519", passphrase: false), ssh: "/usr/bin/ssh", environment: [:]))
        let arguments = key.arguments
        #expect(arguments.first == "/usr/bin/ssh")
        #expect(Array(arguments.suffix(3)) == ["--", "files.example", "sftp"])
        for expected in ["BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/kh/known_hosts", "IdentityAgent=none"] {
            #expect(arguments.contains(expected), "\(expected) missing: \(arguments)")
        }
        #expect(arguments.contains("-i") && arguments.contains("/keys/id_ed25519"))
        #expect(arguments.contains("2222") && arguments.contains("ann"))
        let agent = OpenSSHSubsystem.command(settings, credential: .agent(socket: "/run/agent.sock"), ssh: "/usr/bin/ssh", environment: [:])
        #expect(agent?.arguments.contains("IdentityAgent=/run/agent.sock") == true)
        // libssh2's channel instead: a password, a key's passphrase, no ssh, a proxy, the switch,
        // a known_hosts path ssh would split.
        #expect(OpenSSHSubsystem.command(settings, credential: .password, ssh: "/usr/bin/ssh", environment: [:]) == nil)
        #expect(
            OpenSSHSubsystem.command(settings, credential: .key(path: "/k", passphrase: true), ssh: "/usr/bin/ssh", environment: [:])
                == nil)
        #expect(OpenSSHSubsystem.command(settings, credential: .agent(socket: "/a"), ssh: nil, environment: [:]) == nil)
        var proxied = settings
        proxied.proxy = ProxyCommand(shellCommand: "nc %h %p", environment: [:])
        #expect(OpenSSHSubsystem.command(proxied, credential: .agent(socket: "/a"), ssh: "/usr/bin/ssh", environment: [:]) == nil)
        #expect(
            OpenSSHSubsystem.command(
                settings, credential: .agent(socket: "/a"), ssh: "/usr/bin/ssh", environment: [OpenSSHSubsystem.switchVariable: "libssh2"])
                == nil)
        var spaced = settings
        spaced.knownHostsPath = "/my files/known_hosts"
        #expect(OpenSSHSubsystem.command(spaced, credential: .agent(socket: "/a"), ssh: "/usr/bin/ssh", environment: [:]) == nil)
    }
}
