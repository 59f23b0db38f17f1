import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The folder read-ahead of the on-access path (``FolderReadAhead``), through the real
/// `fileproviderctl serve`, the real kernel (fanotify; root, Linux ≥ 6.14, as the other
/// on-access suites) and an SFTP store: a program that reads the small dataless files of a
/// folder one after another gets most of them fetched ahead, in batches, every byte right;
/// programs that read one file each, or that an access rule limits, start none.
/// `FUSEReplicaTests` runs the same bodies through the FUSE layout.
@Suite("On-access folder read-ahead", .serialized, .timeLimit(.minutes(10)))
struct OnAccessReadAheadTests {
    static let count = 200

    static func name(_ index: Int) -> String { String(format: "many/f%03d.bin", index) }

    /// The program's own fetches (an access that waited on one file's fetch) and the
    /// read-ahead's, from serve's log.
    static func fetches(_ logs: String) -> (program: Int, ahead: Int, perFile: [String: Int]) {
        var program = 0
        var ahead = 0
        var perFile: [String: Int] = [:]
        // Whole files log "fetched on access (N bytes in …)", progressive ones "fetched on
        // access, every byte present", the read-ahead "fetched on access (read ahead …)".
        for line in logs.split(separator: "\n") where line.contains(": fetched on access") {
            if line.contains("fetched on access (read ahead") { ahead += 1 } else { program += 1 }
            if let range = line.range(of: "many/f") {
                perFile[String(line[range.lowerBound...].prefix(13)), default: 0] += 1
            }
        }
        return (program, ahead, perFile)
    }

    @Test(arguments: ["full", "progressive"])
    func readingAFoldersFirstFilesFetchesTheRestAheadInBatchesWithEveryByteRight(_ hydration: String) async throws {
        try await Self.readsAhead(.fanotify, hydration: hydration)
    }

    @Test func programsReadingOneFileEachStartNoReadAhead() async throws {
        try await Self.oneFileEachStartsNone(.fanotify)
    }

    @Test func programsAnAccessRuleLimitsStartNoReadAhead() async throws {
        try await Self.limitedProgramsStartNone(.fanotify)
    }

    /// The body of ``readingAFoldersFirstFilesFetchesTheRestAheadInBatchesWithEveryByteRight(_:)``,
    /// for each layout.
    static func readsAhead(_ layout: OnAccessLayout, hydration: String) async throws {
        let temp = try TemporaryFolder()
        let server = try await SSHServer.started()
        let root = try server.makeFolder()
        var files: [String: Data] = [:]
        for index in 0..<Self.count { files[Self.name(index)] = patterned(1000 + index * 37, seed: UInt64(index + 1)) }
        // A large file in the same folder is never read ahead.
        files["many/large.bin"] = patterned(3 << 20, seed: 999)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: root, backend: "sftp", options: server.options(root: root), files: files,
            addArguments: ["--hydration", hydration], layout: layout)
        try await domain.startServe()

        // One program reads the first five files.
        let firstFive = (0..<5).map { domain.replica + "/" + Self.name($0) }
        let first = try await runProgram(["cat"] + firstFive)
        #expect(first.succeeded, "\(first)")
        #expect(first.output == (0..<5).reduce(into: Data()) { $0 += files[Self.name($1)]! })
        // The read-ahead stops a lead ahead of the program's opens (files are left).
        let ranAhead = await waitUntil(timeout: 60) { domain.logs.contains("read ahead in /many: ") }
        #expect(ranAhead, "no read-ahead: \(domain.logs.suffix(3000))")
        let afterFirst = Self.fetches(domain.logs)
        #expect(afterFirst.ahead >= 100, "only \(afterFirst.ahead) files read ahead")
        #expect(afterFirst.ahead < Self.count - 5, "the read-ahead ran more than its lead ahead of the program")
        let listing = try #require(try await domain.cli.json(["ls", "d:/many"]) as? [[String: Any]])
        let materialized = listing.filter { ($0["state"] as? String) == "materialized" }.count
        #expect(materialized == afterFirst.ahead + afterFirst.program, "\(materialized) materialized")
        let large = try #require(fileStatus(domain.backing + "/many/large.bin"))
        #expect(large.st_blocks <= 8, "the large file was fetched")

        // The program reads every file: the read-ahead starts again where it stopped.
        let all = (0..<Self.count).map { domain.replica + "/" + Self.name($0) }
        let whole = try await runProgram(["cat"] + all, timeout: 120)
        #expect(whole.succeeded, "\(whole)")
        #expect(whole.output == (0..<Self.count).reduce(into: Data()) { $0 += files[Self.name($1)]! }, "bytes differ")
        let settled = try await waitUntil(timeout: 60) {
            let listing = try await domain.cli.json(["ls", "d:/many"]) as? [[String: Any]] ?? []
            return listing.filter { ($0["state"] as? String) == "materialized" }.count == Self.count
        }
        #expect(settled, "not every small file is recorded as downloaded")
        let total = Self.fetches(domain.logs)
        // Far fewer round trips of the program's own than files; each file fetched once.
        #expect(total.program <= 20, "the program waited on \(total.program) fetches of its own")
        #expect(total.program + total.ahead == Self.count, "\(total.program) + \(total.ahead) fetches for \(Self.count) files")
        #expect(total.perFile.values.allSatisfy { $0 == 1 }, "a file was fetched twice: \(total.perFile.filter { $0.value > 1 })")
        for index in 0..<Self.count {
            let path = domain.backing + "/" + Self.name(index)
            #expect(FileManager.default.contents(atPath: path) == files[Self.name(index)], "\(path)")
        }
        try await domain.stopServe()
        await server.stopped()
        server.removeFiles()
    }

    /// The body of ``programsReadingOneFileEachStartNoReadAhead()``, for each layout.
    static func oneFileEachStartsNone(_ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let server = try await SSHServer.started()
        let root = try server.makeFolder()
        var files: [String: Data] = [:]
        for index in 0..<20 { files[Self.name(index)] = patterned(500 + index, seed: UInt64(index + 50)) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: root, backend: "sftp", options: server.options(root: root), files: files,
            addArguments: ["--hydration", "full"], layout: layout)
        try await domain.startServe()
        for index in 0..<6 {
            let run = try await runProgram(["cat", domain.replica + "/" + Self.name(index)])
            #expect(run.succeeded && run.output == files[Self.name(index)], "\(run)")
        }
        let counted = Self.fetches(domain.logs)
        #expect(counted.program == 6 && counted.ahead == 0, "\(counted.program) fetched, \(counted.ahead) read ahead")
        for index in 6..<20 {
            let status = try #require(fileStatus(domain.backing + "/" + Self.name(index)))
            #expect(status.st_blocks <= 8, "\(Self.name(index)) was fetched")
        }
        try await domain.stopServe()
        await server.stopped()
        server.removeFiles()
    }

    /// The body of ``programsAnAccessRuleLimitsStartNoReadAhead()``, for each layout: programs
    /// an access rule limits (an indexer's name, which the shipped rules deny; a `present-only`
    /// program) each read 20 dataless files of a folder in one process and are refused every
    /// one; they start no read-ahead: nothing of the folder is fetched, not even once `cat` of
    /// another folder's files has started and finished a read-ahead there.
    static func limitedProgramsStartNone(_ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = temp.url.appendingPathComponent("store").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        var files: [String: Data] = [:]
        for index in 0..<40 { files[String(format: "f%02d.bin", index)] = patterned(2000 + index, seed: UInt64(index + 700)) }
        for index in 0..<40 { files[String(format: "other/g%02d.bin", index)] = patterned(3000 + index, seed: UInt64(index + 800)) }
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store, backend: "local", options: ["root": store], files: files,
            addArguments: ["--hydration", "full"], layout: layout)
        let indexer = try OnAccessRulesTests.program(named: "baloo_file", in: temp)
        let viewer = try OnAccessRulesTests.program(named: "thumbnailer", in: temp)
        let added = try await domain.cli.run(["rules", "add", "present-only", "--executable", viewer])
        #expect(added.status == 0, "\(added)")
        // Opens of the store's files at its top (not in other/): each fetch opens one (a
        // listing opens folders, left out).
        let opens = try await OnAccessRulesTests.StoreOpens(folder: store, temp: temp)
        let fetched = { () async throws -> [String] in try await opens.sinceLastMark().filter { $0.hasSuffix(".bin") } }
        try await domain.startServe()
        let top = (0..<20).map { String(format: "f%02d.bin", $0) }
        for program in [indexer, viewer] {
            let run = try await runProgram([program] + top.map { domain.replica + "/" + $0 })
            #expect(!run.succeeded && run.output.isEmpty, "\(program): \(run)")
            let refusals = run.errorText.components(separatedBy: "Operation not permitted").count - 1
            #expect(refusals == top.count, "\(program): \(refusals) refusals: \(run)")
        }
        #expect(try await fetched() == [], "a file was fetched for a program a rule limits")
        // A program no rule limits starts one in the other folder (the pattern is seen), and
        // it ends.
        let others = (0..<5).map { String(format: "other/g%02d.bin", $0) }
        let cat = try await runProgram(["cat"] + others.map { domain.replica + "/" + $0 })
        #expect(cat.succeeded && cat.output == others.reduce(into: Data()) { $0 += files[$1]! }, "\(cat)")
        let ranAhead = await waitUntil(timeout: 60) { domain.logs.contains("read ahead in /other: ") }
        #expect(ranAhead, "cat started no read-ahead: \(domain.logs.suffix(3000))")
        // Nothing of the first folder, ever.
        #expect(try await fetched() == [], "a file was fetched for a program a rule limits")
        #expect(!domain.logs.contains("read ahead in /: "), "\(domain.logs.suffix(3000))")
        for name in files.keys where !name.hasPrefix("other/") {
            #expect(domain.fetches(of: name) == 0, "\(name) was fetched")
            #expect((fileStatus(domain.backing + "/" + name)?.st_blocks ?? 0) <= 8, "\(name) has contents")
        }
        try await domain.stopServe()
    }
}
