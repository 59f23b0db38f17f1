import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A command of the real binary running in the background, its standard output and error going
/// to files (or standard error to a pseudo-terminal).
final class BackgroundCommand {
    let process = TestProcess()
    let exit: ProcessExit
    let outURL: URL
    let errURL: URL
    let terminal: PseudoTerminal?

    init(_ cli: CLIRunner, _ arguments: [String], logs folder: URL, terminal: Bool = false) throws {
        let name = UUID().uuidString
        outURL = folder.appendingPathComponent("\(name).out")
        errURL = folder.appendingPathComponent("\(name).err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        cli.configure(process, arguments)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        self.terminal = terminal ? try PseudoTerminal() : nil
        if let pty = self.terminal {
            process.standardError = pty.follower
        } else {
            process.standardError = try FileHandle(forWritingTo: errURL)
        }
        exit = ProcessExit(process)
        try process.run()
        self.terminal?.startReading()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            exit.wait()
        }
    }

    var stdout: String { (try? String(contentsOf: outURL, encoding: .utf8)) ?? "" }
    var stderr: String { terminal?.text ?? (try? String(contentsOf: errURL, encoding: .utf8)) ?? "" }

    /// One signal to send once a condition holds; `before` runs just before it is sent.
    struct Step: Sendable {
        var signal: Int32
        var condition: @Sendable () -> Bool
        var before: (@Sendable () -> Void)? = nil
    }

    /// Sends each step's signal as soon as its condition holds, in order, all polled every 2 ms
    /// on a thread of its own: Swift's cooperative pool, where a test's polls run, can be held up
    /// for seconds by the other tests of the bundle, long enough for the command to finish (or
    /// give up) first. Returns how many signals went to the process while it ran.
    func signals(_ steps: [Step], timeout: Double = 120) async -> Int {
        let pid = process.processIdentifier
        let exit = self.exit
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let deadline = Date().addingTimeInterval(timeout)
                var sent = 0
                while sent < steps.count && Date() < deadline && !exit.wait(seconds: 0) {
                    if steps[sent].condition() {
                        steps[sent].before?()
                        kill(pid, steps[sent].signal)
                        sent += 1
                    } else {
                        usleep(2000)
                    }
                }
                continuation.resume(returning: sent)
            }
        }
    }

    /// ``signals(_:timeout:)`` of one signal; returns whether it was sent while the process ran.
    func signal(_ number: Int32, when condition: @escaping @Sendable () -> Bool) async -> Bool {
        await signals([Step(signal: number, condition: condition)]) == 1
    }

    /// Waits for the process to end; its exit status, or `nil` when it still runs after `timeout`.
    func status(timeout: Double = 60) async -> Int32? {
        guard await waitUntil(timeout: timeout, { !process.isRunning }) else { return nil }
        if let terminal { await terminal.drained() }
        return process.terminationReason == .exit ? process.terminationStatus : 1000 + process.terminationStatus
    }
}

/// A pseudo-terminal whose follower side a child writes to; what it writes is collected.
///
/// The follower's descriptor has one owner, ``follower``: give it to the child as its standard
/// error, and ``ProcessExit`` closes it once the child ended (nothing else may close it: a
/// second `close` of its number closed whatever this process had opened under that number
/// since, a database's WAL file of another test, for instance).
final class PseudoTerminal: @unchecked Sendable {
    let leader: Int32
    /// The follower side, for the child's standard error.
    let follower: FileHandle
    private let lock = NSLock()
    private var bytes = Data()
    private var done = false

    /// `TIOCSPTLCK` and `TIOCGPTN` (Linux, every architecture of asm-generic): the macros are
    /// not imported into Swift.
    private static let unlock: UInt = 0x4004_5431
    private static let number: UInt = 0x8004_5430

    /// Opens a new pseudo-terminal as `posix_openpt`, `unlockpt` and `ptsname` do (which Glibc's
    /// module does not offer).
    init() throws {
        leader = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var locked: Int32 = 0
        var index: UInt32 = 0
        guard leader >= 0, ioctl(leader, Self.unlock, &locked) == 0, ioctl(leader, Self.number, &index) == 0 else {
            throw CLIError(result: .init(status: -1, stdout: "", stderr: "no pseudo-terminal: \(String(cString: strerror(errno)))"))
        }
        // Close-on-exec: only the child it is given to (as its standard error) holds a copy.
        let fd = open("/dev/pts/\(index)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CLIError(result: .init(status: -1, stdout: "", stderr: "cannot open /dev/pts/\(index)"))
        }
        follower = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    /// Reads until every holder of the follower closed it (then the leader reads EIO): the
    /// child, and ``follower``, which ``ProcessExit`` closes once the child ended.
    func startReading() {
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(leader, &buffer, buffer.count)
                if count <= 0 { break }
                lock.withLock { bytes.append(contentsOf: buffer[0..<count]) }
            }
            lock.withLock { done = true }
            close(leader)
        }
    }

    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }

    func drained() async { _ = await waitUntil { self.lock.withLock { self.done } } }
}

/// Ctrl-C (SIGINT) and SIGTERM during long commands of the real binary: the command stops
/// starting work, ends what runs, records what was done, erases its progress line, says what was
/// done and what was not, and exits 130 (143); running it again finishes the work, and nothing is
/// half-written or inconsistent in between.
@Suite struct InterruptTests {
    /// A store of `files` small files in 20 folders (`d00/f0000.bin` …), added as domain `d` and
    /// synced; returns the store's contents by path.
    func makeDomain(_ temp: TemporaryFolder, _ cli: CLIRunner, files: Int, populateLimit: Int = 250) async throws -> [String: Data] {
        var contents: [String: Data] = [:]
        for index in 0..<files {
            let path = String(format: "d%02d/f%04d.bin", index % 20, index)
            contents[path] = Data("\(path)\n".utf8) + Data(repeating: UInt8(index % 251), count: 1500 + index % 700)
        }
        try FastFiles.write(contents, below: temp.url.appendingPathComponent("store"))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("store"))
        let synced = try await cli.run(["sync", "d", "--populate-limit", "\(populateLimit)"])
        #expect(synced.status == 0, "\(synced.stderr)")
        return contents
    }

    /// The regular files below `root` that are not placeholders, by relative path.
    func realFiles(_ root: URL) -> [String: Data] {
        FastFiles.read(below: root).filter { !$0.key.hasSuffix(".placeholder") }
    }

    /// How many entries of a folder are placeholders (or, with `placeholders` false, are not).
    static func count(in folder: URL, placeholders: Bool) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".placeholder") == placeholders }.count
    }

    /// The database is intact and its journal holds no operation marked running (an operation
    /// cut short is pending, replayed by the next sync); returns the domain's items by path.
    func checkDatabase(_ cli: CLIRunner) throws -> [String: ItemRecord] {
        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        #expect(try database.integrityCheck() == "ok")
        let domain = try #require(try database.domain(named: "d"))
        let running = try database.unfinishedOperations(domainID: domain.id!).filter { $0.state == .running }
        #expect(running.isEmpty, "running journal entries: \(running.map(\.templateIdentifier))")
        return Dictionary(uniqueKeysWithValues: try database.allItems(domainID: domain.id!).map { ($0.path, $0) })
    }

    /// `interrupted: X of N items VERB; M not done; run the same command again to finish`, the
    /// last line of standard error, → (X, N, M).
    func summary(_ stderr: String, verb: String) -> (done: Int, total: Int, notDone: Int)? {
        guard let line = stderr.split(separator: "\n").last.map(String.init) else { return nil }
        let pattern = #/interrupted: (\d+) of (\d+) items? ([a-z ]+); (\d+) not done; run the same command again to finish/#
        guard let match = line.wholeMatch(of: pattern), match.3 == verb, let done = Int(match.1), let total = Int(match.2),
            let notDone = Int(match.4)
        else { return nil }
        return (done, total, notDone)
    }

    @Test func ctrlCDuringMaterializeStopsCleanlyAndTheSameCommandFinishes() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        let store = try await makeDomain(temp, cli, files: 4000)
        let replica = cli.home.appendingPathComponent("domains/d")
        let run = try BackgroundCommand(cli, ["materialize", "-R", "d:/"], logs: temp.url)
        let folder = replica.appendingPathComponent("d00")
        #expect(await run.signal(SIGINT, when: { Self.count(in: folder, placeholders: false) >= 20 }), "\(run.stdout)")
        let status = await run.status()
        #expect(status == 130, "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.hasPrefix("interrupting: letting running work end; press Ctrl-C again to stop at once\n"), "\(run.stderr)")
        let counts = try #require(summary(run.stderr, verb: "materialized"), "\(run.stderr)")
        #expect(counts.total == store.count && counts.done + counts.notDone == counts.total && counts.notDone > 0, "\(run.stderr)")

        // Every file under a real name is whole, and recorded; the summary counted them.
        let placed = realFiles(replica)
        #expect(placed.count == counts.done)
        #expect(placed.filter { store[$0.key] != $0.value }.isEmpty)
        let items = try checkDatabase(cli)
        #expect(Set(items.values.filter { $0.state == .materialized }.map(\.path)) == Set(placed.keys))

        let again = try await cli.run(["materialize", "-R", "d:/"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == "materialized \(counts.notDone) items\n")
        #expect(realFiles(replica) == store)
        #expect(realFiles(cli.home.appendingPathComponent("staging")).isEmpty)
        _ = try checkDatabase(cli)
    }

    @Test func sigtermDuringPinExitsWith143AndPinAgainFinishes() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        let store = try await makeDomain(temp, cli, files: 4000)
        let replica = cli.home.appendingPathComponent("domains/d")

        let run = try BackgroundCommand(cli, ["pin", "d:/"], logs: temp.url)
        let folder = replica.appendingPathComponent("d00")
        #expect(await run.signal(SIGTERM, when: { Self.count(in: folder, placeholders: false) >= 20 }), "\(run.stdout)")
        #expect(await run.status() == 143, "\(run.stderr)")
        #expect(run.stderr.hasPrefix("interrupting: letting running work end; send the signal again to stop at once\n"), "\(run.stderr)")
        let counts = try #require(summary(run.stderr, verb: "pinned and materialized"), "\(run.stderr)")
        #expect(counts.notDone > 0 && counts.done == realFiles(replica).count, "\(run.stderr)")
        #expect(realFiles(replica).filter { store[$0.key] != $0.value }.isEmpty)
        let items = try checkDatabase(cli)
        #expect(items[""]?.isPinned == true)

        let again = try await cli.run(["pin", "d:/"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(realFiles(replica) == store)
    }

    @Test func ctrlCDuringSyncLeavesTheJournalReplayableAndSyncAgainSendsTheRestOnce() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        _ = try await makeDomain(temp, cli, files: 20)
        let replica = cli.home.appendingPathComponent("domains/d")
        var local: [String: Data] = [:]
        for index in 0..<3000 {
            let path = String(format: "up%d/n%04d.txt", index % 5, index)
            local[path] = Data("\(path) \(index)\n".utf8) + Data(repeating: UInt8(index % 253), count: 1000)
        }
        try FastFiles.write(local, below: replica)
        let storeRoot = temp.url.appendingPathComponent("store")

        let run = try BackgroundCommand(cli, ["sync", "d"], logs: temp.url)
        let folder = storeRoot.appendingPathComponent("up0")
        #expect(await run.signal(SIGINT, when: { Self.count(in: folder, placeholders: false) >= 20 }), "\(run.stdout)")
        #expect(await run.status() == 130, "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        let line = try #require(run.stderr.split(separator: "\n").last.map(String.init))
        let pattern =
            #/interrupted: d: (\d+) local changes sent, (\d+) not sent; remote changes not brought down; run the same command again to finish/#
        let match = try #require(line.wholeMatch(of: pattern), "\(run.stderr)")
        let sent = Int(match.1)!
        let notSent = Int(match.2)!
        // Five new folders and 3,000 files.
        #expect(sent + notSent == 3005 && notSent > 0, "\(line)")
        // What reached the store is whole and under its name once.
        let uploaded = realFiles(storeRoot).filter { $0.key.hasPrefix("up") }
        #expect(uploaded.filter { local[$0.key] != $0.value }.isEmpty)
        #expect(uploaded.count <= sent)
        _ = try checkDatabase(cli)

        let again = try await cli.run(["sync", "d"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(realFiles(storeRoot).filter { $0.key.hasPrefix("up") } == local)
        let database = try MetadataStore(url: cli.home.appendingPathComponent("metadata.sqlite"))
        let domain = try #require(try database.domain(named: "d"))
        #expect(try database.unfinishedOperations(domainID: domain.id!).isEmpty)
        #expect(try database.conflicts(domainID: domain.id!).isEmpty)
    }

    @Test func ctrlCDuringEvictRecordsWhatWasEvictedAndEvictAgainFinishes() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        let store = try await makeDomain(temp, cli, files: 3000)
        let replica = cli.home.appendingPathComponent("domains/d")
        #expect(try await cli.run(["materialize", "-R", "d:/"]).status == 0)

        let run = try BackgroundCommand(cli, ["evict", "-R", "d:/"], logs: temp.url)
        let folder = replica.appendingPathComponent("d00")
        #expect(await run.signal(SIGINT, when: { Self.count(in: folder, placeholders: true) >= 20 }), "\(run.stdout)")
        #expect(await run.status() == 130, "\(run.stderr)")
        let counts = try #require(summary(run.stderr, verb: "evicted"), "\(run.stderr)")
        #expect(counts.total == store.count && counts.done + counts.notDone == counts.total && counts.notDone > 0, "\(run.stderr)")
        // Each file is either downloaded and whole, or a placeholder as recorded.
        let placed = realFiles(replica)
        #expect(placed.count == counts.notDone)
        #expect(placed.filter { store[$0.key] != $0.value }.isEmpty)
        let items = try checkDatabase(cli)
        for (path, _) in store {
            let onDisk = placed[path] != nil
            let placeholder = FileManager.default.fileExists(atPath: replica.appendingPathComponent(path + ".placeholder").path)
            #expect(onDisk != placeholder, "\(path)")
            #expect(items[path]?.state == (onDisk ? .materialized : .placeholder), "\(path)")
        }

        let again = try await cli.run(["evict", "-R", "d:/"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(realFiles(replica).isEmpty)
    }

    @Test func ctrlCDuringPopulateSaysWhatIsStillDatalessAndPopulateAgainFinishes() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        var files: [String: Data] = [:]
        for folder in 0..<30 {
            for sub in 0..<40 {
                for index in 0..<3 { files["a\(folder)/b\(sub)/f\(index).txt"] = Data("x".utf8) }
            }
        }
        try FastFiles.write(files, below: temp.url.appendingPathComponent("store"))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("store"))
        #expect(try await cli.run(["sync", "d", "--populate-limit", "0"]).status == 0)
        let replica = cli.home.appendingPathComponent("domains/d")

        let run = try BackgroundCommand(cli, ["populate", "-R", "d:/"], logs: temp.url)
        let folder = replica.appendingPathComponent("a0/b1")
        #expect(await run.signal(SIGINT, when: { Self.count(in: folder, placeholders: true) == 3 }), "\(run.stdout)")
        #expect(await run.status() == 130, "\(run.stderr)")
        let line = try #require(run.stderr.split(separator: "\n").last.map(String.init))
        let pattern =
            #/interrupted: 0 of 1 item populated; 1 not done \(d:/: interrupted after populating (\d+) of the 1230 dataless folders below it; (\d+) are still dataless\); run the same command again to finish/#
        let match = try #require(line.wholeMatch(of: pattern), "\(run.stderr)")
        let items = try checkDatabase(cli)
        let dataless = items.values.filter { $0.kind == .folder && $0.isDataless }.count
        #expect(Int(match.2)! == dataless && dataless > 0 && Int(match.1)! + dataless == 1230, "\(line)")

        let again = try await cli.run(["populate", "-R", "d:/"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try checkDatabase(cli).values.filter(\.isDataless).isEmpty)
        #expect(FastFiles.read(below: replica).keys.filter { $0.hasSuffix(".placeholder") }.count == 3600)
    }

    @Test func theProgressLineIsErasedBeforeTheSummary() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        _ = try await makeDomain(temp, cli, files: 4000)
        let run = try BackgroundCommand(cli, ["materialize", "-R", "d:/"], logs: temp.url, terminal: true)
        let terminal = try #require(run.terminal)
        // A progress line is drawn over the erased line: "\r\e[Kmaterialize d   12%  …".
        let drawn = "\u{1B}[Kmaterialize d "
        #expect(await run.signal(SIGINT, when: { terminal.text.contains(drawn) }), "\(run.stderr)")
        #expect(await run.status() == 130, "\(run.stderr)")
        let output = run.stderr
        // After the last progress line drawn: the line erased, then only whole lines of text.
        let lastDraw = try #require(output.range(of: drawn, options: .backwards))
        let after = output[lastDraw.upperBound...]
        let erase = try #require(after.range(of: "\r\u{1B}[K"), "\(output.debugDescription)")
        let rest = String(after[erase.upperBound...])
        #expect(!rest.contains("\u{1B}") && !rest.contains("materialize d "), "\(rest.debugDescription)")
        #expect(rest.hasSuffix("; run the same command again to finish\r\n"), "\(rest.debugDescription)")
        #expect(summary(rest.replacingOccurrences(of: "\r", with: ""), verb: "materialized") != nil, "\(rest.debugDescription)")
    }

    @Test func aSecondCtrlCStopsAtOnceAndNothingIsCorrupt() async throws {
        let temp = try TemporaryFolder()
        defer { FastFiles.remove(temp.url) }
        let cli = CLIRunner(in: temp)
        let store = try await makeDomain(temp, cli, files: 3000)
        let replica = cli.home.appendingPathComponent("domains/d")

        let run = try BackgroundCommand(cli, ["materialize", "-R", "d:/"], logs: temp.url)
        let folder = replica.appendingPathComponent("d00")
        // Another process takes the database's write lock before the first signal: the command
        // cannot end cleanly (it waits to record its downloads), so the second signal is what
        // stops it.
        let database = cli.home.appendingPathComponent("metadata.sqlite")
        let blocker = Box<DatabaseWriteLock>()
        let errors = run.errURL
        let sent = await run.signals([
            .init(
                signal: SIGINT, condition: { Self.count(in: folder, placeholders: false) >= 5 },
                before: { blocker.value = try? DatabaseWriteLock(database) }),
            // The first was seen: the command is winding down, waiting for the database.
            .init(signal: SIGINT, condition: { ((try? String(contentsOf: errors, encoding: .utf8)) ?? "").contains("press Ctrl-C again") }),
        ])
        #expect(sent == 2, "\(run.stderr)")
        #expect(blocker.value != nil)
        let status = await run.status(timeout: 30)
        blocker.value?.release()
        #expect(status == 130, "\(run.stderr)")
        #expect(
            run.stderr.hasSuffix("interrupted again: stopped at once; what was done is recorded, run the same command again to finish\n"),
            "\(run.stderr)")

        // As after a kill: files under real names are whole, the database intact, the next run
        // finishes.
        #expect(realFiles(replica).filter { store[$0.key] != $0.value }.isEmpty)
        _ = try checkDatabase(cli)
        let again = try await cli.run(["materialize", "-R", "d:/"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(realFiles(replica) == store)
    }
}

/// A value set on one thread and read on another.
final class Box<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?
    var value: Value? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// An exclusive write transaction on a database, held by another process until released.
final class DatabaseWriteLock: @unchecked Sendable {
    private let process = TestProcess()
    private let input = Pipe()
    private let exit: ProcessExit

    /// Holds the lock through a `sqlite3` process; returns once the lock is held.
    init(_ database: URL) throws {
        // sqlite3 from scripts/install-deps.sh; -bail: a failed BEGIN ends it (and the wait below).
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = ["-bail", database.path]
        process.standardInput = input
        let output = Pipe()
        process.standardOutput = output
        exit = ProcessExit(process)
        try process.run()
        input.fileHandleForWriting.write(Data(".timeout 10000\nBEGIN EXCLUSIVE;\nSELECT 'locked';\n".utf8))
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("locked") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
    }

    func release() {
        try? input.fileHandleForWriting.write(contentsOf: Data("ROLLBACK;\n.quit\n".utf8))
        try? input.fileHandleForWriting.close()
        exit.wait()
    }

    deinit { if process.isRunning { release() } }
}

/// Writing, reading and removing thousands of files with system calls: Foundation's FileManager
/// took 30 s to write 6,000 small files on a busy CI file system, and 10 s to remove them.
enum FastFiles {
    /// Writes files (relative paths below `root`), making their folders.
    static func write(_ files: [String: Data], below root: URL) throws {
        var made = Set<String>()
        for (relative, data) in files {
            let path = root.appendingPathComponent(relative).path
            let folder = (path as NSString).deletingLastPathComponent
            if made.insert(folder).inserted {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            }
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
            defer { close(fd) }
            let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written == data.count else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
        }
    }

    /// Every regular file below `root` (not following symlinks), by relative path, with its bytes.
    static func read(below root: URL) -> [String: Data] {
        var result: [String: Data] = [:]
        func walk(_ relative: String) {
            let folder = relative.isEmpty ? root.path : root.path + "/" + relative
            guard let directory = opendir(folder) else { return }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = String(decoding: DirectoryEntry.nameBytes(of: entry), as: UTF8.self)
                if name == "." || name == ".." { continue }
                let path = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(root.path + "/" + path, &info) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFDIR {
                    walk(path)
                } else if info.st_mode & S_IFMT == S_IFREG {
                    result[path] = contents(root.path + "/" + path, size: Int(info.st_size))
                }
            }
        }
        walk("")
        return result
    }

    private static func contents(_ path: String, size: Int) -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return Data() }
        defer { close(fd) }
        var data = Data(count: size)
        let count = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, size) }
        return data.prefix(max(0, count))
    }

    /// Removes a folder and everything in it (`rm -rf`), before the test's temporary folder is.
    static func remove(_ root: URL) {
        let process = TestProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/rm")
        process.arguments = ["-rf", root.path]
        let exit = ProcessExit(process)
        guard (try? process.run()) != nil else { return }
        exit.wait()
    }
}
