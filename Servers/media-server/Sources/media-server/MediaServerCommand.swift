import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Thumbnails

#if canImport(Glibc)
    import Glibc
#endif

/// `media-server`: the reference server of the HTTP media API (Docs/MediaAPI.md), for tests,
/// benchmarks and the demo.
@main
struct MediaServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media-server",
        abstract: "Serve a folder over the HTTP media API (see Docs/MediaAPI.md).",
        discussion: """
            Without --compat the server offers the extensions (GET /capabilities, typed listings \
            with ETags, conditional and atomic uploads, moves, previews of any size). With \
            --compat it behaves exactly like the original media API: names and sizes only, \
            images only, no ETag, a 25 MiB upload limit, no move.
            Paths that would leave the root ('..', absolute paths, NUL) are refused with 400.
            """)

    @Option(help: ArgumentHelp("The folder to serve; it must exist.", valueName: "dir"))
    var root: String

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The TCP port; 0 picks a free one.")
    var port = 8080

    @Flag(help: "Behave exactly like the original media API.")
    var compat = false

    @Option(help: ArgumentHelp("Require 'Authorization: Bearer <token>' with the token in this environment variable.", valueName: "name"))
    var tokenEnv: String?

    @Option(help: ArgumentHelp("Write this many sample images (PNG and JPEG) into the root and exit.", valueName: "count"))
    var writeSamples: Int?

    @Flag(help: "Log every request (a line 'request METHOD URI' on standard error).")
    var verbose = false

    @Flag(help: "Exit when standard input reaches its end (a test fixture holds a pipe to it, so the server dies with its parent).")
    var exitOnStdinEOF = false

    func validate() throws {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue else {
            throw ValidationError("--root \(root) is not an existing folder")
        }
    }

    func run() async throws {
        let rootPath = URL(fileURLWithPath: root).standardizedFileURL.path
        if let count = writeSamples {
            try writeSampleImages(count: count, into: rootPath)
            return
        }
        var token: String?
        if let name = tokenEnv {
            guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                throw ValidationError("--token-env \(name): the variable is not set")
            }
            token = value
        }
        if exitOnStdinEOF {
            let watcher = Thread {
                while (try? FileHandle.standardInput.read(upToCount: 4096))??.isEmpty == false {}
                Glibc.exit(0)
            }
            watcher.start()
        }
        let store = MediaStore(root: rootPath, compat: compat)
        let router = Router()
        if verbose { router.add(middleware: RequestLines()) }
        MediaRoutes(store: store, token: token).register(on: router)
        var logger = Logger(label: "media-server")
        logger.logLevel = verbose ? .info : .warning
        let mode = compat ? "compat" : "extended"
        let host = self.host
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "media-server"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? 0
                let line = "media-server listening on http://\(host):\(bound) (\(mode)) serving \(rootPath)\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            },
            logger: logger)
        try await app.runService()
    }

    private func writeSampleImages(count: Int, into folder: String) throws {
        for index in 0..<max(0, count) {
            let isPNG = index % 2 == 0
            let data = try Thumbnailer.sampleImage(
                width: 320 + 40 * index, height: 200 + 30 * index, seed: index, format: isPNG ? .png : .jpeg)
            let name = String(format: "sample-%02d.%@", index + 1, isPNG ? "png" : "jpg")
            try data.write(to: URL(fileURLWithPath: folder).appendingPathComponent(name))
            print(name)
        }
    }
}
