import Foundation
import ProviderTesting
import Testing

/// The man page (`scripts/manual.sh`, from the commands' help) renders without a warning and
/// with every character of the help: `man fileproviderctl` printed 13 `mdoc warning: Empty input
/// line` and showed `1G = 1024³ bytes` as `1G = 1024 bytes` (generate-manual drops what is not
/// ASCII: the help is ASCII, `1024^3`).
///
/// The page is made from the binary the tests run, with the generate-manual tool beside it
/// (`swift build --product generate-manual`, which `make test` runs; else `$GENERATE_MANUAL`).
@Suite struct ManualPageTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Runs `path` with `arguments` in a UTF-8 locale; its exit status and both outputs.
    func run(_ path: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["LANG"] = "C.UTF-8"
        environment["LC_ALL"] = "C.UTF-8"
        environment["MANWIDTH"] = "200"
        let fixed = environment
        let captured = try await offThePool { try ChildProcess.capture(path, arguments, environment: fixed) }
        var status: Int32 = -1
        if case .exited(let code) = captured.ending { status = code }
        return (status, String(decoding: captured.output, as: UTF8.self), String(decoding: captured.errorOutput, as: UTF8.self))
    }

    @Test func thePageRendersWithoutWarnings() async throws {
        let temp = try TemporaryFolder()
        let page = temp.url.appendingPathComponent("fileproviderctl.1").path
        let made = try await run(
            "/bin/bash",
            [Self.root.appendingPathComponent("scripts/manual.sh").path, "--binary", CLIRunner.locateBinary().path, "--output", page])
        try #require(made.status == 0, "scripts/manual.sh: \(made.stderr)")
        let text = try String(contentsOfFile: page, encoding: .utf8)
        #expect(!text.contains("\n\n"), "a blank line in the page")
        let help = try await run(CLIRunner.locateBinary().path, ["--experimental-dump-help"])
        let outside = help.stdout.unicodeScalars.filter { !$0.isASCII }.map(String.init).joined()
        #expect(outside.isEmpty, "characters generate-manual drops in the help: \(outside)")

        let checked = try await run("/usr/bin/groff", ["-ww", "-mandoc", "-z", page])
        #expect(checked.status == 0)
        #expect(checked.stderr.isEmpty, "groff: \(checked.stderr)")

        let shown = try await run("/usr/bin/man", ["-l", page])
        #expect(shown.status == 0)
        #expect(shown.stderr.isEmpty, "man: \(shown.stderr)")
        #expect(shown.stdout.contains("1G = 1024^3 bytes"))
        #expect(shown.stdout.contains("domain add"))
    }
}
