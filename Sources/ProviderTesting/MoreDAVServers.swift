import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The WebDAV servers people run beside Apache, each started on 127.0.0.1 by the tests as
// ``ApacheDAVServer`` is: a scratch folder of its own with a configuration naming a free port,
// ready once it answers, stopped by its pid (``LoopbackDAVServer``). Each keeps a log of the
// requests it served (``LoggingDAVServer/requests()``), so a test can count transfers.

/// A ``LoopbackDAVServer`` that logs every request it serves to a file, one line each with
/// `"METHOD /path` in it (Apache's, nginx's and lighttpd's access logs, wsgidav's request log).
public class LoggingDAVServer: LoopbackDAVServer, @unchecked Sendable {
    /// One request the server served.
    public struct Request: Sendable, Equatable {
        public var method: String
        /// The path as sent, percent-encoded.
        public var path: String
        /// The status answered, where the log line gives it after the request line (Apache's
        /// and nginx's logs do).
        public var status: Int? = nil
    }

    /// The name of the file in the scratch folder the requests are logged to.
    private let logName: String
    /// The file the requests are logged to.
    public var requestLog: URL { folder.appendingPathComponent(logName) }

    init(
        scratchPrefix: String, logName: String, owner: (uid: uid_t, gid: gid_t)? = nil,
        start: (_ folder: URL, _ root: URL, _ log: URL) throws -> (group: ServerProcessGroup, port: Int)
    ) throws {
        self.logName = logName
        try super.init(scratchPrefix: scratchPrefix, owner: owner) { folder, root in
            try start(folder, root, folder.appendingPathComponent(logName))
        }
    }

    /// The requests logged so far, oldest first. A server may write its log a little after it
    /// answers: to see every request up to now, send a marker (``mark()``) and wait until it is
    /// logged.
    public func requests() -> [Request] {
        let text = (try? String(contentsOf: requestLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let quote = line.firstIndex(of: "\"") else { return nil }
            let fields = line[line.index(after: quote)...].split(separator: " ", maxSplits: 2)
            guard fields.count >= 2, fields[0].allSatisfy({ $0.isUppercase }), fields[1].hasPrefix("/") else { return nil }
            // `"GET /a HTTP/1.1" 206 16777216`: the status follows the request line's closing quote.
            let afterRequest = line[line.index(after: quote)...].split(separator: "\"", maxSplits: 1).dropFirst().first
            let status = afterRequest?.split(separator: " ").first.flatMap { Int($0) }
            return Request(method: String(fields[0]), path: String(fields[1].prefix(while: { $0 != "\"" })), status: status)
        }
    }

    /// Sends a request of its own (`GET /fileprovider-mark-<UUID>`, answered `404`) and returns
    /// its path; once that path is in ``requests()``, so is every request the server answered
    /// before. (Leave marks out when counting transfers.)
    public func mark() -> String {
        let path = "/fileprovider-mark-\(UUID().uuidString)"
        // A GET (answered 404): lighttpd leaves some `OPTIONS` requests out of its access log.
        _ = MediaServer.rawRequest(port: port, "GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        return path
    }
}

/// nginx with its `dav` module and the dav-ext module (`PROPFIND`, `OPTIONS`) on 127.0.0.1 for
/// tests: what Debian's `nginx-light` and `libnginx-mod-http-dav-ext` serve. Its listings give
/// no `getetag` (files get versions from their date and size), it ignores `If-Match` and
/// `If-None-Match` on writes, and a `MOVE` into a missing folder makes the folder.
///
/// The binary is `$NGINX`, else `/usr/sbin/nginx`; the module is loaded from
/// `/usr/lib/nginx/modules`. It runs in the foreground with one process (`master_process off`),
/// its access log in the scratch folder.
public final class NginxDAVServer: LoggingDAVServer, @unchecked Sendable {
    /// Whether nginx and the dav-ext module are installed.
    public static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: binary) && FileManager.default.fileExists(atPath: module)
    }

    static var binary: String { ProcessInfo.processInfo.environment["NGINX"] ?? "/usr/sbin/nginx" }
    static let module = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"

    /// Starts a server and waits until it answers.
    ///
    /// - Throws: ``MediaServerError`` when nginx or the module is missing, exits early or does
    ///   not answer within 20 seconds.
    public init() throws {
        guard Self.isAvailable else {
            throw MediaServerError(
                message: "nginx with dav-ext is not installed (apt-get install nginx-light libnginx-mod-http-dav-ext)")
        }
        try super.init(scratchPrefix: "nginx-dav", logName: "access.log") { folder, root, log in
            let config = folder.appendingPathComponent("nginx.conf")
            let temporary = folder.appendingPathComponent("tmp")
            try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
            return try ServerProcessGroup.start(
                "nginx", binary: Self.binary, errorLog: folder.appendingPathComponent("stderr.log"),
                extraLogs: [folder.appendingPathComponent("error.log")],
                prepare: { port in
                    try Self.configuration(folder: folder, root: root, temporary: temporary, log: log, port: port)
                        .write(to: config, atomically: true, encoding: .utf8)
                },
                arguments: { _ in ["-c", config.path, "-p", folder.path] })
        }
    }

    static func configuration(folder: URL, root: URL, temporary: URL, log: URL, port: Int) -> String {
        """
        load_module \(module);
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(folder.path)/nginx.pid;
        error_log \(folder.path)/error.log warn;
        events { worker_connections 256; }
        http {
            access_log \(log.path);
            client_body_temp_path \(temporary.path);
            proxy_temp_path \(temporary.path);
            fastcgi_temp_path \(temporary.path);
            uwsgi_temp_path \(temporary.path);
            scgi_temp_path \(temporary.path);
            client_max_body_size 0;
            keepalive_requests 100000;
            server {
                listen 127.0.0.1:\(port);
                root \(root.path);
                location / {
                    dav_methods PUT DELETE MKCOL COPY MOVE;
                    dav_ext_methods PROPFIND OPTIONS;
                    dav_access user:rw group:rw all:r;
                }
            }
        }

        """
    }
}

/// lighttpd with `mod_webdav` on 127.0.0.1 for tests (Debian's `lighttpd` and
/// `lighttpd-mod-webdav`), with `mod_staticfile` so that `GET` replies carry an ETag (without
/// it lighttpd's `GET` has neither ETag nor `Last-Modified`).
///
/// The binary is `$LIGHTTPD`, else `/usr/sbin/lighttpd`; modules come from `/usr/lib/lighttpd`.
/// It runs in the foreground (`-D`), its lock database in the scratch folder and its access log
/// written through a pipe to `cat` (lighttpd buffers a log file for seconds, a pipe it writes
/// at once); `cat` is in its process group and stops with it.
public final class LighttpdDAVServer: LoggingDAVServer, @unchecked Sendable {
    /// Whether lighttpd and mod_webdav are installed.
    public static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: binary) && FileManager.default.fileExists(atPath: modules + "/mod_webdav.so")
    }

    static var binary: String { ProcessInfo.processInfo.environment["LIGHTTPD"] ?? "/usr/sbin/lighttpd" }
    static let modules = "/usr/lib/lighttpd"

    /// Starts a server and waits until it answers.
    ///
    /// - Throws: ``MediaServerError`` when lighttpd or mod_webdav is missing, exits early or
    ///   does not answer within 20 seconds.
    public init() throws {
        guard Self.isAvailable else {
            throw MediaServerError(message: "lighttpd with mod_webdav is not installed (apt-get install lighttpd lighttpd-mod-webdav)")
        }
        try super.init(scratchPrefix: "lighttpd-dav", logName: "access.log") { folder, root, log in
            let config = folder.appendingPathComponent("lighttpd.conf")
            return try ServerProcessGroup.start(
                "lighttpd", binary: Self.binary, errorLog: folder.appendingPathComponent("stderr.log"),
                extraLogs: [folder.appendingPathComponent("error.log")],
                prepare: { port in
                    try Self.configuration(folder: folder, root: root, log: log, port: port)
                        .write(to: config, atomically: true, encoding: .utf8)
                },
                arguments: { _ in ["-D", "-f", config.path, "-m", Self.modules] })
        }
    }

    static func configuration(folder: URL, root: URL, log: URL, port: Int) -> String {
        """
        server.modules = ("mod_webdav", "mod_accesslog", "mod_staticfile")
        server.document-root = "\(root.path)"
        server.bind = "127.0.0.1"
        server.port = \(port)
        server.errorlog = "\(folder.path)/error.log"
        server.upload-dirs = ("\(folder.path)")
        server.max-keep-alive-requests = 100000
        accesslog.filename = "|exec /bin/cat >> '\(log.path)'"
        static-file.etags = "enable"
        mimetype.assign = ("" => "application/octet-stream")
        webdav.activate = "enable"
        webdav.is-readonly = "disable"
        webdav.sqlite-db-name = "\(folder.path)/webdav.db"

        """
    }
}

/// wsgidav 4 (PyPI `wsgidav`, served by `cheroot`) on 127.0.0.1 for tests, anonymous, with its
/// file system provider. Its listings give `getetag` unquoted, its `GET` replies quoted.
///
/// It runs as `python3 -m wsgidav.server.server_cli` (the first python3 on PATH, where
/// scripts/install-deps.sh installs it) with a configuration of its own; its request log
/// (`verbose: 3`) goes to the scratch folder.
public final class WsgiDAVServer: LoggingDAVServer, @unchecked Sendable {
    /// Whether python3 can import wsgidav and cheroot.
    public static let isAvailable: Bool = {
        guard
            let run = try? ChildProcess.capture(
                "/usr/bin/env", ["python3", "-c", "import wsgidav, cheroot"])
        else { return false }
        return run.ending == .exited(0)
    }()

    /// Starts a server and waits until it answers.
    ///
    /// - Throws: ``MediaServerError`` when wsgidav is missing, exits early or does not answer
    ///   within 20 seconds.
    public init() throws {
        guard Self.isAvailable else {
            throw MediaServerError(message: "wsgidav is not installed (python3 -m pip install wsgidav cheroot)")
        }
        try super.init(scratchPrefix: "wsgidav", logName: "server.log") { folder, root, log in
            let config = folder.appendingPathComponent("wsgidav.yaml")
            return try ServerProcessGroup.start(
                "wsgidav", binary: "/usr/bin/env", errorLog: log,
                prepare: { port in
                    try Self.configuration(root: root, port: port).write(to: config, atomically: true, encoding: .utf8)
                },
                arguments: { _ in ["python3", "-m", "wsgidav.server.server_cli", "--config", config.path] })
        }
    }

    static func configuration(root: URL, port: Int) -> String {
        """
        host: 127.0.0.1
        port: \(port)
        server: cheroot
        provider_mapping:
          "/": "\(root.path)"
        simple_dc:
          user_mapping:
            "*": true
        http_authenticator:
          accept_basic: true
          accept_digest: false
          default_to_digest: false
        verbose: 3
        logging:
          enable: true
        property_manager: null
        lock_storage: true
        dir_browser:
          enable: false

        """
    }
}
