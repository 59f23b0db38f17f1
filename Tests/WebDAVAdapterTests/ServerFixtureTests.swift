import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test servers themselves: a stopped Apache (or rclone) is gone, with every process of its group, at once
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
}
