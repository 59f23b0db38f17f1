import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `thumbnail --freedesktop`: a file manager's thumbnail of a dataless image, made from the
/// store's thumbnail (the media API's `/preview` on the real media-server) without fetching
/// the image, checked against the freedesktop.org standard's rules: its place
/// (`$XDG_CACHE_HOME/thumbnails/normal/<md5 of the URI>.png`, the MD5 from `md5sum`), a PNG of at
/// most 128 pixels a side, and the required `Thumb::URI` and `Thumb::MTime` keys.
@Suite("Freedesktop thumbnails", .serialized, .timeLimit(.minutes(5)))
struct FreedesktopThumbnailTests {
    /// The `tEXt` chunks and the size of a PNG.
    static func png(_ data: Data) -> (text: [String: String], width: Int, height: Int)? {
        let bytes = [UInt8](data)
        guard bytes.count > 33, bytes[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] else { return nil }
        func word(_ at: Int) -> Int { Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]) }
        var text: [String: String] = [:]
        var offset = 8
        while offset + 12 <= bytes.count {
            let length = word(offset)
            let type = String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self)
            guard offset + 12 + length <= bytes.count else { return nil }
            let body = bytes[(offset + 8)..<(offset + 8 + length)]
            if type == "tEXt", let zero = body.firstIndex(of: 0) {
                text[String(decoding: body[..<zero], as: UTF8.self)] = String(decoding: body[(zero + 1)...], as: UTF8.self)
            }
            offset += 12 + length
        }
        return (text, word(16), word(20))
    }

    @Test func aDatalessImageGetsAValidThumbnailWhereFileManagersLookWithoutBeingFetched() async throws {
        let temp = try TemporaryFolder()
        let server = try await offThePool { try MediaServer() }
        defer { server.stop() }
        let folder = try server.makeFolder()
        let image = server.root.appendingPathComponent(folder).appendingPathComponent("photo.png").path
        // A 300×200 RGB PNG, made by python's zlib.
        let made = try await runProgram([
            "python3", "-c",
            """
            import struct, sys, zlib
            w, h = 300, 200
            rows = b"".join(b"\\x00" + b"".join(bytes((x % 256, y % 256, (x + y) % 256)) for x in range(w)) for y in range(h))
            def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
            open(sys.argv[1], "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
            """,
            image,
        ])
        try #require(made.succeeded, "\(made)")
        let cli = CLIRunner(in: temp)
        let replica = temp.url.appendingPathComponent("replica").path
        let added = try await cli.run([
            "domain", "add", "m", "--backend", "media", "--url", server.url, "--root", folder, "--mode", "dataless", "--replica", replica,
        ])
        try #require(added.status == 0, "\(added)")
        #expect(try await cli.run(["sync", "m"]).status == 0)

        let written = try await cli.run(["thumbnail", "m:/photo.png", "--freedesktop", "normal"])
        #expect(written.status == 0, "\(written)")
        let uri = "file://" + replica + "/photo.png"
        let md5 = try await runProgram(["sh", "-c", "printf %s \"$0\" | md5sum", uri])
        let name = String(decoding: md5.output, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
        let path = cli.home.appendingPathComponent(".cache/thumbnails/normal/\(name).png").path
        #expect(written.stdout.contains(path), "\(written.stdout) is not \(path)")
        let data = try #require(FileManager.default.contents(atPath: path), "no thumbnail at \(path)")
        let parsed = try #require(Self.png(data), "not a PNG")
        #expect(parsed.text["Thumb::URI"] == uri, "\(parsed.text)")
        let backing = try #require(fileStatus(cli.home.appendingPathComponent("replicas/m/photo.png").path))
        #expect(parsed.text["Thumb::MTime"] == String(backing.st_mtim.tv_sec), "\(parsed.text)")
        #expect(max(parsed.width, parsed.height) <= 128 && parsed.width > 0 && parsed.height > 0, "\(parsed.width)×\(parsed.height)")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Not fetched: still dataless, no blocks beyond the first.
        #expect(backing.st_blocks <= 8)
        let listing = try #require(try await cli.json(["ls", "m:/"]) as? [[String: Any]])
        #expect(listing.first { ($0["path"] as? String) == "/photo.png" }?["state"] as? String == "placeholder", "\(listing)")

        // A store without thumbnails: no preview of a file not downloaded (it would need its bytes).
        let store = temp.url.appendingPathComponent("local").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: image, toPath: store + "/photo.png")
        #expect(
            try await cli.run(["domain", "add", "--mode", "placeholder-files", "l", "--backend", "local", "--root", store]).status == 0)
        #expect(try await cli.run(["sync", "l"]).status == 0)
        let refused = try await cli.run(["thumbnail", "l:/photo.png", "--freedesktop", "large"])
        #expect(refused.status == 1 && refused.stderr.contains("makes no thumbnails"), "\(refused)")
        let usage = try await cli.run(["thumbnail", "m:/photo.png"])
        #expect(usage.status == 2 && usage.stderr.contains("--freedesktop"), "\(usage)")
    }
}
