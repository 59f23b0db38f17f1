import FUSEFolder
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A temporary folder for one FUSE test: `source/` (the "store" dataless files are fetched
/// from), `backing/` (what the file system serves) and `mount/` (where it is mounted), with a
/// ``FolderFileSystem`` mounted through ``FUSESession`` in this process.
final class FUSELab: @unchecked Sendable {
    let folder: TemporaryFolder
    let source: String
    let backing: String
    let mount: String
    let fileSystem: FolderFileSystem
    private(set) var session: FUSESession?

    /// `mountName` names the mount folder in the lab's folder.
    init(chunkSize: Int = 64 << 10, fetchDelay: UInt32 = 0, mountName: String = "mount") throws {
        folder = try TemporaryFolder("fuse-tests")
        // Other users (the ordinary-user tests) go through the folder.
        chmod(folder.path, 0o755)
        source = folder.path + "/source"
        backing = folder.path + "/backing"
        mount = folder.path + "/" + mountName
        for path in [source, backing, mount] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        fileSystem = FolderFileSystem(backing: backing, chunkSize: chunkSize, fetchDelay: fetchDelay)
    }

    /// Mounts the file system on `mount/`.
    func start(name: String = "fuse-tests", _ configure: (inout FUSEMountOptions) -> Void = { _ in }) async throws {
        var options = FUSEMountOptions(name: name)
        configure(&options)
        let chosen = options
        let fileSystem = self.fileSystem
        let mount = self.mount
        session = try await offThePool { try FUSESession.mount(fileSystem, at: mount, options: chosen) }
    }

    /// Unmounts (when mounted), checks `mountinfo` no longer lists the mount, removes the folder.
    func stop() async throws {
        if let session {
            try await offThePool { session.unmount() }
        }
        #expect(mountInfo == nil, "\(mount) is still mounted after unmount")
        folder.remove()
    }

    /// Writes `bytes` to `source/relative` and makes `backing/relative` a dataless copy of it.
    func addDataless(_ relative: String, _ bytes: Data) throws {
        try bytes.write(to: URL(fileURLWithPath: source + "/" + relative))
        try fileSystem.addDataless(relative, source: source + "/" + relative)
    }

    /// Runs `sh -c script` in the lab's folder (off the cooperative pool) and returns what it
    /// printed; `user` runs it as that user (`runuser`).
    @discardableResult
    func shell(_ script: String, as user: String? = nil, expectSuccess: Bool = true, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> ChildProcess.Captured
    {
        let command = "cd '\(folder.path)' && " + script
        let arguments = user.map { ["-u", $0, "--", "/bin/sh", "-c", command] } ?? ["-c", command]
        let path = user == nil ? "/bin/sh" : "/usr/sbin/runuser"
        let captured = try await offThePool { try ChildProcess.capture(path, arguments) }
        if expectSuccess {
            #expect(
                captured.ending == .exited(0),
                "\(script) ended \(captured.ending): \(String(decoding: captured.errorOutput, as: UTF8.self))",
                sourceLocation: sourceLocation)
        }
        return captured
    }

    /// What `script` printed, as text.
    func output(_ script: String, as user: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        String(decoding: try await shell(script, as: user, sourceLocation: sourceLocation).output, as: UTF8.self)
    }

    /// `count` bytes that differ from one offset to the next (no run of zeros a hole could
    /// pass for).
    static func bytes(_ count: Int, seed: UInt64 = 1) -> Data {
        var state = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        var bytes = [UInt8](repeating: 0, count: count)
        for index in 0..<count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes[index] = UInt8(truncatingIfNeeded: state >> 33) | 1
        }
        return Data(bytes)
    }

    /// The line of `/proc/self/mountinfo` for `mount/`, or nil.
    var mountInfo: String? { FUSEMountCheck.mountInfo(for: mount) }
}

/// An ordinary user for the tests (made with `useradd` when missing; CI runs as root), and
/// `/dev/fuse` made usable by everyone (mode 0666, as distributions ship it).
enum OrdinaryUser {
    static let name = TestUser.name

    /// Makes the user when missing (``TestUser/ensure()``); returns its uid.
    static func ensure() async throws -> UInt32 {
        try await offThePool { try TestUser.ensure() }.uid
    }

    /// `setpriv` arguments that run a program as `user` (its uid, gid, no other groups), in
    /// place of `setpriv` itself.
    static func setprivArguments(_ user: String) -> [String] {
        guard let entry = getpwnam(user) else { return [] }
        return ["--reuid=\(entry.pointee.pw_uid)", "--regid=\(entry.pointee.pw_gid)", "--clear-groups", "--"]
    }

    /// Sets `/dev/fuse` to mode 0666, as Debian, Ubuntu and Fedora ship it.
    static func openDevice() throws {
        try #require(chmod("/dev/fuse", 0o666) == 0, "chmod 0666 /dev/fuse: \(String(cString: strerror(errno)))")
    }
}

/// The path of a fixture program built beside the test bundle.
func fixtureProgram(_ name: String) -> String {
    var folders = Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent().path }
    if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        folders.append((executable as NSString).deletingLastPathComponent)
    }
    for folder in folders where access(folder + "/" + name, X_OK) == 0 { return folder + "/" + name }
    let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return package.appendingPathComponent(".build/debug/" + name).path
}
