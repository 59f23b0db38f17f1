import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// An Apache `mod_dav` server on 127.0.0.1 for tests (a ``LoggingDAVServer``): its own
/// configuration, a folder it serves over WebDAV and a free port picked at run time, an access
/// log of every request; ready once it answers, stopped by its pid.
///
/// The binary is `$APACHE2`, else `/usr/sbin/apache2` (apt `apache2`, see
/// scripts/install-deps.sh); modules come from `/usr/lib/apache2/modules`. Apache runs in the
/// foreground as a ``ServerProcessGroup`` (its workers are in its process group, killed with
/// it). Run as root, Apache serves as `www-data`, so the served folder belongs to that user.
public final class ApacheDAVServer: LoggingDAVServer, @unchecked Sendable {
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
        let owner: (uid: uid_t, gid: gid_t)?
        if getuid() == 0, let user = getpwnam("www-data") {
            owner = (user.pointee.pw_uid, user.pointee.pw_gid)
        } else {
            owner = nil
        }
        try super.init(scratchPrefix: "apache-dav", logName: "access.log", owner: owner) { folder, root, log in
            let config = folder.appendingPathComponent("httpd.conf")
            let lock = folder.appendingPathComponent("lock")
            try FileManager.default.createDirectory(at: lock, withIntermediateDirectories: true)
            return try ServerProcessGroup.start(
                "Apache", binary: Self.binary, errorLog: folder.appendingPathComponent("stderr.log"),
                extraLogs: [folder.appendingPathComponent("error.log")],
                prepare: { port in
                    try Self.configuration(folder: folder, root: root, log: log, port: port, runAsRoot: owner != nil, users: users)
                        .write(to: config, atomically: true, encoding: .utf8)
                    if !users.isEmpty {
                        let lines = users.map { "\($0.key):\(Self.cryptPassword($0.value))" }.joined(separator: "\n") + "\n"
                        try lines.write(to: folder.appendingPathComponent("htpasswd"), atomically: true, encoding: .utf8)
                    }
                    if let owner {
                        for path in [folder.path, root.path, lock.path] { chown(path, owner.uid, owner.gid) }
                    }
                },
                arguments: { _ in ["-f", config.path, "-DFOREGROUND"] })
        }
    }

    /// A password in Apache's `{SHA}` form (base64 of its SHA-1), which needs no crypt(3).
    static func cryptPassword(_ password: String) -> String {
        var digest = SHA1Digest()
        Array(password.utf8).withUnsafeBytes { digest.update($0) }
        return "{SHA}" + Data(digest.finishBytes()).base64EncodedString()
    }

    static func configuration(folder: URL, root: URL, log: URL, port: Int, runAsRoot: Bool, users: [String: String]) -> String {
        let modules = Self.modules
        var text = """
            ServerRoot "\(folder.path)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            PidFile "\(folder.path)/apache.pid"
            ErrorLog "\(folder.path)/error.log"
            LogLevel warn
            CustomLog "\(log.path)" "%h %l %u %t \\"%r\\" %>s %b"
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
