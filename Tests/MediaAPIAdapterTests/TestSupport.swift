import Foundation
import LocalAdapter
import MediaAPIAdapter
import ProviderCore
import ProviderEngine
import ProviderTesting
import Thumbnails

/// A temporary folder removed when the value is freed.
final class Scratch: @unchecked Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("media-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }

    /// Writes a file, creating folders.
    @discardableResult
    func write(_ relative: String, _ data: Data) throws -> URL {
        let target = url.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: target)
        return target
    }
}

extension MediaServer {
    /// Writes a file into a folder of the served root, creating folders.
    @discardableResult
    func put(_ relative: String, _ data: Data, in folder: String) throws -> URL {
        let target = root.appendingPathComponent(folder).appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: target)
        return target
    }

    func contents(_ relative: String, in folder: String) -> Data? {
        FileManager.default.contents(atPath: root.appendingPathComponent(folder).appendingPathComponent(relative).path)
    }
}

/// An engine over a temporary home that knows the local and media backends.
struct Engine {
    let scratch: Scratch
    let manager: ProviderManager

    init() throws {
        scratch = try Scratch()
        manager = try ProviderManager(
            home: scratch.url.appendingPathComponent("home"),
            registry: BackendRegistry([LocalBackend.descriptor, MediaBackend.descriptor]))
    }

    func replica(_ domain: String) -> URL { scratch.url.appendingPathComponent("home/domains/\(domain)") }
}

enum Samples {
    static func png(_ width: Int = 300, _ height: Int = 200, seed: Int = 0) throws -> Data {
        try Thumbnailer.sampleImage(width: width, height: height, seed: seed, format: .png)
    }

    static func jpeg(_ width: Int = 240, _ height: Int = 320, seed: Int = 1) throws -> Data {
        try Thumbnailer.sampleImage(width: width, height: height, seed: seed, format: .jpeg)
    }
}

/// Whether `data` is a JPEG of exactly `size`×`size` pixels.
func isSquareJPEG(_ data: Data, _ size: Int) -> Bool {
    guard Thumbnailer.format(of: data) == .jpeg, let dimensions = Thumbnailer.dimensions(of: data) else { return false }
    return dimensions.width == size && dimensions.height == size
}
