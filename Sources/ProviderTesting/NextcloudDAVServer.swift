import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An emulation of Nextcloud's WebDAV dialect on 127.0.0.1 for tests:
/// `Tests/Fixtures/HostileStores/nextcloud_dav_server.py` (Python's standard library only). It
/// is not Nextcloud: it speaks the subset the `webdav` adapter uses with `--vendor nextcloud`
/// (files under `/remote.php/dav/files/<user>/`, `oc:fileid` that stays with an item across a
/// `MOVE`, `OC-Checksum` (SHA-1 or SHA-256) checked on upload, logged (``receivedChecksums``)
/// and sent on download, chunked upload v2), and can
/// lie on purpose (``Fault``). It is a ``LoopbackDAVServer``: ready once it answers, stopped by
/// its pid; ``LoopbackDAVServer/root`` is the folder of the user's files.
public final class NextcloudDAVServer: LoopbackDAVServer, @unchecked Sendable {
    /// What the emulation does wrong on purpose.
    public enum Fault: String, Sendable {
        /// `GET` sends an `OC-Checksum` that does not match the bytes.
        case badChecksum = "bad-checksum"
        /// A listing's first entry has the `oc:fileid` `../../etc`.
        case badFileID = "bad-fileid"
        /// Every upload's last byte is changed as it arrives, so its `OC-Checksum` does not
        /// match and the upload is refused as ownCloud refuses it.
        case corruptUpload = "corrupt-upload"
    }

    /// The user name in the URLs.
    public let user: String
    /// The URL of the user's files (``LoopbackDAVServer/root``), without a trailing slash.
    public var filesURL: String { "\(url)/remote.php/dav/files/\(user)" }
    public override var rootURL: String { filesURL }
    /// The folder the chunks of uploads in progress are kept in.
    public var uploads: URL { folder.appendingPathComponent("uploads") }

    /// The chunked uploads assembled so far: each destination (relative to the user's files,
    /// percent-encoded) and how many chunks it had.
    public var assembledUploads: [(path: String, chunks: Int)] {
        let text = (try? String(contentsOf: folder.appendingPathComponent("uploads.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 2, let chunks = Int(fields[1]) else { return nil }
            return (String(fields[0]), chunks)
        }
    }

    /// The `OC-Checksum` of every upload (a `PUT`, or a chunked upload's `MOVE`) that carried
    /// one, in order: the destination (relative to the user's files, percent-encoded) and the
    /// header's value.
    public var receivedChecksums: [(path: String, checksum: String)] {
        let text = (try? String(contentsOf: folder.appendingPathComponent("checksums.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2 else { return nil }
            return (String(fields[0]), String(fields[1]))
        }
    }

    /// The script, found from this file's place in the checkout.
    public static let scriptPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Tests/Fixtures/HostileStores/nextcloud_dav_server.py").standardizedFileURL.path

    /// Starts the emulation and waits until it answers.
    ///
    /// - Parameters:
    ///   - user: the user name in the URLs; with `password`, every request needs it (HTTP Basic).
    ///   - fault: what to do wrong, or `nil`.
    /// - Throws: ``MediaServerError`` when python3 is missing, the script exits early or does not
    ///   answer within 20 seconds.
    public init(user: String = "alice", password: String? = nil, fault: Fault? = nil) throws {
        self.user = user
        try super.init(scratchPrefix: "nextcloud-dav", rootName: "files") { folder, root in
            var options = ["--root", root.path, "--uploads", folder.appendingPathComponent("uploads").path, "--user", user]
            if let password { options += ["--password", password] }
            if let fault { options += ["--fault", fault.rawValue] }
            return try ServerProcessGroup.start(
                "the Nextcloud emulation", binary: "/usr/bin/env", errorLog: folder.appendingPathComponent("server.log"),
                arguments: { port in ["python3", Self.scriptPath, "--port", String(port)] + options })
        }
    }
}
