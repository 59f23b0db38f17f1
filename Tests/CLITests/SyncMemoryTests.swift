import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A sync's memory does not grow with the domain (issue #18): the peak resident memory of a
/// `fileproviderctl sync` that finds nothing changed (as it reports it), for a domain of
/// 100,000 files stays within a fixed bound of the same sync for 10,000 files. Both trees have
/// the same largest folder (100 files), so only the domain's size differs. A sync that held
/// every record of the domain at once (the local scan did: about 1.6 KiB per item) peaks some
/// 150 MiB higher at 100,000 items (58 against 216 MiB in a debug build). The sizes keep the
/// test near 10 s alone and under a minute beside the other tests on a 2-core machine.
@Suite(.serialized) struct SyncMemoryTests {
    /// What a streaming sync may hold beyond the small domain's peak at ten times its size: the
    /// database's page caches (16 MiB per connection, filled only as far as the file is read)
    /// and the allocator's slack.
    static let boundMiB = 48

    @Test func aSyncWithNothingChangedPeaksAtTheSameMemoryForTenTimesTheItems() async throws {
        let small = try await Self.resyncPeak(subfolders: 5)
        let large = try await Self.resyncPeak(subfolders: 50)
        #expect(
            large.peakKiB <= small.peakKiB + Self.boundMiB * 1024,
            "re-sync peak: \(small.peakKiB / 1024) MiB at \(small.items) items, \(large.peakKiB / 1024) MiB at \(large.items) items (bound: +\(Self.boundMiB) MiB)"
        )
    }

    struct Peak {
        var items: Int
        var peakKiB: Int
    }

    /// Adds a local domain over 20 folders × `subfolders` folders × 100 empty files, syncs it
    /// with every folder populated (each file a placeholder in the replica), then syncs it again
    /// and returns that second sync's peak resident memory.
    static func resyncPeak(subfolders: Int) async throws -> Peak {
        let base = try ScratchFolder()
        let store = base.url.appendingPathComponent("store")
        let items = try await offThePool { try makeTree(at: store.path, top: 20, subfolders: subfolders, files: 100) }
        let cli = CLIRunner(home: base.url.appendingPathComponent("home"))
        let added = try await cli.run([
            "domain", "add", "--mode", "placeholder-files", "m", "--backend", "local", "--root", store.path, "--replica",
            base.url.appendingPathComponent("replica").path,
        ])
        try #require(added.status == 0, "\(added.stderr)")
        let first = try await cli.run(["sync", "m", "--populate-limit", "10000000"])
        try #require(first.status == 0, "\(first.stderr)")
        let again = try await Self.measure(cli, ["sync", "m"])
        try #require(again.status == 0, "\(again.stderr)")
        let peak = try #require(again.peakKiB, "sync --json reports no peakResidentBytes")
        return Peak(items: items, peakKiB: peak)
    }

    /// Writes `top` × `subfolders` folders of `files` empty files each; returns how many files.
    static func makeTree(at root: String, top: Int, subfolders: Int, files: Int) throws -> Int {
        var count = 0
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for t in 0..<top {
            let first = root + "/t\(t)"
            guard mkdir(first, 0o755) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            for s in 0..<subfolders {
                let folder = first + "/s\(s)"
                guard mkdir(folder, 0o755) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
                for f in 0..<files {
                    let fd = open(folder + "/f\(f).txt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
                    guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
                    close(fd)
                    count += 1
                }
            }
        }
        return count
    }

    /// Runs `sync --json` and returns its exit status, the peak resident memory the process
    /// reports for itself (`peakResidentBytes`: its `VmHWM`) and its error output. Not
    /// `wait4`'s `ru_maxrss`: the kernel carries the spawning process's peak over `execve`,
    /// so a child of this test process (hundreds of MiB with the other tests) would report that.
    static func measure(_ cli: CLIRunner, _ arguments: [String]) async throws -> Measured {
        let result = try await cli.run(arguments + ["--json"])
        let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let bytes = (json?["peakResidentBytes"] as? NSNumber)?.intValue
        return Measured(status: result.status, peakKiB: bytes.map { $0 / 1024 }, stderr: result.stderr)
    }

    struct Measured {
        var status: Int32
        var peakKiB: Int?
        var stderr: String
    }
}

/// A temporary folder on a memory file system where there is one (`/dev/shm`): the tests here
/// write hundreds of thousands of small files, which a disk makes slow and noisy. Removed at
/// the end, unless `FPK_KEEP_TEMP` is set.
final class ScratchFolder {
    let url: URL

    init() throws {
        let mounts = readProcFile("/proc/self/mounts") ?? ""
        let isMemory = mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().prefix(2) == ["/dev/shm", "tmpfs"] }
        let parent =
            isMemory && access("/dev/shm", W_OK) == 0 ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        url = parent.appendingPathComponent("fpk-scale-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        if ProcessInfo.processInfo.environment["FPK_KEEP_TEMP"] == nil { try? FileManager.default.removeItem(at: url) }
    }
}
