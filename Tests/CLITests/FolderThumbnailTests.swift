import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Thumbnails `serve` makes by itself (``FolderThumbnails``): a program lists a folder of a
/// dataless domain (FUSE; fanotify, as root on Linux ≥ 6.14 as the other on-access suites) on
/// the real media-server (which makes thumbnails), and its dataless PNG gets valid
/// freedesktop.org thumbnails (normal and large, with `Thumb::URI` and `Thumb::MTime`) in the
/// serving user's cache, without its contents being fetched; a program a rule denies gets none
/// made for it. The FUSE mount runs in the second `swift test` process (Makefile).
@Suite("Folder thumbnails made by serve", .serialized, .timeLimit(.minutes(5)))
struct FolderThumbnailTests {
    /// A `width`×`height` RGB PNG, made by python's zlib.
    static func png(width: Int, height: Int, in temp: TemporaryFolder) async throws -> Data {
        let path = temp.url.appendingPathComponent("made-\(width)x\(height).png").path
        let made = try await runProgram([
            "python3", "-c",
            """
            import struct, sys, zlib
            w, h = int(sys.argv[2]), int(sys.argv[3])
            rows = b"".join(b"\\x00" + b"".join(bytes((x % 256, y % 256, (x + y) % 256)) for x in range(w)) for y in range(h))
            def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
            open(sys.argv[1], "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
            """,
            path, String(width), String(height),
        ])
        try #require(made.succeeded, "\(made)")
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    /// The cache file of `uri` of a size (`normal`, `large`), its name the MD5 `md5sum` gives.
    static func cacheFile(of uri: String, size: String, home: URL) async throws -> String {
        let md5 = try await runProgram(["sh", "-c", "printf %s \"$0\" | md5sum", uri])
        let name = String(decoding: md5.output, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
        return home.appendingPathComponent(".cache/thumbnails/\(size)/\(name).png").path
    }

    /// A program that lists `folder` and stays running, as a file manager does (in the fanotify
    /// layout serve reads who opened a folder from /proc when it reads the notification, which on
    /// a loaded machine can come after a quick `ls` has exited); returns once it listed `name`.
    static func viewer(listing folder: String, showing name: String, in temp: TemporaryFolder) async throws -> pid_t {
        let output = temp.url.appendingPathComponent("viewer-\(UUID().uuidString).out").path
        let viewer = try ChildProcess.spawn(
            "/usr/bin/python3",
            ["-c", "import os, sys, time; print('\\n'.join(os.listdir(sys.argv[1])), flush=True); time.sleep(300)", folder],
            output: output, error: output, ownSession: true)
        let listed = await waitUntil(timeout: 60) { (try? String(contentsOfFile: output, encoding: .utf8))?.contains(name) == true }
        #expect(listed, "\((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
        return viewer
    }

    /// Kills and reaps a ``viewer(listing:showing:in:)``.
    static func end(_ viewer: pid_t) {
        kill(viewer, SIGKILL)
        var status: Int32 = 0
        waitpid(viewer, &status, 0)
    }

    @Test(arguments: OnAccessLayout.allCases)
    func aDatalessImageInAFolderAProgramListsGetsThumbnailsWithoutItsContentsBeingFetched(layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.media, temp: temp)
        defer { store.media?.stop() }
        let image = try await Self.png(width: 300, height: 200, in: temp)
        let files = [
            "photos/photo.png": image, "photos/notes.txt": Data("not an image\n".utf8), "denied/other.png": image,
        ]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files, layout: layout)
        try await domain.startServe()
        // Opens are watched once serve says it serves (the fanotify mount appears before).
        let serving = await waitUntil(timeout: 30) { domain.logs.contains("serving d") }
        try #require(serving, "\(domain.logs)")

        // A program a rule denies (under an indexer's name) lists one folder, then `ls` another:
        // the thumbnails are made one folder at a time in the order of the opens, so once the
        // second folder's are there, the first's would be too had its open been queued.
        let indexer = temp.url.appendingPathComponent("programs/baloo_file").path
        try FileManager.default.createDirectory(atPath: temp.url.appendingPathComponent("programs").path, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "/bin/ls", toPath: indexer)
        let deniedListing = try await runProgram([indexer, domain.replica + "/denied"])
        #expect(deniedListing.succeeded, "\(deniedListing)")
        // As a file manager does, the program that lists the folder stays running.
        let viewer = try await Self.viewer(listing: domain.replica + "/photos", showing: "photo.png", in: temp)
        defer { Self.end(viewer) }

        let uri = "file://" + domain.replica + "/photos/photo.png"
        let normal = try await Self.cacheFile(of: uri, size: "normal", home: domain.cli.home)
        let large = try await Self.cacheFile(of: uri, size: "large", home: domain.cli.home)
        let made = await waitUntil(timeout: 60) { fileStatus(normal) != nil && fileStatus(large) != nil }
        try #require(made, "no thumbnails at \(normal) and \(large): \(domain.serve?.output ?? "")")

        // Its modification time as programs see it through the mount (`stat` fetches nothing).
        let shown = try #require(fileStatus(domain.replica + "/photos/photo.png"))
        for (path, limit) in [(normal, 128), (large, 256)] {
            let data = try #require(FileManager.default.contents(atPath: path))
            let parsed = try #require(FreedesktopThumbnailTests.png(data), "\(path) is not a PNG")
            #expect(parsed.text["Thumb::URI"] == uri, "\(parsed.text)")
            #expect(parsed.text["Thumb::MTime"] == String(shown.st_mtim.tv_sec), "\(parsed.text)")
            #expect(max(parsed.width, parsed.height) <= limit && parsed.width > 0 && parsed.height > 0, "\(parsed.width)×\(parsed.height)")
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
        // Nothing fetched: no fetch in serve's log; the backing file (none while a FUSE folder
        // is listed from the database) without blocks beyond the first.
        #expect(domain.fetches(of: "photos/photo.png") == 0, "\(domain.logs)")
        let backing = fileStatus(domain.backing + "/photos/photo.png")
        #expect(backing == nil || backing!.st_blocks <= 8, "\(backing?.st_blocks ?? 0) blocks")
        let listing = try #require(try await domain.cli.json(["ls", "d:/photos"]) as? [[String: Any]])
        #expect(listing.first { ($0["path"] as? String) == "/photos/photo.png" }?["state"] as? String != "materialized", "\(listing)")
        // The text file has none; the denied program's folder has none.
        let text = try await Self.cacheFile(of: "file://" + domain.replica + "/photos/notes.txt", size: "normal", home: domain.cli.home)
        #expect(fileStatus(text) == nil)
        let denied = try await Self.cacheFile(of: "file://" + domain.replica + "/denied/other.png", size: "normal", home: domain.cli.home)
        #expect(fileStatus(denied) == nil, "a thumbnail was made for a folder a denied program opened")
    }

    /// `serve --no-thumbnails`: a program lists a folder of dataless images and no thumbnail is
    /// made, and the store's preview endpoint is never asked (the media-server's own request
    /// log). serve answers a read of a file of that folder after the listing: an open it would
    /// have queued thumbnails for was handled by then (with thumbnails on, the same listing
    /// gets them: the test above).
    @Test(arguments: OnAccessLayout.allCases)
    func withNoThumbnailsAnOpenedFolderOfDatalessImagesGetsNoneAndTheStoreIsNotAsked(layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.media, temp: temp, mediaArguments: ["--verbose"])
        defer { store.media?.stop() }
        let image = try await Self.png(width: 300, height: 200, in: temp)
        let files = ["photos/a.png": image, "photos/b.png": image, "photos/notes.txt": Data("not an image\n".utf8)]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files, layout: layout)
        try await domain.startServe(["--no-thumbnails"])
        let serving = await waitUntil(timeout: 30) { domain.logs.contains("serving d") }
        try #require(serving, "\(domain.logs)")

        let viewer = try await Self.viewer(listing: domain.replica + "/photos", showing: "a.png", in: temp)
        defer { Self.end(viewer) }
        let read = try await runProgram(["cat", domain.replica + "/photos/notes.txt"])
        #expect(read.succeeded && read.output == Data("not an image\n".utf8), "\(read)")

        let media = try #require(store.media)
        #expect(media.requestCount("GET /file") > 0, "the media-server logs no requests")
        #expect(media.requestCount("GET /preview") == 0)
        for name in ["a.png", "b.png"] {
            let normal = try await Self.cacheFile(of: "file://" + domain.replica + "/photos/" + name, size: "normal", home: domain.cli.home)
            #expect(fileStatus(normal) == nil, "a thumbnail of \(name) was made with --no-thumbnails")
        }
    }
}
