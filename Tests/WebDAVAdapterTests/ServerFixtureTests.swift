import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test servers themselves: a stopped Apache (or rclone, or the Nextcloud emulation) is gone, with every process of its group, at once
/// (it once ignored SIGTERM, blocked in the test process and inherited, and its stop hung).
@Suite("Server fixtures")
struct ServerFixtureTests {
    @Test func stopKillsTheServerAndItsWorkers() async throws {
        let server = try await offThePool { try ApacheDAVServer() }
        let port = server.port
        #expect(MediaServer.rawRequest(port: port, "OPTIONS / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?.hasPrefix("HTTP/1.1 ") == true)
        let group = try #require(server.processGroup)
        try await offThePool { server.stop() }
        // Nothing of its group is left (kill(-group, 0) fails with ESRCH once every member was reaped or is gone).
        #expect(await eventually(timeout: 10) { kill(-group, 0) == -1 && errno == ESRCH })
        #expect(MediaServer.rawRequest(port: port, "OPTIONS / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n") == nil)
    }

    @Test func stopKillsRclone() async throws {
        let server = try await offThePool { try RcloneDAVServer() }
        let port = server.port
        #expect(MediaServer.rawRequest(port: port, "OPTIONS / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?.hasPrefix("HTTP/1.") == true)
        let group = try #require(server.processGroup)
        try await offThePool { server.stop() }
        #expect(await eventually(timeout: 10) { kill(-group, 0) == -1 && errno == ESRCH })
        #expect(MediaServer.rawRequest(port: port, "OPTIONS / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n") == nil)
    }

    /// What the servers share (`LoopbackDAVServer`): a folder made in the served root is
    /// served at `rootURL`, and a stop kills the group and removes the server's files.
    @Test(arguments: ["apache", "rclone", "nextcloud", "nginx", "lighttpd", "wsgidav"])
    func theSharedBaseServesMadeFoldersAndCleansUp(_ kind: String) async throws {
        let server: LoopbackDAVServer = try await offThePool {
            switch kind {
            case "apache": try ApacheDAVServer()
            case "rclone": try RcloneDAVServer()
            case "nginx": try NginxDAVServer()
            case "lighttpd": try LighttpdDAVServer()
            case "wsgidav": try WsgiDAVServer()
            default: try NextcloudDAVServer()
            }
        }
        let url = try server.makeFolder("made")
        #expect(url == server.rootURL + "/made")
        #expect(url.hasPrefix(server.url + "/"))
        var isFolder: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: server.root.appendingPathComponent("made").path, isDirectory: &isFolder))
        #expect(isFolder.boolValue)
        let path = String(url.dropFirst(server.url.count)) + "/"
        let reply = MediaServer.rawRequest(
            port: server.port, "PROPFIND \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nDepth: 0\r\nContent-Length: 0\r\n\r\n")
        #expect(reply?.hasPrefix("HTTP/1.1 207") == true || reply?.hasPrefix("HTTP/1.0 207") == true, "\(reply ?? "no reply")")
        let group = try #require(server.processGroup)
        try await offThePool { server.stop() }
        #expect(await eventually(timeout: 10) { kill(-group, 0) == -1 && errno == ESRCH })
        #expect(!FileManager.default.fileExists(atPath: server.root.path))
    }
}
