import Foundation
import ProviderTesting
import Testing

/// `--password-env`, `--passphrase-env` and `--token-env` take the name of an environment
/// variable, never the secret; a named variable that is not set is named in the error.
@Suite("CLI secret variables")
struct SecretVariableTests {
    @Test(arguments: [
        ["--backend", "sftp", "--host", "127.0.0.1", "--password-env", "Hunter2-literal-pw!"],
        ["--backend", "sftp", "--host", "127.0.0.1", "--passphrase-env", "my passphrase"],
        ["--backend", "sftp", "--host", "127.0.0.1", "--password-env=2FAST"],
        ["--backend", "media", "--url", "http://127.0.0.1:9", "--token-env", "tok=secret"],
        ["--backend", "webdav", "--url", "http://127.0.0.1:9", "--user", "u", "--password-env", "Hunter2-literal-pw!"],
    ])
    func aValueThatIsNotAVariableNameIsRefusedWithoutRepeatingIt(_ options: [String]) async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let result = try await cli.run(["domain", "add", "--mode", "placeholder-files", "d"] + options)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("takes the name of an environment variable"), "\(result.stderr)")
        for secret in ["Hunter2", "my passphrase", "2FAST", "tok=secret"] {
            #expect(!result.stderr.contains(secret), "the value given was repeated: \(result.stderr)")
        }
        #expect(try await cli.run(["domain", "list", "--json"]).stdout == "[]\n")
    }

    @Test func anUnsetVariableIsNamedNotTakenForAWrongSecret() async throws {
        let server = try await SSHServer.shared()
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        // A home without ~/.ssh and no agent: only the credentials named here are tried.
        let userHome = temp.url.appendingPathComponent("user")
        try FileManager.default.createDirectory(at: userHome, withIntermediateDirectories: true)
        let environment = ["SSH_AUTH_SOCK": "", "HOME": userHome.path]
        let base = [
            "--backend", "sftp", "--host", "127.0.0.1", "--port", String(server.port), "--known-hosts", server.knownHosts.path,
            "--root", try server.makeFolder(),
        ]
        let unset = "FPK_UNSET_\(UUID().uuidString.prefix(8).replacingOccurrences(of: "-", with: "_"))"

        let password = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "p"] + base + ["--password-env", unset], environment: environment)
        #expect(password.status != 0)
        #expect(password.stderr.contains("the variable \(unset) named by --password-env is not set"), "\(password.stderr)")

        let key = temp.url.appendingPathComponent("key")
        try await offThePool { try SSHServer.generateKey(at: key, passphrase: "correct horse") }
        let passphrase = try await cli.run(
            ["domain", "add", "--mode", "placeholder-files", "k"] + base + ["--identity", key.path, "--passphrase-env", unset],
            environment: environment)
        #expect(passphrase.status != 0)
        #expect(passphrase.stderr.contains("the variable \(unset) named by --passphrase-env is not set"), "\(passphrase.stderr)")
        #expect(!passphrase.stderr.contains("wrong passphrase"), "\(passphrase.stderr)")

        let token = try await cli.run([
            "domain", "add", "--mode", "placeholder-files", "m", "--backend", "media", "--url", "http://127.0.0.1:9", "--token-env", unset,
        ])
        #expect(token.status == 2)
        #expect(token.stderr.contains("the variable \(unset) named by --token-env is not set"), "\(token.stderr)")
        #expect(try await cli.run(["domain", "list", "--json"]).stdout == "[]\n")
    }
}
