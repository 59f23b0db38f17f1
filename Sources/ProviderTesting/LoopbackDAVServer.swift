import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the WebDAV servers the tests start on 127.0.0.1 share (``ApacheDAVServer``,
/// ``RcloneDAVServer``, ``NextcloudDAVServer``): a scratch folder of their own holding the
/// served folder ``root``, a ``ServerProcessGroup`` on a free port picked at run time, and
/// ``stop()`` (`SIGKILL` to the group, the scratch folder removed), also when the server goes
/// away.
public class LoopbackDAVServer: @unchecked Sendable {
    /// The folder the server serves (at ``rootURL``).
    public let root: URL
    /// The TCP port on 127.0.0.1.
    public let port: Int
    /// The server's base URL (its `/`).
    public var url: String { "http://127.0.0.1:\(port)" }
    /// The URL ``root`` is served at: ``url`` unless the server serves it deeper.
    public var rootURL: String { url }

    /// The scratch folder: ``root``, the configuration and the logs.
    let folder: URL
    private let process: ServerProcessGroup
    /// Who owns what is made in ``root`` (the server's user, when it is not ours).
    private let owner: (uid: uid_t, gid: gid_t)?

    /// Makes the scratch folder and ``root`` in it, then starts the server with `start`
    /// (given both); removes the scratch folder again when that throws.
    ///
    /// - Parameters:
    ///   - scratchPrefix: the start of the scratch folder's name in the temporary directory.
    ///   - rootName: the name of ``root`` in the scratch folder.
    ///   - owner: the user and group that own ``root`` and what is made in it, or `nil`.
    /// - Throws: what `start` throws, or a file error when the folders cannot be made.
    init(
        scratchPrefix: String, rootName: String = "root", owner: (uid: uid_t, gid: gid_t)? = nil,
        start: (_ folder: URL, _ root: URL) throws -> (group: ServerProcessGroup, port: Int)
    ) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(scratchPrefix)-\(UUID().uuidString)")
        let root = folder.appendingPathComponent(rootName)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        do {
            (process, port) = try start(folder, root)
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
        self.folder = folder
        self.root = root
        self.owner = owner
    }

    deinit { stop() }

    /// The server's process group (its main process's pid), for tests of the fixture.
    public var processGroup: pid_t? { process.pid }

    /// Stops the server (`SIGKILL` to its process group) and removes its files.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Makes a new empty folder in ``root`` and returns its URL, for a test that needs a fresh
    /// store.
    public func makeFolder(_ name: String = "store-\(UUID().uuidString)") throws -> String {
        let path = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
        if let owner { chown(path.path, owner.uid, owner.gid) }
        return rootURL + "/" + name
    }

    /// Writes a file into ``root`` directly (as another client of the server would), owned by
    /// the server's user.
    public func writeFile(_ relativePath: String, _ contents: Data) throws {
        let path = root.appendingPathComponent(relativePath)
        try contents.write(to: path)
        if let owner { chown(path.path, owner.uid, owner.gid) }
    }
}
