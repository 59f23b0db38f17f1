import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

/// Runs the built `fileproviderctl` in child processes that write to one database at once.
enum ControlTool {
    /// `$FILEPROVIDERCTL`, else the binary next to this test bundle (same build as the code
    /// under test), else `<package root>/.build/debug/fileproviderctl`.
    static func locate() -> URL? {
        let manager = FileManager.default
        var candidates: [URL] = []
        if let explicit = ProcessInfo.processInfo.environment["FILEPROVIDERCTL"], !explicit.isEmpty {
            candidates.append(URL(fileURLWithPath: explicit))
        }
        if let executable = Bundle.main.executableURL {
            // swift-testing runs inside <scratch>/debug/<Package>PackageTests.xctest.
            var folder = executable.deletingLastPathComponent()
            for _ in 0..<3 {
                candidates.append(folder.appendingPathComponent("fileproviderctl"))
                folder = folder.deletingLastPathComponent()
            }
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/fileproviderctl"))
        return candidates.first { manager.isExecutableFile(atPath: $0.path) }
    }

    struct Result: Sendable {
        var status: Int32
        var output: String
    }

    /// Starts `arguments` in a child process with its output in a file; returns once it exits.
    static func run(_ executable: URL, _ arguments: [String], logIn folder: URL) async throws -> Result {
        let log = folder.appendingPathComponent("child-\(UUID().uuidString).log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw FileProviderError(.localIOFailure, "cannot create \(log.path)")
        }
        let handle = try FileHandle(forWritingTo: log)
        let process = TestProcess()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { (finished: TestProcess) in continuation.resume(returning: finished.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        try? handle.close()
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return Result(status: status, output: output)
    }
}

/// Files of a local store, as relative paths; folders end in "/".
private func makeLocalStore(at root: URL, prefix: String, folders: Int, filesPerFolder: Int) throws -> Set<String> {
    var made: Set<String> = []
    for folder in 0..<folders {
        let name = "\(prefix)-dir\(folder)"
        try FileManager.default.createDirectory(at: root.appendingPathComponent(name), withIntermediateDirectories: true)
        made.insert(name + "/")
        for file in 0..<filesPerFolder {
            let path = "\(name)/\(prefix)-file\(file).txt"
            try Data("\(prefix) \(folder) \(file)\n".utf8).write(to: root.appendingPathComponent(path))
            made.insert(path)
        }
    }
    try Data("top".utf8).write(to: root.appendingPathComponent("\(prefix)-top.txt"))
    made.insert("\(prefix)-top.txt")
    return made
}

@Suite struct TwoProcessTests {
    /// Two `fileproviderctl` processes each add and sync their own local domain on the same
    /// `--home` at the same time. With `existingDatabase` the database is created first, so only
    /// the concurrent writes are tested; without it both processes also open and migrate a
    /// brand-new database at once. Both must succeed and the database must hold both domains.
    @Test(arguments: [true, false])
    func twoProcessesAddAndSyncAtOnce(existingDatabase: Bool) async throws {
        for round in 0..<3 {
            try await addAndSyncInTwoProcesses(existingDatabase: existingDatabase, round: round)
        }
    }

    private func addAndSyncInTwoProcesses(existingDatabase: Bool, round: Int) async throws {
        let tool = try #require(
            ControlTool.locate(),
            "build fileproviderctl first (swift build --product fileproviderctl) or set FILEPROVIDERCTL")
        let folder = try TemporaryFolder("two-process")
        defer { folder.remove() }
        let home = folder.path("home")
        if existingDatabase {
            _ = try MetadataStore(url: home.appendingPathComponent("metadata.sqlite"))
        }
        let names = ["alpha", "beta"]
        var expected: [String: Set<String>] = [:]
        for name in names {
            let root = folder.path("store-\(name)")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            expected[name] = try makeLocalStore(at: root, prefix: name, folders: 6, filesPerFolder: 40)
        }

        let script = #""$1" domain add --home "$2" "$3" --backend local --root "$4" --mode placeholder-files && "$1" sync --home "$2" "$3""#
        let results = try await withThrowingTaskGroup(of: (String, ControlTool.Result).self) { group in
            for name in names {
                let arguments = ["-c", script, "sh", tool.path, home.path, name, folder.path("store-\(name)").path]
                group.addTask { (name, try await ControlTool.run(URL(fileURLWithPath: "/bin/sh"), arguments, logIn: folder.url)) }
            }
            var all: [String: ControlTool.Result] = [:]
            for try await (name, result) in group { all[name] = result }
            return all
        }
        for name in names {
            let result = try #require(results[name])
            #expect(result.status == 0, "round \(round): \(name) failed (\(result.status)):\n\(result.output)")
        }

        let store = try MetadataStore(url: home.appendingPathComponent("metadata.sqlite"))
        #expect(try store.domains().map(\.name) == names)
        for name in names {
            let domain = try #require(try store.domain(named: name))
            let id = try #require(domain.id)
            let items = try store.descendants(domainID: id, of: "")
            let seen = Set(items.map { $0.kind == .folder ? $0.path + "/" : $0.path })
            #expect(seen == expected[name], "\(name): the database does not hold exactly the store's items")
            #expect(try store.item(domainID: id, path: "")?.identifier == .rootContainer)
            let summary = try store.summary(domainID: id)
            #expect(summary.folders == 6)
            #expect(summary.placeholders == 6 * 40 + 1)
            #expect(domain.lastSyncAt != nil)
            #expect(domain.lastError == nil)
            // Every placeholder is on disk in the domain's own replica.
            let replica = URL(fileURLWithPath: domain.replicaPath)
            for item in items where item.kind == .file {
                #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent(item.path + ".placeholder").path))
            }
        }
        #expect(try store.integrityCheck() == "ok")
    }

    /// Several processes opening one brand-new database at once: each must open (and migrate)
    /// it without failing, and the migrations must be applied exactly once.
    @Test func manyProcessesOpenANewDatabaseAtOnce() async throws {
        let tool = try #require(
            ControlTool.locate(),
            "build fileproviderctl first (swift build --product fileproviderctl) or set FILEPROVIDERCTL")
        for round in 0..<3 {
            let folder = try TemporaryFolder("open-race")
            defer { folder.remove() }
            let home = folder.path("home")
            let results = try await withThrowingTaskGroup(of: ControlTool.Result.self) { group in
                for _ in 0..<6 {
                    group.addTask { try await ControlTool.run(tool, ["domain", "list", "--home", home.path], logIn: folder.url) }
                }
                var all: [ControlTool.Result] = []
                for try await result in group { all.append(result) }
                return all
            }
            for result in results {
                #expect(result.status == 0, "round \(round): a process could not open the new database:\n\(result.output)")
            }
            let store = try MetadataStore(url: home.appendingPathComponent("metadata.sqlite"))
            #expect(try store.appliedMigrations() == MigrationTests.expected)
            #expect(try store.integrityCheck() == "ok")
        }
    }
}
