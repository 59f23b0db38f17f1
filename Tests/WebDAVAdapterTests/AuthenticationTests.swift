import Foundation
import ProviderCore
import ProviderTesting
import Testing
import WebDAVAdapter

@Suite("WebDAV authentication against Apache")
struct AuthenticationTests {
    static let startup = Task { try await offThePool { try ApacheDAVServer(users: ["alice": "s3cret pw", "bob": "b0b-pw"]) } }

    @Test func basicCredentialsFromAVariableAndFromNetrc() async throws {
        let server = try await Self.startup.value
        let url = try server.makeFolder()
        let backend = try await WebDAVBackend(url: url, user: "alice", password: "s3cret pw")
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(page.items.isEmpty)
        await backend.close()

        let netrc = FileManager.default.temporaryDirectory.appendingPathComponent("netrc-\(UUID().uuidString)")
        try "machine 127.0.0.1 login bob password b0b-pw\n".write(to: netrc, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: netrc) }
        let fromNetrc = try await WebDAVBackend(url: url, netrcFile: netrc.path)
        #expect(try await fromNetrc.item(for: .rootContainer).kind == .folder)
        await fromNetrc.close()
    }

    @Test func aWrongPasswordIsNotAuthenticated() async throws {
        let server = try await Self.startup.value
        do {
            _ = try await WebDAVBackend(url: try server.makeFolder(), user: "alice", password: "wrong")
            Issue.record("a wrong password was accepted")
        } catch let error as FileProviderError {
            #expect(error.code == .notAuthenticated, "\(error)")
            #expect(error.message.contains("--password-env"), "\(error.message)")
        }
    }

    @Test func theDescriptorReadsThePasswordFromTheNamedVariable() async throws {
        let server = try await Self.startup.value
        let url = try server.makeFolder()
        setenv("FPK_WEBDAV_TEST_PASSWORD", "s3cret pw", 1)
        let backend = try await WebDAVBackend.descriptor.factory(
            BackendConfiguration(["url": url, "user": "alice", "password-env": "FPK_WEBDAV_TEST_PASSWORD"]))
        _ = try await backend.item(for: .rootContainer)
        await backend.close()
    }
}
