import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sync` run again and again while `materialize -R` and `evict -R` of the same domain run in
/// another process: a file the engine is placing or just placed (or is swapping for its
/// placeholder) is never a local edit, so nothing is ever uploaded and the store is untouched.
@Suite struct ConcurrentSyncTests {
    /// A file of the store as it was: any upload replaces it (a new inode) or adds a file.
    struct Stamp: Equatable {
        var inode: UInt64
        var modificationNanos: Int64
    }

    static func stamps(of root: URL) throws -> [String: Stamp] {
        var stamps: [String: Stamp] = [:]
        let walker = FileManager.default.enumerator(atPath: root.path)
        while let relative = walker?.nextObject() as? String {
            var info = stat()
            guard lstat(root.appendingPathComponent(relative).path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            stamps[relative] = Stamp(
                inode: UInt64(info.st_ino), modificationNanos: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
        }
        return stamps
    }

    /// Starts the binary in the background; the exit to wait for comes with it.
    static func start(_ cli: CLIRunner, _ arguments: [String]) throws -> (TestProcess, ProcessExit) {
        let process = TestProcess()
        cli.configure(process, arguments)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exit = ProcessExit(process)
        try process.run()
        return (process, exit)
    }

    @Test func syncDuringMaterializeAndEvictNeverUploadsAnUneditedFile() async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store")
        for folder in 0..<4 {
            for file in 0..<600 {
                try temp.write("store/d\(folder)/f\(file).txt", Data("folder \(folder) file \(file)\n".utf8))
            }
        }
        let cli = CLIRunner(in: temp)
        try await cli.addLocalDomain("r", root: store)
        #expect(try await cli.run(["sync", "r", "--populate-limit", "100000"]).status == 0)
        let before = try Self.stamps(of: store)
        #expect(before.count == 2400)

        var uploaded: [Int] = []
        var overlapping = 0
        for round in 0..<2 {
            for arguments in [["materialize", "-R", "r:/"], ["evict", "-R", "r:/"]] {
                let (background, exit) = try Self.start(cli, arguments)
                // Syncs run back to back for as long as the other command runs.
                while background.isRunning {
                    let result = try await cli.run(["sync", "r", "--json"])
                    #expect(result.status == 0, "round \(round) \(arguments[0]): \(result.stderr)")
                    let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                    let report = (json?["reports"] as? [[String: Any]])?.first
                    uploaded.append(report?["uploaded"] as? Int ?? -1)
                    overlapping += 1
                }
                try await offThePool { exit.wait() }
                #expect(background.terminationStatus == 0, "round \(round): \(arguments.joined(separator: " ")) failed")
                let settled = try await cli.run(["sync", "r", "--json"])
                let json = try JSONSerialization.jsonObject(with: Data(settled.stdout.utf8)) as? [String: Any]
                uploaded.append(((json?["reports"] as? [[String: Any]])?.first?["uploaded"] as? Int) ?? -1)
            }
        }
        #expect(overlapping >= 4, "the syncs must run while the other commands do (\(overlapping) did)")
        #expect(uploaded.allSatisfy { $0 == 0 }, "files uploaded per sync: \(uploaded)")
        let after = try Self.stamps(of: store)
        let changed = after.filter { before[$0.key] != $0.value }.keys.sorted()
        #expect(changed.count == 0, "\(changed.count) files of the store were rewritten or added, first \(changed.prefix(3))")
        let conflicts = try await cli.run(["conflicts", "--json"])
        #expect(conflicts.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        // Every file ends as the last command left it: a placeholder, and the database agrees.
        let status = try await cli.run(["status", "r", "--json"])
        let domains = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]]
        let items = domains?.first?["items"] as? [String: Any]
        #expect(items?["placeholders"] as? Int == 2400 && items?["materialized"] as? Int == 0, "\(status.stdout)")
    }
}
