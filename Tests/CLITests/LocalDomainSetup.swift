import Foundation
import Testing

/// The setup most CLI tests share: a state folder in the test's temporary folder and a domain
/// of the `local` backend over another folder of it.
extension CLIRunner {
    /// A runner whose state folder is `home` in `temp`.
    init(in temp: TemporaryFolder) {
        self.init(home: temp.url.appendingPathComponent("home"))
    }

    /// Adds the `local` domain `name` over `root` (a folder the test wrote its files into), with
    /// `options` after the root, in `placeholder-files` mode unless `options` name a `--mode`;
    /// with `sync`, syncs the domain after. Records an issue, with the
    /// command's error output, when one of them fails.
    /// - Throws: when the binary cannot be run.
    func addLocalDomain(
        _ name: String, root: URL, options: [String] = [], sync: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let mode = options.contains("--mode") ? [] : ["--mode", "placeholder-files"]
        let added = try await run(["domain", "add", name, "--backend", "local", "--root", root.path] + mode + options)
        #expect(added.status == 0, "domain add \(name): \(added.stderr)", sourceLocation: sourceLocation)
        guard sync else { return }
        let synced = try await run(["sync", name])
        #expect(synced.status == 0, "sync \(name): \(synced.stderr)", sourceLocation: sourceLocation)
    }
}
