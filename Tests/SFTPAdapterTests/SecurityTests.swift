import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

/// Host keys, credentials and unreachable servers, against a real sshd.
@Suite("SFTP security")
struct SecurityTests {
    static func fingerprint(_ server: SSHServer) throws -> String { try server.hostKeyFingerprint() }

    static func expectError(
        _ code: FileProviderError.Code, _ body: () async throws(FileProviderError) -> Void
    ) async -> FileProviderError? {
        do {
            try await body()
        } catch {
            #expect(error.code == code, "\(error.code.name): \(error.message)")
            return error
        }
        Issue.record("expected \(code.name), but it succeeded")
        return nil
    }

    @Test func unknownHostKeyIsRefused() async throws {
        let server = try await TestServer.shared()
        let scratch = try TestServer.scratch()
        let knownHosts = scratch.appendingPathComponent("known_hosts")
        try Data("# nothing pinned\n".utf8).write(to: knownHosts)
        let backend = try TestServer.backend(server, extra: ["known-hosts": knownHosts.path])
        let error = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
            _ = try await backend.item(for: .rootContainer)
        }
        let message = error?.message ?? ""
        #expect(message.contains(knownHosts.path), "\(message)")
        #expect(message.contains(try Self.fingerprint(server)), "\(message)")
        #expect(try String(contentsOf: knownHosts, encoding: .utf8) == "# nothing pinned\n", "a refused key was written")
        await backend.close()
    }

    @Test func missingKnownHostsFileRefusesUnknownKey() async throws {
        let server = try await TestServer.shared()
        let knownHosts = try TestServer.scratch().appendingPathComponent("absent/known_hosts")
        let backend = try TestServer.backend(server, extra: ["known-hosts": knownHosts.path])
        _ = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
            _ = try await backend.item(for: .rootContainer)
        }
        #expect(!FileManager.default.fileExists(atPath: knownHosts.path))
        await backend.close()
    }

    @Test func changedHostKeyIsRefusedEvenWithAcceptNew() async throws {
        let server = try await TestServer.shared()
        let scratch = try TestServer.scratch()
        let other = scratch.appendingPathComponent("other_key")
        try SSHServer.generateKey(at: other)
        let otherKey = try String(contentsOf: other.appendingPathExtension("pub"), encoding: .utf8)
            .split(separator: " ").prefix(2).joined(separator: " ")
        let knownHosts = scratch.appendingPathComponent("known_hosts")
        try Data("[127.0.0.1]:\(server.port) \(otherKey)\n".utf8).write(to: knownHosts)
        for acceptNew in ["false", "true"] {
            let backend = try TestServer.backend(
                server, extra: ["known-hosts": knownHosts.path, "accept-new-host-key": acceptNew])
            let error = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
                _ = try await backend.item(for: .rootContainer)
            }
            let message = error?.message ?? ""
            #expect(message.contains("CHANGED"), "\(message)")
            #expect(message.contains(knownHosts.path), "\(message)")
            #expect(message.contains(try Self.fingerprint(server)), "\(message)")
            await backend.close()
        }
        let lines = try String(contentsOf: knownHosts, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1, "a changed key was added: \(lines)")
    }

    @Test func acceptNewPinsTheKeyThenRefusesAnother() async throws {
        let server = try await TestServer.shared()
        let knownHosts = try TestServer.scratch().appendingPathComponent("ssh/known_hosts")
        // Trust on first use: the key is added, the folder and file are created.
        let first = try TestServer.backend(server, extra: ["known-hosts": knownHosts.path, "accept-new-host-key": "true"])
        _ = try await first.item(for: .rootContainer)
        await first.close()
        let pinned = try String(contentsOf: knownHosts, encoding: .utf8)
        #expect(pinned.hasPrefix("[127.0.0.1]:\(server.port) ssh-ed25519 "), "\(pinned)")
        #expect(pinned.split(separator: "\n").count == 1)
        // Pinned: accepted without accept-new, and not added twice.
        let second = try TestServer.backend(server, extra: ["known-hosts": knownHosts.path])
        _ = try await second.item(for: .rootContainer)
        await second.close()
        let again = try TestServer.backend(server, extra: ["known-hosts": knownHosts.path, "accept-new-host-key": "true"])
        _ = try await again.item(for: .rootContainer)
        await again.close()
        #expect(try String(contentsOf: knownHosts, encoding: .utf8) == pinned)
        // Another server (another host key) under the pinned name is refused, accept-new or not.
        try await SSHServer.withStarted { impostor in
            let moved = pinned.replacingOccurrences(of: "[127.0.0.1]:\(server.port)", with: "[127.0.0.1]:\(impostor.port)")
            try Data(moved.utf8).write(to: knownHosts)
            let fooled = try TestServer.backend(
                impostor, extra: ["known-hosts": knownHosts.path, "accept-new-host-key": "true"])
            let error = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
                _ = try await fooled.item(for: .rootContainer)
            }
            #expect(error?.message.contains("CHANGED") == true)
            await fooled.close()
        }
    }

    @Test func wrongKeyIsNotAuthenticated() async throws {
        let server = try await TestServer.shared()
        let stranger = try TestServer.scratch().appendingPathComponent("id_stranger")
        try SSHServer.generateKey(at: stranger)
        let backend = try TestServer.backend(server, extra: ["identity": stranger.path])
        let error = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
            _ = try await backend.item(for: .rootContainer)
        }
        #expect(error?.message.contains(stranger.path) == true, "\(error?.message ?? "")")
        await backend.close()
    }

    @Test func wrongPasswordIsNotAuthenticated() async throws {
        let server = try await TestServer.shared()
        setenv("FPK_SFTP_TEST_PASSWORD", "not the password", 1)
        var options = server.options(root: try server.makeFolder())
        options["identity"] = nil
        options["password-env"] = "FPK_SFTP_TEST_PASSWORD"
        // An empty ssh configuration: no IdentityFile of the user's is tried.
        let config = try TestServer.scratch().appendingPathComponent("config")
        try Data().write(to: config)
        options["ssh-config"] = config.path
        let backend = try SFTPBackend(configuration: try SFTPBackend.descriptor.validate(options))
        let error = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
            _ = try await backend.item(for: .rootContainer)
        }
        #expect(error?.message.contains("not the password") == false, "the password leaked into a message")
        await backend.close()
    }

    @Test func missingPasswordVariableIsNotAuthenticated() async throws {
        let server = try await TestServer.shared()
        var options = server.options(root: try server.makeFolder())
        options["identity"] = nil
        let name = "FPK_SFTP_TEST_UNSET_\(UUID().uuidString.prefix(6))"
        options["password-env"] = name
        let backend = try SFTPBackend(configuration: try SFTPBackend.descriptor.validate(options))
        let error = await Self.expectError(.notAuthenticated) { () async throws(FileProviderError) in
            _ = try await backend.item(for: .rootContainer)
        }
        #expect(error?.message.contains("the variable \(name) named by --password-env is not set") == true, "\(error?.message ?? "")")
        await backend.close()
    }

    @Test func nothingListeningIsServerUnreachable() async throws {
        let server = try await TestServer.shared()
        var options = server.options(root: "/")
        options["port"] = String(try FreePort.next())
        options["timeout"] = "5"
        let backend = try SFTPBackend(configuration: try SFTPBackend.descriptor.validate(options))
        let error = await Self.expectError(.serverUnreachable) { () async throws(FileProviderError) in
            _ = try await backend.item(for: .rootContainer)
        }
        #expect(error?.message.contains("refused") == true, "\(error?.message ?? "")")
        await backend.close()
    }

    @Test func missingIdentityFileIsInvalidArgument() async throws {
        var options = (try await TestServer.shared()).options(root: "/")
        options["identity"] = "/nonexistent/id_ed25519"
        #expect(throws: FileProviderError.self) {
            _ = try SFTPBackend(configuration: try SFTPBackend.descriptor.validate(options))
        }
    }

    @Test func sshConfigAliasIsResolved() async throws {
        let server = try await TestServer.shared()
        let scratch = try TestServer.scratch()
        let config = scratch.appendingPathComponent("config")
        let text = """
            # a comment
            Host other
                HostName 192.0.2.1
            Host my-test-server *.example
                HostName 127.0.0.1
                Port \(server.port)
                User \(server.user)
                IdentityFile \(server.userKey.path)
            Host *
                Port 1

            """
        try Data(text.utf8).write(to: config)
        let options = [
            "host": "my-test-server", "ssh-config": config.path, "known-hosts": server.knownHosts.path,
            "root": try server.makeFolder(),
        ]
        let backend = try SFTPBackend(configuration: try SFTPBackend.descriptor.validate(options))
        #expect(backend.resolvedSettings == nil, "the factory read the ssh configuration")
        let root = try await backend.item(for: .rootContainer)
        #expect(root.kind == .folder)
        #expect(backend.resolvedSettings?.host == "127.0.0.1")
        #expect(backend.resolvedSettings?.port == server.port)
        await backend.close()
    }

    @Test func descriptorDeclaresEveryOption() {
        let names = Set(SFTPBackend.descriptor.options.map(\.name))
        #expect(
            names == [
                "host", "port", "user", "root", "identity", "passphrase-env", "password-env", "netrc-file", "agent", "known-hosts",
                "accept-new-host-key", "connections", "timeout", "ssh-config",
            ])
        #expect(SFTPBackend.descriptor.options.allSatisfy { !$0.help.isEmpty })
        #expect(throws: FileProviderError.self) { _ = try SFTPBackend.descriptor.validate([:]) }
    }
}
