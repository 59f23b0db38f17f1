import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// A `PUT` of a file (``RequestBody/file(path:size:)``): a small one read whole and sent with
/// the request's head, a large one streamed; both reach the server byte for byte, and the
/// engine's sink sees every byte either way.
@Suite struct FileUploadTests {
    static func client(_ server: FaultServer) throws -> HTTPClient {
        var settings = HTTPOptions(connectTimeout: 5, timeout: 5, connections: 1, retries: 0).clientSettings(baseURL: server.url)
        settings.backoff = 0.01
        return try HTTPClient(settings: settings)
    }

    /// Sends `bytes` from a file with `size` as its announced size; returns the reply or error,
    /// and the hash the file's sink computed (`nil`: none).
    static func put(
        _ bytes: [UInt8], size: Int64? = nil, to server: FaultServer, in folder: TemporaryFolder
    ) async throws -> (Result<HTTPReply, FileProviderError>, String?) {
        let file = folder.url("upload-\(bytes.count)")
        try Data(bytes).write(to: file)
        let client = try client(server)
        defer { client.close() }
        let sink = ContentSink { LibCryptoSHA256() }
        var request = HTTPRequest("PUT", "/file")
        request.body = .file(path: file.path, size: size ?? Int64(bytes.count))
        let result = await ContentSink.feeding([file: sink]) { () async -> Result<HTTPReply, FileProviderError> in
            do throws(FileProviderError) {
                return .success(try await client.send(request, cancellation: CancellationFlag()))
            } catch {
                return .failure(error)
            }
        }
        let hash = (try? result.get()) != nil ? await sink.finish(size: Int64(bytes.count)) : nil
        return (result, hash)
    }

    @Test(arguments: [1, 4096, 64 * 1024 - 1, 64 * 1024, 300 * 1024])
    func aFileReachesTheServerWholeAndItsSinkSeesEveryByte(size: Int) async throws {
        let server = try FaultServer { _ in .reply(status: 201, headers: [:], body: Data()) }
        defer { server.stop() }
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let (result, hash) = try await Self.put(bytes, to: server, in: folder)
        #expect(try result.get().status == 201)
        let seen = try #require(server.requests.first)
        #expect(seen.method == "PUT")
        #expect(seen.headers["content-type"] == "application/octet-stream")
        #expect(seen.headers["content-length"] == String(size))
        #expect(seen.body == Data(bytes))
        var digest = LibCryptoSHA256()
        bytes.withUnsafeBytes { digest.update($0) }
        #expect(hash == digest.finish())
    }

    /// A file shorter than the size its request announces (it shrank since): nothing is sent,
    /// and the error says why.
    @Test func aSmallFileShorterThanItsSizeSendsNothing() async throws {
        let server = try FaultServer { _ in .reply(status: 201, headers: [:], body: Data()) }
        defer { server.stop() }
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (result, _) = try await Self.put(Array(repeating: 7, count: 100), size: 4096, to: server, in: folder)
        guard case .failure(let error) = result else {
            Issue.record("a short file was sent: \(result)")
            return
        }
        #expect(error.code == .localIOFailure)
        #expect(error.message.contains("ended after 100 of its 4096 bytes"), "\(error.message)")
        #expect(server.requests.isEmpty)
    }
}
