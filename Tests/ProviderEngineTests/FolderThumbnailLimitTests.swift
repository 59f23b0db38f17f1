import Foundation
import Logging
import MediaAPIAdapter
import ProviderCore
import ProviderEngine
import ProviderService
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// ``FolderThumbnails``' per-open limit, set small, against the real media-server (which makes
/// the previews and, with `--verbose`, logs each request): one open of a folder of five
/// dataless images makes as many thumbnails as the limit allows and asks the store for no
/// more; the next open goes on after them.
@Suite("Folder thumbnails' per-open limit", .serialized, .timeLimit(.minutes(3)))
struct FolderThumbnailLimitTests {
    @Test func oneOpenMakesAtMostTheLimitAndTheNextGoesOnAfterThem() async throws {
        let temp = try TemporaryFolder()
        let server = try await offThePool { try MediaServer(arguments: ["--verbose"]) }
        defer { server.stop() }
        let root = try server.makeFolder()
        let store = server.root.appendingPathComponent(root)
        for folder in ["photos", "other"] {
            let path = store.appendingPathComponent(folder).path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let wrote = try await offThePool {
                try ChildProcess.capture(
                    MediaServer.locateBinary().path, ["--root", path, "--write-samples", folder == "photos" ? "5" : "1"])
            }
            guard case .exited(0) = wrote.ending else {
                Issue.record("media-server --write-samples: \(String(decoding: wrote.errorOutput, as: UTF8.self))")
                return
            }
        }
        let manager = try ProviderManager(
            home: temp.url.appendingPathComponent("home"), registry: BackendRegistry([MediaBackend.descriptor]))
        try await manager.addDomain(
            name: "m", kind: "media", options: ["url": server.url, "root": root],
            replicaPath: temp.url.appendingPathComponent("replica").path)
        try await manager.controller(for: "m").sync()

        let cache = temp.url.appendingPathComponent("cache")
        let thumbnails = FolderThumbnails(manager: manager, cacheHome: cache, perOpenLimit: 2, logger: Logger(label: "test"))
        thumbnails.start()
        // A program of this user that stays running (a file manager), which no rule limits.
        let viewer = try ChildProcess.spawn(
            "/bin/sleep", ["300"], output: temp.url.appendingPathComponent("sleep.out").path,
            error: temp.url.appendingPathComponent("sleep.out").path)
        defer {
            kill(viewer, SIGKILL)
            var status: Int32 = 0
            waitpid(viewer, &status, 0)
        }
        // Folders are worked on one at a time, in the order of their opens: once `other`'s one
        // thumbnail is made, `photos`' open is done.
        thumbnails.opened(domain: "m", path: "photos", process: viewer, user: getuid())
        thumbnails.opened(domain: "m", path: "other", process: viewer, user: getuid())
        let done = await eventually(timeout: 60) { thumbnails.madeCount >= 3 }
        #expect(done, "made \(thumbnails.madeCount)")
        #expect(thumbnails.madeCount == 3)
        #expect(server.requestCount("GET /preview") == 3)

        // The next open of `photos` goes on after the two made.
        thumbnails.opened(domain: "m", path: "photos", process: viewer, user: getuid())
        thumbnails.opened(domain: "m", path: "other", process: viewer, user: getuid())
        let next = await eventually(timeout: 60) { thumbnails.madeCount >= 5 }
        #expect(next, "made \(thumbnails.madeCount)")
        await thumbnails.stop()
        #expect(thumbnails.madeCount == 5)
        #expect(server.requestCount("GET /preview") == 5)
    }
}
