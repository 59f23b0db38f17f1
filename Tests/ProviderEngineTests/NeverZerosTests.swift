import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The owner of a pre-content group dies (`kill -9`) while programs read files it has not filled:
/// no program ever reads a byte that is not the file's (the kernel would let them read the
/// holes as zeros if the group were released); a read fails (EIO) or the file is unreachable
/// (the mount is gone), and a new owner serves every file right. The owner is the
/// `precontent-listener` fixture (a minimal provider on ``PreContentGuardian``,
/// ``ReplicaMount`` and ``PreContentGroup``), the guardian is `fileprovider-guard`.
@Suite(.serialized) struct NeverZerosTests {
    /// A running `precontent-listener`.
    final class ListenerProcess: @unchecked Sendable {
        let process: TestProcess
        let exit: ProcessExit
        /// Whether it took the group over from a guardian.
        let adopted: Bool
        /// Its guardian's process id.
        let guardian: Int32

        private init(process: TestProcess, exit: ProcessExit, adopted: Bool, guardian: Int32) {
            self.process = process
            self.exit = exit
            self.adopted = adopted
            self.guardian = guardian
        }

        static func binary() -> String {
            var folders = Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent().path }
            if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
                folders.append((executable as NSString).deletingLastPathComponent)
            }
            for folder in folders where access(folder + "/precontent-listener", X_OK) == 0 {
                return folder + "/precontent-listener"
            }
            let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            return package.appendingPathComponent(".build/debug/precontent-listener").path
        }

        /// Starts one on `lab` and waits until it is ready.
        /// `descriptorLimit` starts it with that soft `RLIMIT_NOFILE` (through `sh -c ulimit`);
        /// `raiseDescriptors` makes it raise the limit and open that many descriptors once its
        /// guardian runs.
        static func start(
            _ lab: PreContentLab, delayMilliseconds: Int = 0, ignoreComplete: Bool = true, guarded: Bool = true,
            descriptorLimit: Int? = nil, raiseDescriptors: Int? = nil
        ) async throws -> ListenerProcess {
            let process = TestProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            let limit = descriptorLimit.map { "ulimit -S -n \($0); " } ?? ""
            let arguments =
                [
                    "--backing", lab.backing, "--replica", lab.replica, "--store", lab.store, "--run", lab.run,
                    "--events", lab.root + "/events.log", "--delay-ms", String(delayMilliseconds),
                ] + (ignoreComplete ? [] : ["--no-ignore"]) + (guarded ? [] : ["--no-guardian"])
                + (raiseDescriptors.map { ["--raise-fds", String($0)] } ?? [])
            process.arguments = ["-c", limit + "exec \"$0\" \"$@\"", binary()] + arguments
            let output = lab.root + "/listener-\(UUID().uuidString.prefix(8)).out"
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: output)
            process.standardError = FileHandle(forWritingAtPath: output)
            process.standardInput = FileHandle.nullDevice
            let exit = ProcessExit(process)
            try process.run()
            var line = ""
            let ready = await eventually(timeout: 30) {
                line = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                return line.contains("ready ") || !process.isRunning
            }
            guard ready, let ready = line.split(separator: "\n").first(where: { $0.hasPrefix("ready ") }) else {
                kill(process.processIdentifier, SIGKILL)
                throw FileProviderError(.localIOFailure, "precontent-listener did not get ready: \(line)")
            }
            var fields: [String: String] = [:]
            for field in ready.split(separator: " ").dropFirst() {
                let parts = field.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
            }
            return ListenerProcess(
                process: process, exit: exit, adopted: fields["adopted"] == "1", guardian: Int32(fields["guardian"] ?? "") ?? 0)
        }

        /// `kill -9`, and waits until it is gone.
        func killNine() async throws {
            kill(process.processIdentifier, SIGKILL)
            _ = try await offThePool { [exit] in exit.wait(seconds: 30) }
        }
    }

    /// Whether a process runs (a zombie does not).
    static func alive(_ pid: Int32) -> Bool {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = status.lastIndex(of: ")")
        else { return false }
        let state = status[status.index(after: close)...].split(separator: " ").first
        return state != "Z" && state != "X"
    }

    /// A python3 program that opens `path`, prints "opened", waits until `go` exists, then
    /// reads the whole file and prints it: a program that opened a file before a crash and
    /// reads after it.
    static func startOpener(path: String, go: String) async throws -> StartedProgram {
        let script = """
            import os, sys, time
            f = open(sys.argv[1], 'rb')
            print('opened', file=sys.stderr, flush=True)
            while not os.path.exists(sys.argv[2]):
                time.sleep(0.01)
            sys.stdout.buffer.write(f.read())
            """
        let program = try startProgram(["python3", "-c", script, path, go])
        let opened = await eventually(timeout: 30) {
            ((try? String(contentsOfFile: program.errorPath, encoding: .utf8)) ?? "").contains("opened")
        }
        try #require(opened, "the opener did not open \(path)")
        return program
    }

    /// Waits until the guardian with `pid` ended and left no takeover socket behind, and the
    /// replica is not mounted.
    static func expectAllGone(_ lab: PreContentLab, guardians: [Int32]) async {
        let gone = await eventually(timeout: 30) {
            guardians.allSatisfy { !alive($0) } && PreContentGuardian.takeoverSockets(in: lab.run).isEmpty
                && !ReplicaMount.isMountPoint(lab.replica)
        }
        #expect(gone, "guardians \(guardians.filter { alive($0) }) still run; log: \(log(lab))")
    }

    static func log(_ lab: PreContentLab) -> String {
        (try? String(contentsOfFile: lab.run + "/guard.log", encoding: .utf8)) ?? ""
    }

    @Test func aProgramWaitingWhenTheOwnerIsKilledGetsAnErrorNeverZeros() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        let big = patterned(5 * 1024 * 1024 + 7, seed: 11)
        try lab.makeDataless("big", big)
        try lab.makeDataless("small", Data("hello\n".utf8))
        // It answers nothing for a minute: every program waits.
        let listener = try await ListenerProcess.start(lab, delayMilliseconds: 60_000)
        #expect(!listener.adopted)
        let opener = try await Self.startOpener(path: lab.replica + "/small", go: lab.root + "/go")
        let reader = try startProgram(["cat", lab.replica + "/big"])
        try #require(await lab.listenerSawEvent(of: "big"), "cat never reached the listener")

        let killed = Date()
        try await listener.killNine()
        // A bound, not a speed: the guardian answers within a second on a quiet machine; CI's
        // machine runs hundreds of tests beside this one.
        let read = try await reader.finish(timeout: 90)
        #expect(Date().timeIntervalSince(killed) < 90, "the waiting read took \(Date().timeIntervalSince(killed)) s to fail")
        #expect(!read.succeeded && read.output.isEmpty, "\(read)")
        #expect(read.errorText.contains("Input/output error"), "\(read)")
        #expect(await eventually(timeout: 30) { !ReplicaMount.isMountPoint(lab.replica) }, "the replica is still mounted")

        // A program that opened a file before the crash and reads after it: EIO, not zeros.
        _ = FileManager.default.createFile(atPath: lab.root + "/go", contents: nil)
        let late = try await opener.finish(timeout: 30)
        #expect(!late.succeeded && late.output.isEmpty, "\(late)")
        #expect(late.errorText.contains("Errno 5"), "\(late)")
        #expect(lab.status(lab.backing + "/big")?.st_blocks == 0)
        // With the last user gone, no event can come: the guardian ends.
        await Self.expectAllGone(lab, guardians: [listener.guardian])
        #expect(Self.log(lab).contains("owner gone: denied 1 events, detached 2 mounts"), "\(Self.log(lab))")
    }

    /// The control: without a guardian, the kernel lets the waiting read through when the owner
    /// dies, and `cat` prints the file's holes as zeros and succeeds. What the guardian is for,
    /// and proof that the checks above would see it.
    @Test func withoutAGuardianAKillLetsAWaitingProgramReadZeros() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        let contents = patterned(64 * 1024, seed: 13)
        try lab.makeDataless("file", contents)
        let listener = try await ListenerProcess.start(lab, delayMilliseconds: 60_000, guarded: false)
        let reader = try startProgram(["cat", lab.replica + "/file"])
        try #require(await lab.listenerSawEvent(of: "file"), "cat never reached the listener")
        try await listener.killNine()
        let read = try await reader.finish(timeout: 30)
        #expect(read.succeeded && read.output == Data(count: contents.count), "\(read)")
        #expect(!Reader.cat.neverWrong(read, contents: contents))
        // Nobody took the mount away either.
        #expect(ReplicaMount.isMountPoint(lab.replica))
    }

    /// The owner and its guardian killed together (`systemctl kill -s KILL` of a unit, an OOM
    /// kill of a whole cgroup): the kernel drops the group's marks with the group, so a waiting
    /// program reads holes as zeros (the window Reliability.md names) and the mount stays,
    /// unguarded. ``ReplicaMount/detachUnguarded(at:backing:)`` (what every command, `serve`
    /// and the unit's check run) leaves a mount a live group marks and detaches this one; a
    /// later reader finds nothing, and a new owner serves the file right. The guardian runs
    /// with `oom_score_adj` -1000.
    @Test func ownerAndGuardianKilledTogetherLeaveAMountTheCheckDetaches() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        let contents = patterned(64 * 1024, seed: 15)
        try lab.makeDataless("file", contents)
        let listener = try await ListenerProcess.start(lab, delayMilliseconds: 60_000)
        // Where the system refuses the setting (some sandboxes answer EIO), the guardian says so.
        let adjust = try String(contentsOfFile: "/proc/\(listener.guardian)/oom_score_adj", encoding: .utf8)
        #expect(
            adjust.trimmingCharacters(in: .whitespacesAndNewlines) == "-1000" || Self.log(lab).contains("cannot set oom_score_adj"),
            "\(Self.log(lab))")
        #expect(try ReplicaMount.detachUnguarded(at: lab.replica, backing: lab.backing) == false)
        #expect(ReplicaMount.isMountPoint(lab.replica), "the check detached a mount its live group marks")

        let reader = try startProgram(["cat", lab.replica + "/file"])
        try #require(await lab.listenerSawEvent(of: "file"), "cat never reached the listener")
        kill(listener.guardian, SIGKILL)
        try await listener.killNine()
        let read = try await reader.finish(timeout: 30)
        // What remains: the program that waited when both died reads the holes.
        #expect(read.succeeded && read.output == Data(count: contents.count), "\(read)")
        #expect(ReplicaMount.isMountPoint(lab.replica))

        #expect(try ReplicaMount.detachUnguarded(at: lab.replica, backing: lab.backing))
        #expect(!ReplicaMount.isMountPoint(lab.replica), "the anchor stayed")
        let later = try await runProgram(["cat", lab.replica + "/file"])
        #expect(!later.succeeded && later.output.isEmpty && later.errorText.contains("No such file"), "\(later)")

        let next = try await ListenerProcess.start(lab)
        let again = try await runProgram(["cat", lab.replica + "/file"])
        #expect(again.succeeded && again.output == contents, "\(again)")
        try await next.killNine()
        await Self.expectAllGone(lab, guardians: [next.guardian])
    }

    /// An owner that raised its descriptor limit without telling its guardian read its events
    /// under numbers above the limit the guardian knows: the guardian still finds and denies
    /// them (it tries every number up to the system's limit after the urgent work).
    @Test func eventsAboveTheLimitTheGuardianKnowsAreDeniedToo() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        try lab.makeDataless("file", patterned(30_000, seed: 14))
        let listener = try await ListenerProcess.start(lab, delayMilliseconds: 60_000, descriptorLimit: 256, raiseDescriptors: 1000)
        let reader = try startProgram(["cat", lab.replica + "/file"])
        try #require(await lab.listenerSawEvent(of: "file"), "cat never reached the listener")
        try await listener.killNine()
        let read = try await reader.finish(timeout: 30)
        #expect(!read.timedOut && !read.succeeded && read.output.isEmpty, "\(read)")
        #expect(read.errorText.contains("Input/output error"), "\(read)")
        #expect(await eventually(timeout: 30) { Self.log(lab).contains("at or above the owner's limit 256") }, "\(Self.log(lab))")
        await Self.expectAllGone(lab, guardians: [listener.guardian])
    }

    @Test func aNewOwnerTakesTheGroupOverAndFilesOpenedBeforeTheCrashReadRight() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        let big = patterned(3 * 1024 * 1024 + 1, seed: 12)
        try lab.makeDataless("big", big)
        try lab.makeDataless("small", Data("hello\n".utf8))
        let first = try await ListenerProcess.start(lab)
        let opener = try await Self.startOpener(path: lab.replica + "/small", go: lab.root + "/go")
        try await first.killNine()
        // The guardian detached the mount (the opener keeps its group in use).
        try #require(await eventually(timeout: 30) { !ReplicaMount.isMountPoint(lab.replica) }, "\(Self.log(lab))")

        let second = try await ListenerProcess.start(lab)
        #expect(second.adopted)
        #expect(second.guardian != first.guardian)
        #expect(await eventually(timeout: 30) { !Self.alive(first.guardian) }, "the old guardian still runs")
        // The file opened through the old (detached) mount reads right: its event reaches the new owner.
        _ = FileManager.default.createFile(atPath: lab.root + "/go", contents: nil)
        let late = try await opener.finish(timeout: 30)
        #expect(late.succeeded && late.output == Data("hello\n".utf8), "\(late)")
        let read = try await runProgram(["cat", lab.replica + "/big"])
        #expect(read.succeeded && read.output == big, "\(read)")

        try await second.killNine()
        await Self.expectAllGone(lab, guardians: [first.guardian, second.guardian])
        #expect(Self.log(lab).contains("handed the group over to a new owner"), "\(Self.log(lab))")
    }

    @Test func killNineAtRandomMomentsWhileProgramsReadNeverShowsABadByte() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        let rounds = 24
        var generator = SystemRandomNumberGenerator()
        var files: [(name: String, contents: Data)] = []
        var guardians: [Int32] = []
        var outcomes: [String: Int] = [:]
        var adoptions = 0
        // An opener of the previous round that still holds a file: the guardian stays, and
        // the next owner takes the group over; it reads after the takeover.
        var carried: (program: StartedProgram, contents: Data, go: String)?

        for round in 0..<rounds {
            var batch: [(name: String, contents: Data, reader: Reader)] = []
            for (index, reader) in Reader.allCases.enumerated() {
                let size = [1, 4096, 100_000, 2 * 1024 * 1024 + 5].randomElement(using: &generator) ?? 1
                let name = "r\(round)-\(reader.rawValue)"
                batch.append((name, patterned(size, seed: UInt8(truncatingIfNeeded: round * 8 + index + 1)), reader))
            }
            let held = (name: "r\(round)-held", contents: patterned(50_000, seed: UInt8(truncatingIfNeeded: round + 100)))
            for file in batch { try lab.makeDataless(file.name, file.contents) }
            try lab.makeDataless(held.name, held.contents)
            files += batch.map { ($0.name, $0.contents) } + [held]

            let listener = try await ListenerProcess.start(
                lab, delayMilliseconds: [0, 0, 1, 3].randomElement(using: &generator) ?? 0,
                ignoreComplete: Bool.random(using: &generator))
            guardians.append(listener.guardian)
            if listener.adopted { adoptions += 1 }
            if let previous = carried {
                _ = FileManager.default.createFile(atPath: previous.go, contents: nil)
                let late = try await previous.program.finish(timeout: 30)
                #expect(Reader.python.neverWrong(late, contents: previous.contents), "round \(round), opener: \(late)")
                outcomes[
                    "opener " + (late.succeeded ? "read right" : "failed: \(late.errorText.split(separator: "\n").last ?? "")"), default: 0] +=
                    1
                carried = nil
            }
            let keep = round % 2 == 0 && round < rounds - 1
            let opener = keep ? try await Self.startOpener(path: lab.replica + "/" + held.name, go: lab.root + "/go-\(round)") : nil

            let readers = try batch.map { file in
                try startProgram(file.reader.command(path: lab.replica + "/" + file.name, expected: lab.store + "/" + file.name))
            }
            try await Task.sleep(nanoseconds: UInt64.random(in: 0...40_000_000, using: &generator))
            try await listener.killNine()
            for (file, reader) in zip(batch, readers) {
                let outcome = try await reader.finish(timeout: 30)
                #expect(file.reader.neverWrong(outcome, contents: file.contents), "round \(round), \(file.name): \(outcome)")
                let kind =
                    outcome.succeeded
                    ? "read right"
                    : outcome.errorText.contains("No such file") || outcome.errorText.contains("Errno 2")
                        ? "unreachable"
                        : outcome.errorText.contains("Input/output") || outcome.errorText.contains("Errno 5") ? "EIO" : "failed otherwise"
                outcomes[kind, default: 0] += 1
            }
            #expect(await eventually(timeout: 30) { !ReplicaMount.isMountPoint(lab.replica) }, "round \(round): still mounted")
            if let opener { carried = (opener, held.contents, lab.root + "/go-\(round)") }
        }

        // A new owner serves every file of every round right (partly filled ones included).
        let last = try await ListenerProcess.start(lab)
        guardians.append(last.guardian)
        for file in files {
            let outcome = try await runProgram(["cat", lab.replica + "/" + file.name])
            #expect(outcome.succeeded && outcome.output == file.contents, "\(file.name): \(outcome)")
        }
        try await last.killNine()
        await Self.expectAllGone(lab, guardians: guardians)
        #expect(adoptions >= rounds / 2, "\(adoptions) takeovers in \(rounds) rounds")
        #expect(outcomes.keys.allSatisfy { !$0.hasPrefix("opener failed") }, "\(outcomes)")
        print("never zeros: \(rounds) rounds of kill -9, \(adoptions) takeovers, outcomes \(outcomes.sorted { $0.key < $1.key })")
    }
}
