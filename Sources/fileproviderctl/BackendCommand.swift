import ArgumentParser
import ExternalAdapter
import Foundation
import ProviderConformance
import ProviderCore

struct BackendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backend",
        abstract: "List the backends (built-in and external programs) and test one against the conformance suite.",
        subcommands: [BackendListCommand.self, BackendTestCommand.self]
    )
}

struct BackendListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the built-in backends and the external backend programs found.",
        discussion: """
            External backends are programs named fileprovider-backend-NAME, looked for in \
            $XDG_DATA_HOME/fileprovider/backends (default ~/.local/share/fileprovider/backends), \
            then in each folder of PATH; the first one of a name wins, and a built-in backend of \
            the same name wins over it. Each program found is started and asked to describe \
            itself; other commands use what it said, kept in $XDG_CACHE_HOME/fileprovider/backends \
            (default ~/.cache/fileprovider/backends), until the program's file changes \
            (Docs/ExternalBackends.md).
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        var entries = AdapterList.descriptors.map { descriptor in
            BackendJSON(
                kind: descriptor.kind, origin: "built-in", path: nil, summary: descriptor.summary,
                options: descriptor.options.map(BackendOptionJSON.init), error: nil, shadowed: nil)
        }
        let builtIn = Set(entries.map(\.kind))
        for program in ExternalBackends.all() {
            var entry = BackendJSON(
                kind: program.kind, origin: "external", path: program.path, summary: nil, options: nil, error: nil,
                shadowed: builtIn.contains(program.kind) ? true : nil)
            do {
                let descriptor = try await onOwnThread { () throws(FileProviderError) in
                    try ExternalBackends.describe(program, remember: true)
                }
                entry.summary = descriptor.summary
                entry.options = descriptor.options.map(BackendOptionJSON.init)
            } catch {
                entry.error = error.message
            }
            entries.append(entry)
        }
        if output.json {
            try Output.json(entries)
            return
        }
        var text = ""
        for entry in entries {
            var line = "\(entry.kind)  \(entry.origin)"
            if let path = entry.path { line += "  \(Output.name(path))" }
            if entry.shadowed == true { line += "  (hidden by the built-in \(entry.kind))" }
            text += line + "\n"
            if let summary = entry.summary { text += "    \(Output.text(summary))\n" }
            if let error = entry.error { text += "    cannot describe it: \(Output.text(error))\n" }
            for option in entry.options ?? [] {
                var optionLine = "    --\(option.name) <\(option.type)>  \(Output.text(option.help))"
                if option.required { optionLine += " (required)" }
                if let value = option.default { optionLine += " (default: \(Output.text(value)))" }
                if option.secret { optionLine += " (secret)" }
                text += optionLine + "\n"
            }
        }
        Output.write(text)
    }
}

/// Runs blocking work (starting a program and waiting for it) on a thread of its own.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
    let result: Result<T, FileProviderError> = await withCheckedContinuation { continuation in
        let thread = Thread {
            do throws(FileProviderError) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        thread.start()
    }
    return try result.get()
}

/// One backend in `fileproviderctl backend list --json`.
struct BackendJSON: Encodable {
    var kind: String
    /// `built-in` or `external`.
    var origin: String
    /// An external backend's program.
    var path: String?
    var summary: String?
    var options: [BackendOptionJSON]?
    /// Why an external program could not be described.
    var error: String?
    /// A built-in backend of the same name hides this program.
    var shadowed: Bool?
}

struct BackendOptionJSON: Encodable {
    var name: String
    var help: String
    var type: String
    var `default`: String?
    var required: Bool
    var secret: Bool

    init(_ option: BackendOption) {
        name = option.name
        help = option.help
        type = option.type.rawValue
        self.default = option.defaultValue
        required = option.isRequired
        secret = option.isSecret
    }
}

struct BackendTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run the conformance suite (BackendConformance) against a backend, built-in or external.",
        discussion: """
            The store the options name must be empty: every check starts from an empty store, \
            and after each check everything in it is deleted through the backend. Use a store \
            made for the test (an empty folder, a test account), never one holding data.

            Prints one line per check (ok or FAIL with what differed) and a summary; the exit \
            status is 1 when a check failed.

            Example:
              mkdir /tmp/empty && fileproviderctl backend test pyfolder --option root=/tmp/empty
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The backend's kind (see 'fileproviderctl backend list').", completion: .backendKinds)
    var kind: String

    @Option(name: .customLong("option"), help: ArgumentHelp("A backend option as NAME=VALUE; repeatable.", valueName: "name=value"))
    var options: [String] = []

    @Option(name: .customLong("check"), help: ArgumentHelp("Run only this check; repeatable (default: all).", valueName: "name"))
    var checks: [String] = []

    func validate() throws {
        for option in options where !option.contains("=") {
            throw ValidationError("--option takes NAME=VALUE, not '\(option)'")
        }
        for check in checks where !BackendConformance.checkNames.contains(check) {
            throw ValidationError("no check named '\(check)'; the checks are \(BackendConformance.checkNames.joined(separator: ", "))")
        }
    }

    func run() async throws {
        var values: [String: String] = [:]
        for option in options {
            let parts = option.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            values[String(parts[0])] = String(parts[1])
        }
        try await AdapterList.describeExternal(kind)
        let descriptor = try AdapterList.registry.descriptor(for: kind)
        let configuration = try descriptor.validate(descriptor.normalizingPaths(values))
        let factory = descriptor.factory
        let makeBackend: BackendConformance.MakeBackend = { try await factory(configuration) }

        let first = try await makeBackend()
        let existing: [Item]
        do {
            existing = try await first.enumerateAllItems(in: .rootContainer)
        } catch {
            await first.close()
            throw error
        }
        await first.close()
        guard existing.isEmpty else {
            throw FileProviderError(
                .invalidArgument,
                "the store is not empty (it holds \(existing.count) item\(existing.count == 1 ? "" : "s")); 'backend test' deletes everything in it after each check: give it an empty store"
            )
        }

        let conformance = BackendConformance.overExistingStore(makeBackend: makeBackend)
        let json = output.json
        let results = await conformance.runEach(checks.isEmpty ? BackendConformance.checkNames : checks) { result in
            guard !json else { return }
            if result.passed {
                Output.write("ok    \(result.check)\n")
            } else {
                Output.write("FAIL  \(result.check): \(Output.text(result.message ?? ""))\n")
            }
        }
        let failed = results.filter { !$0.passed }
        if json {
            try Output.json(
                BackendTestJSON(kind: kind, passed: results.count - failed.count, failed: failed.count, checks: results))
        } else {
            Output.write(
                "\(kind): \(results.count - failed.count) of \(results.count) checks passed\(failed.isEmpty ? "" : ", \(failed.count) failed")\n"
            )
        }
        if !failed.isEmpty { throw ExitCode(1) }
    }
}

/// `fileproviderctl backend test --json`.
struct BackendTestJSON: Encodable {
    var kind: String
    var passed: Int
    var failed: Int
    var checks: [ConformanceResult]
}
