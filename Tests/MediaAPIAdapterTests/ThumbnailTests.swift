import Foundation
import MediaAPIAdapter
import ProviderCore
import ProviderEngine
import ProviderTesting
import Testing
import Thumbnails

@Suite("Thumbnails")
struct ThumbnailTests {
    @Test func thumbnailerCropsAndScales() throws {
        for (width, height) in [(300, 200), (50, 80), (120, 120)] {
            let thumbnail = try Thumbnailer.jpeg(from: try Samples.png(width, height), size: 120)
            #expect(isSquareJPEG(thumbnail, 120))
        }
        #expect(isSquareJPEG(try Thumbnailer.jpeg(from: try Samples.jpeg(), size: 33), 33))
        #expect(throws: FileProviderError.self) { try Thumbnailer.jpeg(from: Data("not an image".utf8)) }
    }

    @Test func localDomainThumbnailIsMadeFromTheMaterializedFile() async throws {
        let source = try Scratch()
        try source.write("pics/photo.png", try Samples.png())
        try source.write("notes.txt", Data("text".utf8))
        let engine = try Engine()
        try await engine.manager.addDomain(name: "local", kind: "local", options: ["root": source.url.path])
        let controller = try await engine.manager.controller(for: "local")
        _ = try await controller.sync()
        let thumbnail = try await controller.thumbnail(at: "pics/photo.png")
        #expect(isSquareJPEG(thumbnail, 120))
        #expect(FileManager.default.fileExists(atPath: engine.replica("local").appendingPathComponent("pics/photo.png").path))
        #expect(try await controller.thumbnail(at: "pics/photo.png") == thumbnail)
        let text = await #expect(throws: FileProviderError.self) { try await controller.thumbnail(at: "notes.txt") }
        #expect(text?.code == .notSupported)
        let folder = await #expect(throws: FileProviderError.self) { try await controller.thumbnail(at: "pics") }
        #expect(folder?.code == .notSupported)
        await engine.manager.close()
    }

    @Test func mediaDomainThumbnailComesFromPreview() async throws {
        let server = try await SharedServers.extended()
        let folder = try server.makeFolder()
        try server.put("photo.png", try Samples.png(), in: folder)
        let engine = try Engine()
        try await engine.manager.addDomain(name: "media", kind: "media", options: ["url": server.url, "root": folder])
        let controller = try await engine.manager.controller(for: "media")
        _ = try await controller.sync()
        #expect(isSquareJPEG(try await controller.thumbnail(at: "photo.png"), 120))
        #expect(isSquareJPEG(try await controller.thumbnail(at: "photo.png", size: 256), 256))
        // Made by the server: the file stays a placeholder.
        #expect(!FileManager.default.fileExists(atPath: engine.replica("media").appendingPathComponent("photo.png").path))
        await engine.manager.close()
    }
}
