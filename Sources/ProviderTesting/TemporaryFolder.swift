import Foundation

/// A uniquely named folder under the temporary directory, for one test (or one conformance
/// check's fresh store: `makeBackend: { try MyBackend(root: try TemporaryFolder().path) }`).
///
/// Not removed by itself: call ``remove()`` when the test is done (a conformance run's
/// `tearDown`), or leave it to the system's temporary folder cleaning.
public struct TemporaryFolder: Sendable {
    /// The folder.
    public let url: URL

    /// Creates `<temporary directory>/<label>-<UUID>`.
    /// - Throws: what `FileManager.createDirectory` throws when the folder cannot be created.
    public init(_ label: String = "fileprovider-tests") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The folder's path.
    public var path: String { url.path }

    /// The URL of `relative` inside the folder.
    public func url(_ relative: String) -> URL { url.appendingPathComponent(relative) }

    /// Writes a file inside the folder, creating the folders on the way.
    /// - Throws: what `Data.write(to:)` or `FileManager.createDirectory` throw.
    public func write(_ relative: String, _ data: Data) throws {
        let target = url(relative)
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: target)
    }

    /// Removes the folder and everything in it (errors ignored).
    public func remove() { try? FileManager.default.removeItem(at: url) }
}
