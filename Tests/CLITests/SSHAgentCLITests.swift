import Foundation
import ProviderTesting
import Testing

/// `domain add` of an SFTP domain signs in with the keys of ssh-agent when `SSH_AUTH_SOCK` is
/// set, without `--agent`, as `ssh` does.
@Suite("CLI ssh-agent")
struct SSHAgentCLITests {
    @Test func domainAddUsesTheAgentWithoutAnOption() async throws {
        let server = try await SSHServer.shared()
        let agent = try await SSHAgent.started()
        try await offThePool { try agent.add(server.userKey) }
        let temp = try TemporaryFolder()
        // A home without ~/.ssh: the agent's key is the only credential.
        let userHome = temp.url.appendingPathComponent("user")
        try FileManager.default.createDirectory(at: userHome, withIntermediateDirectories: true)
        let cli = CLIRunner(in: temp)
        func add(_ name: String, agentSocket: String) async throws -> CLIRunner.Result {
            try await cli.run(
                [
                    "domain", "add", "--mode", "placeholder-files", name, "--backend", "sftp", "--host", "127.0.0.1", "--port",
                    String(server.port),
                    "--known-hosts", server.knownHosts.path, "--root", try server.makeFolder(),
                ], environment: ["SSH_AUTH_SOCK": agentSocket, "HOME": userHome.path])
        }
        let added = try await add("work", agentSocket: agent.socket)
        #expect(added.status == 0, "\(added.stderr)")
        let without = try await add("nothing", agentSocket: "")
        #expect(without.status != 0)
        #expect(without.stderr.contains("no credentials: no ssh-agent (SSH_AUTH_SOCK is not set)"), "\(without.stderr)")
        _ = try await offThePool { agent.stop() }
    }
}
