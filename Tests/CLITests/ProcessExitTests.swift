import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The helper every test uses to wait for a child process must not keep the files given to the
/// process as standard output and error open once it has ended: they stayed open (Foundation
/// never releases a `Process` with a termination handler), two descriptors per program run, and
/// past 1,024 of them Foundation no longer reaped children and the test bundle hung.
struct ProcessExitTests {
    @Test func anEndedProcessLeavesItsOutputFileClosed() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("process-exit-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var file = stat()
        try #require(stat(path, &file) == 0)
        let (descriptor, status) = try await offThePool { () -> (Int32, Int32) in
            let process = Process()
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
