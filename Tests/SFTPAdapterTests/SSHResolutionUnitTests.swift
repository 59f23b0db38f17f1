import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import SFTPAdapter

#if canImport(Glibc)
    import Glibc
#endif

/// Resolution through OpenSSH's configuration without a server: `ssh -G` output read as hostile
/// input, tokens, ProxyJump hops, which agent, and `ssh -G` (real, or stand-ins that hang, fail
/// or print too much).
@Suite("SSH resolution units")
struct SSHResolutionUnitTests {
    static let hash = String(repeating: "ab12", count: 10)

    static func request(_ host: String = "box", configFile: String? = nil, timeout: Int = 10) -> ConnectionRequest {
        ConnectionRequest(
            host: host, acceptNewHostKey: false, timeout: timeout, rootPath: ".", configFile: configFile)
    }

    static func resolver(ssh: String? = nil, environment: [String: String] = [:]) -> SSHResolver {
        SSHResolver(sshPath: ssh, environment: environment, home: "/home/me", localUser: "me")
    }

    static func dump(_ lines: [String]) -> [UInt8] { Array((lines.joined(separator: "\n") + "\n").utf8) }

    static let good = [
        "host box", "user alice", "hostname files.example.com", "port 2222", "ciphers aes128-ctr",
        "identityfile ~/.ssh/%r@%h", "identityfile /keys/%C", "identitiesonly yes", "identityagent none",
        "userknownhostsfile /k/one /k/two", "proxyjump jump", "controlpath \(hash)", "hostname ignored.example",
    ]

    @Test func dumpGivesTheKeysWeUse() throws {
        let config = try SSHHostConfig(dump: Self.dump(Self.good))
        #expect(config.hostName == "files.example.com", "the first value wins, as ssh prints it once")
        #expect(config.port == 2222)
        #expect(config.user == "alice")
        #expect(config.identityFiles == ["~/.ssh/%r@%h", "/keys/%C"])
        #expect(config.identitiesOnly)
        #expect(config.identityAgent == "none")
        #expect(config.userKnownHostsFiles == ["/k/one", "/k/two"])
        #expect(config.proxyJump == "jump")
        #expect(config.proxyCommand == nil)
        #expect(config.connectionHash == Self.hash)
    }

    @Test func hostileDumpsAreRefused() {
        var cases: [(String, [UInt8])] = []
        for port in ["0", "65536", "22x", "-1", "99999999999999999999999", "", " 22"] {
            cases.append(("port \(port)", Self.dump(["hostname h", "user u", "port \(port)"])))
        }
        for name in ["-oProxyCommand=x", "a b", "a\u{1}b", "a\u{7f}b"] {
            cases.append(("hostname \(name)", Self.dump(["hostname \(name)", "user u", "port 22"])))
        }
        cases.append(("user with a control character", Self.dump(["hostname h", "user a\u{1b}[31m", "port 22"])))
        cases.append(("no hostname", Self.dump(["user u", "port 22"])))
        cases.append(("no port", Self.dump(["hostname h", "user u"])))
        cases.append(("not UTF-8", Self.dump(["hostname h", "user u", "port 22"]) + [0x75, 0x73, 0x65, 0x72, 0x20, 0xff, 0xfe]))
        cases.append(("too large", Array(repeating: UInt8(ascii: "a"), count: SSHHostConfig.outputLimit + 1)))
        cases.append(("a huge line", Self.dump(["hostname h", "user u", "port 22", "ciphers " + String(repeating: "x", count: 20000)])))
        cases.append(("too many identities", Self.dump(["hostname h", "user u", "port 22"] + (0..<65).map { "identityfile /k\($0)" })))
        cases.append(("IdentitiesOnly maybe", Self.dump(["hostname h", "user u", "port 22", "identitiesonly maybe"])))
        cases.append(("a ProxyJump with a space", Self.dump(["hostname h", "user u", "port 22", "proxyjump a b"])))
        for (what, bytes) in cases {
            #expect(throws: FileProviderError.self, "\(what)") { _ = try SSHHostConfig(dump: bytes) }
        }
    }

    @Test func noneMeansNotSet() throws {
        let config = try SSHHostConfig(
            dump: Self.dump(["hostname h", "user u", "port 22", "proxyjump none", "proxycommand none", "userknownhostsfile none"]))
        #expect(config.proxyJump == nil)
        #expect(config.proxyCommand == nil)
        #expect(config.userKnownHostsFiles.isEmpty)
    }

    @Test func tokensExpandAsSSHDoes() {
        let tokens = SSHTokens(
            home: "/home/me", localUser: "me", hostName: "10.0.0.5", port: 2222, remoteUser: "alice", originalHost: "box",
            connectionHash: Self.hash, proxyJump: nil, environment: ["FPK_KEYS": "/srv/keys"])
        #expect(tokens.expand("~/.ssh/%r@%h-%p") == "/home/me/.ssh/alice@10.0.0.5-2222")
        #expect(tokens.expand("%d/%u/%n/%k/%%/%C") == "/home/me/me/box/box/%/\(Self.hash)")
        #expect(tokens.expand("${FPK_KEYS}/id") == "/srv/keys/id")
        #expect(tokens.expand("${FPK_UNSET_VARIABLE}/id") == "${FPK_UNSET_VARIABLE}/id")
        #expect(tokens.expand("%z and a trailing %") == "%z and a trailing %")
        #expect(tokens.expand("~") == "/home/me")
        #expect(tokens.expand("a~b") == "a~b")
        #expect(tokens.expand("nc %h %p", tilde: false) == "nc 10.0.0.5 2222")
        #expect(SSHTokens.expandTilde("~root/x", home: "/home/me") == "/root/x")
    }

    @Test func proxyJumpHopsAreReadAsSSHPrintsThem() throws {
        let plain = try ProxyCommand.hop("jump", in: "jump")
        #expect(plain.user == nil && plain.host == "jump" && plain.port == nil)
        let full = try ProxyCommand.hop("me@jump.example:2200", in: "x")
        #expect(full.user == "me" && full.host == "jump.example" && full.port == 2200)
        let v6 = try ProxyCommand.hop("me@[::1]:22", in: "x")
        #expect(v6.user == "me" && v6.host == "::1" && v6.port == 22)
        let v4 = try ProxyCommand.hop("[10.0.0.1]:99", in: "x")
        #expect(v4.host == "10.0.0.1" && v4.port == 99)
        for bad in ["a:0", "a:65536", "a:port", "-oProxyCommand=x", "[::1", "[::1]x", "@", "a b@c"] {
            #expect(throws: FileProviderError.self, "\(bad)") { _ = try ProxyCommand.hop(bad, in: bad) }
        }
    }

    @Test func proxyJumpRunsSSHMinusW() throws {
        let chain = try ProxyCommand(
            jump: "a,b@[::1]:22,u@c:99", to: "10.0.0.5", port: 2222, ssh: "/usr/bin/ssh", configFile: "/cfg")
        #expect(
            chain.arguments == [
                "/usr/bin/ssh", "-o", "BatchMode=yes", "-F", "/cfg", "-l", "u", "-p", "99", "-J", "a,b@[::1]:22", "-W",
                "[10.0.0.5]:2222", "--", "c",
            ])
        #expect(chain.summary == "ProxyJump a,b@[::1]:22,u@c:99")
        #expect(chain.hint.contains("`ssh -F /cfg -l u -p 99 -J a,b@[::1]:22 c`"), "\(chain.hint)")
        let single = try ProxyCommand(jump: "jump", to: "h", port: 22, ssh: "/usr/bin/ssh", configFile: nil)
        #expect(single.arguments == ["/usr/bin/ssh", "-o", "BatchMode=yes", "-W", "[h]:22", "--", "jump"])
        let command = ProxyCommand(shellCommand: "nc h 22", environment: ["SHELL": "relative"])
        #expect(command.arguments == ["/bin/sh", "-c", "exec nc h 22"])
    }

    @Test func theAgentIsUsedAsSSHUsesIt() {
        let socket = ["SSH_AUTH_SOCK": "/run/agent.sock", "OTHER": "/run/other.sock"]
        func pick(_ agent: Bool?, _ identityAgent: String?, _ environment: [String: String]) -> String? {
            var request = Self.request()
            request.agent = agent
            var config = SSHHostConfig(hostName: "h", port: 22, user: "u")
            config.identityAgent = identityAgent
            return Self.resolver(environment: environment).agentSocket(request, config)
        }
        #expect(pick(nil, nil, socket) == "/run/agent.sock", "SSH_AUTH_SOCK, without --agent")
        #expect(pick(nil, nil, [:]) == nil)
        #expect(pick(nil, nil, ["SSH_AUTH_SOCK": ""]) == nil)
        #expect(pick(false, nil, socket) == nil, "--agent false")
        #expect(pick(nil, "none", socket) == nil, "IdentityAgent none")
        #expect(pick(true, "none", socket) == "/run/agent.sock", "--agent wins over IdentityAgent none")
        #expect(pick(nil, "SSH_AUTH_SOCK", socket) == "/run/agent.sock")
        #expect(pick(nil, "$OTHER", socket) == "/run/other.sock")
        #expect(pick(nil, "$UNSET", socket) == nil)
        #expect(pick(nil, "~/agent.sock", [:]) == "/home/me/agent.sock")
    }

    @Test func explicitOptionsWinOverTheConfiguration() throws {
        let folder = try TestServer.scratch()
        let key = folder.appendingPathComponent("alice@files.example.com")
        try Data("k".utf8).write(to: key)
        var config = try SSHHostConfig(dump: Self.dump(Self.good))
        config.identityFiles = [folder.path + "/%r@%h", folder.path + "/missing", folder.path + "/%r@%h"]
        var request = Self.request()
        let settings = try Self.resolver().settings(request, config)
        #expect(settings.identityFiles == [key.path], "expanded, existing, once")
        #expect(settings.knownHostsPath == "/k/one")
        #expect(settings.otherKnownHostsFiles == ["/k/two"])
        #expect(settings.identitiesOnly)
        #expect(settings.alias == "box")
        #expect(settings.proxy == nil, "ProxyJump needs an ssh program")
        let given = folder.appendingPathComponent("given%h")
        try Data("k".utf8).write(to: given)
        request.identityFile = given.path
        request.knownHostsPath = "/given/known_hosts"
        let explicit = try Self.resolver(ssh: "/usr/bin/ssh").settings(request, config)
        #expect(explicit.identityFiles == [given.path], "--identity alone, its name not expanded")
        #expect(explicit.knownHostsPath == "/given/known_hosts")
        #expect(explicit.otherKnownHostsFiles.isEmpty)
        #expect(explicit.proxy?.arguments.suffix(3) == ["[files.example.com]:2222", "--", "jump"])
        config.proxyJump = nil
        config.proxyCommand = "nc %h %p"
        #expect(try Self.resolver().settings(request, config).proxy?.arguments.last == "exec nc files.example.com 2222")
        config.proxyUseFdpass = true
        #expect(throws: FileProviderError.self) { _ = try Self.resolver().settings(request, config) }
    }

    @Test func sshMinusGGetsTheHostAfterTheOptions() {
        var request = Self.request("-oProxyCommand=x", configFile: "/cfg")
        request.port = 2200
        request.user = "bob"
        #expect(
            Self.resolver().arguments("/usr/bin/ssh", request) == [
                "/usr/bin/ssh", "-G", "-T", "-F", "/cfg", "-p", "2200", "-l", "bob", "-o", "ControlPath=%C", "--",
                "-oProxyCommand=x",
            ])
    }

    // MARK: ssh -G itself

    /// `resolver.resolve(request)` off the cooperative pool (it runs a program and waits).
    static func resolve(_ resolver: SSHResolver, _ request: ConnectionRequest) async throws(FileProviderError)
        -> ConnectionSettings
    {
        do {
            return try await offThePool { try resolver.resolve(request) }
        } catch {
            throw FileProviderError.wrap(error)
        }
    }

    static var ssh: String { get throws { try #require(SSHResolver.findSSH(), "ssh is not installed (apt install openssh-client)") } }

    @Test func includeMatchAndTokensAreOpenSSHs() async throws {
        let folder = try TestServer.scratch()
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("hosts.d"), withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("config")
        try Data("Include \(folder.path)/hosts.d/*.conf\n".utf8).write(to: config)
        let key = folder.appendingPathComponent("carol-key")
        try Data("k".utf8).write(to: key)
        try Data(
            """
            Host fpk-included
                HostName 127.0.0.5
                Port 2022
            Match host 127.0.0.5
                User carol
                IdentityFile \(folder.path)/%r-key
                UserKnownHostsFile \(folder.path)/known_%h
                IdentityAgent none

            """.utf8
        ).write(to: folder.appendingPathComponent("hosts.d/test.conf"))
        let settings = try await Self.resolve(
            Self.resolver(ssh: try Self.ssh, environment: ["SSH_AUTH_SOCK": "/run/agent.sock"]),
            Self.request("fpk-included", configFile: config.path))
        #expect(settings.host == "127.0.0.5")
        #expect(settings.port == 2022)
        #expect(settings.user == "carol")
        #expect(settings.identityFiles == [key.path])
        #expect(settings.knownHostsPath == folder.path + "/known_127.0.0.5")
        #expect(settings.agentSocket == nil, "IdentityAgent none")
        // The built-in parser reads neither Include nor Match.
        let fallback = try await Self.resolve(
            Self.resolver(environment: ["SSH_AUTH_SOCK": "/run/agent.sock"]), Self.request("fpk-included", configFile: config.path))
        #expect(fallback.host == "fpk-included")
        #expect(fallback.agentSocket == "/run/agent.sock")
    }

    @Test func aConfigurationSSHRefusesIsAnError() async throws {
        let folder = try TestServer.scratch()
        let config = folder.appendingPathComponent("config")
        try Data("Host broken\n    Port many\n".utf8).write(to: config)
        let ssh = try Self.ssh
        do {
            _ = try await Self.resolve(Self.resolver(ssh: ssh), Self.request("broken", configFile: config.path))
            Issue.record("a broken configuration was accepted")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("ssh -G -F \(config.path) broken"), "\(error.message)")
            #expect(error.message.contains("many"), "ssh's own message: \(error.message)")
        }
        let missing = folder.appendingPathComponent("absent").path
        for ssh in [ssh, nil] {
            await #expect(throws: FileProviderError.self, "\(ssh ?? "built-in")") {
                _ = try await Self.resolve(Self.resolver(ssh: ssh), Self.request("box", configFile: missing))
            }
        }
    }

    /// A timeout whose milliseconds do not fit poll's Int32 is refused when the domain is
    /// configured (it trapped when the connection waited for the server).
    @Test func aTimeoutPollCannotWaitIsRefused() throws {
        for (given, accepted) in [("1", true), ("86400", true), ("0", false), ("86401", false), ("3000000", false)] {
            let options = try SFTPBackend.descriptor.validate(["host": "box", "timeout": given])
            do {
                let request = try SFTPBackend.request(options)
                #expect(accepted && request.timeout == Int(given), "--timeout \(given)")
            } catch {
                #expect(!accepted && error.code == .invalidArgument, "--timeout \(given): \(error)")
            }
        }
    }

    /// A stand-in for `ssh` that runs `script`.
    static func fakeSSH(_ script: String) throws -> String {
        let path = try TestServer.scratch().appendingPathComponent("ssh").path
        try ExecutableScript.write("#!/bin/sh\n\(script)\n", to: path)
        return path
    }

    @Test func sshMinusGThatHangsOrFloodsIsStopped() async throws {
        let hangs = try Self.fakeSSH("exec sleep 600")
        let started = Date()
        do {
            _ = try await Self.resolve(Self.resolver(ssh: hangs), Self.request(timeout: 1))
            Issue.record("a hanging ssh -G was waited for")
        } catch {
            #expect(error.code == .serverUnreachable)
            #expect(error.message.contains("did not finish within 1 s"), "\(error.message)")
        }
        // Stopped, not waited for (600 s); a loaded machine may take a while to reap it.
        #expect(Date().timeIntervalSince(started) < 60)
        let floods = try Self.fakeSSH("exec yes 'identityfile /k'")
        do {
            _ = try await Self.resolve(Self.resolver(ssh: floods), Self.request())
            Issue.record("endless output was read")
        } catch {
            #expect(error.message.contains("more than"), "\(error.message)")
        }
        let lies = try Self.fakeSSH("printf 'hostname h\\nuser u\\nport 70000\\n'")
        await #expect(throws: FileProviderError.self) { _ = try await Self.resolve(Self.resolver(ssh: lies), Self.request()) }
        let fails = try Self.fakeSSH("echo 'first line' >&2; echo 'box: the last word' >&2; exit 255")
        do {
            _ = try await Self.resolve(Self.resolver(ssh: fails), Self.request())
            Issue.record("a failed ssh -G was accepted")
        } catch {
            #expect(error.message.contains("(exit status 255): first line; box: the last word"), "\(error.message)")
        }
    }
}
