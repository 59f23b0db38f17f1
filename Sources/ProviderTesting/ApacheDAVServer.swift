import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// An Apache `mod_dav` server on 127.0.0.1 for tests: its own configuration, a folder it serves
/// over WebDAV and a free port picked at run time; ready once it answers, stopped by its pid.
///
/// The binary is `$APACHE2`, else `/usr/sbin/apache2` (apt `apache2`, see
/// scripts/install-deps.sh); modules come from `/usr/lib/apache2/modules`. Apache runs in the
/// foreground as a ``ServerProcessGroup`` (its workers are in its process group, killed with
/// it). Run as root, Apache serves as `www-data`, so the served folder belongs to that user.
public final class ApacheDAVServer: @unchecked Sendable {
    /// The folder the server serves at `/`.
    public let root: URL
    /// The TCP port on 127.0.0.1.
    public let port: Int
    /// The server's base URL (its `/`).
    public var url: String { "http://127.0.0.1:\(port)" }

    private let folder: URL
    private let process: ServerProcessGroup
    private let owner: (uid: uid_t, gid: gid_t)?

    /// Whether Apache and mod_dav are installed.
    public static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: binary) && FileManager.default.fileExists(atPath: modules + "/mod_dav_fs.so")
    }

    static var binary: String { ProcessInfo.processInfo.environment["APACHE2"] ?? "/usr/sbin/apache2" }
    static let modules = "/usr/lib/apache2/modules"

    /// Starts a server and waits until it answers.
    ///
    /// - Parameter users: user names and passwords; when given, every request needs HTTP Basic
    ///   authentication with one of them.
    /// - Throws: ``MediaServerError`` when Apache is missing, exits early or does not answer
    ///   within 20 seconds.
    public init(users: [String: String] = [:]) throws {
        guard Self.isAvailable else {
            throw MediaServerError(message: "Apache with mod_dav is not installed (apt-get install apache2)")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("apache-dav-\(UUID().uuidString)")
        self.folder = folder
        let root = folder.appendingPathComponent("root")
        self.root = root
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("lock"), withIntermediateDirectories: true)
        let owner: (uid: uid_t, gid: gid_t)?
        if getuid() == 0, let user = getpwnam("www-data") {
            owner = (user.pointee.pw_uid, user.pointee.pw_gid)
        } else {
            owner = nil
        }
        self.owner = owner
        let config = folder.appendingPathComponent("httpd.conf")
        do {
            (process, port) = try ServerProcessGroup.start(
                "Apache", binary: Self.binary, errorLog: folder.appendingPathComponent("stderr.log"),
                extraLogs: [folder.appendingPathComponent("error.log")],
                prepare: { port in
                    try Self.configuration(folder: folder, root: root, port: port, runAsRoot: owner != nil, users: users)
                        .write(to: config, atomically: true, encoding: .utf8)
                    if !users.isEmpty {
                        let lines = users.map { "\($0.key):\(Self.cryptPassword($0.value))" }.joined(separator: "\n") + "\n"
                        try lines.write(to: folder.appendingPathComponent("htpasswd"), atomically: true, encoding: .utf8)
                    }
                    if let owner {
                        for path in [folder.path, root.path, folder.appendingPathComponent("lock").path] {
                            chown(path, owner.uid, owner.gid)
                        }
                    }
                },
                arguments: { _ in ["-f", config.path, "-DFOREGROUND"] })
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
    }

    deinit { stop() }

    /// Apache's process group (its main process's pid), for tests of the fixture.
    public var processGroup: pid_t? { process.pid }

    /// Stops Apache (`SIGKILL` to its process group) and removes its files.
    public func stop() {
        process.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Makes a new empty folder in the served root and returns its URL, for a test that needs
    /// a fresh store.
    public func makeFolder(_ name: String = "store-\(UUID().uuidString)") throws -> String {
        let path = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
        if let owner { chown(path.path, owner.uid, owner.gid) }
        return url + "/" + name
    }

    /// Writes a file into the served root directly (as another client of the server would),
    /// owned by the server's user.
    public func writeFile(_ relativePath: String, _ contents: Data) throws {
        let path = root.appendingPathComponent(relativePath)
        try contents.write(to: path)
        if let owner { chown(path.path, owner.uid, owner.gid) }
    }

    /// A password in Apache's `{SHA}` form (base64 of its SHA-1), which needs no crypt(3).
    static func cryptPassword(_ password: String) -> String {
        var digest = SHA1Digest()
        Array(password.utf8).withUnsafeBytes { digest.update($0) }
        return "{SHA}" + Data(digest.finishBytes()).base64EncodedString()
    }

    static func configuration(folder: URL, root: URL, port: Int, runAsRoot: Bool, users: [String: String]) -> String {
        let modules = Self.modules
        var text = """
            ServerRoot "\(folder.path)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            PidFile "\(folder.path)/apache.pid"
            ErrorLog "\(folder.path)/error.log"
            LogLevel warn
            Mutex file:\(folder.path)/lock
            DefaultRuntimeDir "\(folder.path)/lock"
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule authn_core_module \(modules)/mod_authn_core.so
            LoadModule authn_file_module \(modules)/mod_authn_file.so
            LoadModule auth_basic_module \(modules)/mod_auth_basic.so
            LoadModule authz_user_module \(modules)/mod_authz_user.so
            LoadModule mime_module \(modules)/mod_mime.so
            TypesConfig /etc/mime.types
            LoadModule dav_module \(modules)/mod_dav.so
            LoadModule dav_fs_module \(modules)/mod_dav_fs.so
            StartServers 1
            ServerLimit 1
            ThreadsPerChild 16
            MaxRequestWorkers 16
            KeepAlive On
            MaxKeepAliveRequests 0
            DAVLockDB "\(folder.path)/lock/davlock"
            DocumentRoot "\(root.path)"
            <Directory "\(root.path)">
                Dav On
                AllowOverride None
                Options None

            """
        if users.isEmpty {
            text += "    Require all granted\n"
        } else {
            text += """
                    AuthType Basic
                    AuthName "dav"
                    AuthBasicProvider file
                    AuthUserFile "\(folder.path)/htpasswd"
                    Require valid-user

                """
        }
        text += "</Directory>\n"
        if runAsRoot { text += "User www-data\nGroup www-data\n" }
        return text
    }
}
