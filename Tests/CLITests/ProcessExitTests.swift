import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The helper every test uses to wait for a child process must not keep the files given to the
/// process as standard output and error open once it has ended: they stayed open (Foundation
/// never releases a `TestProcess` with a termination handler), two descriptors per program run, and
/// past 1,024 of them Foundation no longer reaped children and the test bundle hung.
struct ProcessExitTests {
    @Test func anEndedProcessLeavesItsOutputFileClosed() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("process-exit-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var file = stat()
        try #require(stat(path, &file) == 0)
        let (descriptor, status) = try await offThePool { () -> (Int32, Int32) in
            let process = TestProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "echo done"]
            let output = try #require(FileHandle(forWritingAtPath: path))
            process.standardOutput = output
            let exit = ProcessExit(process)
            try process.run()
            exit.wait()
            return (output.fileDescriptor, process.terminationStatus)
        }
        #expect(status == 0)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "done\n")
        // The descriptor is closed (or, reused meanwhile by another test, no longer this file).
        var now = stat()
        let stillOurs = fstat(descriptor, &now) == 0 && now.st_dev == file.st_dev && now.st_ino == file.st_ino
        #expect(!stillOurs, "descriptor \(descriptor) still holds \(path)")
    }
}

/// A command whose standard error is a pseudo-terminal (``BackgroundCommand`` with a terminal)
/// closes the terminal's follower once, when it ended. It was closed right after the start too,
/// and the second close, at the end, closed whatever the bundle had opened under that number
/// meanwhile: a metadata database's WAL file of another test, for instance, whose next read
/// failed with "SQLite error 10: disk I/O error" (or whose writes went to another file).
struct TerminalDescriptorTests {
    @Test func aDescriptorOpenedWhileATerminalCommandRunsStaysOpen() async throws {
        let temp = try TemporaryFolder()
        let cli = CLIRunner(in: temp)
        let anchorPath = temp.url.appendingPathComponent("anchor").path
        _ = FileManager.default.createFile(atPath: anchorPath, contents: nil)
        let anchor = open(anchorPath, O_RDONLY | O_CLOEXEC)
        try #require(anchor >= 0)
        defer { close(anchor) }
        var anchorStatus = stat()
        try #require(fstat(anchor, &anchorStatus) == 0)

        let run = try BackgroundCommand(cli, ["domain", "list"], logs: temp.url, terminal: true)
        let terminal = try #require(run.terminal)
        // The lowest free number at or above the follower's: the follower's own when it was
        // closed already (what a file opened by another test meanwhile got).
        let probe = fcntl(anchor, F_DUPFD_CLOEXEC, terminal.follower.fileDescriptor)
        try #require(probe >= 0)
        let exit = run.exit
        try await offThePool { exit.wait() }
        #expect(await run.status() == 0, "\(run.stderr)")

        var probeStatus = stat()
        let intact =
            fcntl(probe, F_GETFD) != -1 && fstat(probe, &probeStatus) == 0
            && probeStatus.st_dev == anchorStatus.st_dev && probeStatus.st_ino == anchorStatus.st_ino
        #expect(intact, "descriptor \(probe) was closed behind its owner's back")
        // Not closed again when someone else did: the number may be another test's by now.
        if intact { close(probe) }
    }
}
