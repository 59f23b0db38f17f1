import Foundation
import ProviderTesting
import Testing

/// A `placeholder-files` domain of the `local` backend in a test's own temporary folder, added
/// and synced by the real CLI: its store folder (`store`, holding the files the test gave) and
/// its replica folder (`replica`) side by side. The setup the status suites share.
struct PlaceholderFilesDomain {
    let temp: TemporaryFolder
    let cli: CLIRunner
    /// The domain's name (`NAME:/path` on the command line).
    let name: String
    /// The store's folder, as the `local` backend's root.
    let store: String
    /// The replica folder.
    let replica: String

    /// Writes `files` (paths relative to the store, their folders made on the way) into a new
    /// store folder, makes the folders `folders` there too, adds the domain `name` over it and
    /// runs `sync NAME` with `syncArguments`. Records an issue, with the command's output, when
    /// `domain add` or `sync` fails.
    /// - Throws: when a folder or file cannot be made, or the binary cannot be run.
    init(
        _ name: String, files: [String: Data] = [:], folders: [String] = [], syncArguments: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        temp = try TemporaryFolder()
        self.name = name
        store = temp.url.appendingPathComponent("store").path
        replica = temp.url.appendingPathComponent("replica").path
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        for folder in folders {
            try FileManager.default.createDirectory(atPath: store + "/" + folder, withIntermediateDirectories: true)
        }
        for (path, contents) in files.sorted(by: { $0.key < $1.key }) { try temp.write("store/" + path, contents) }
        cli = CLIRunner(in: temp)
        try await cli.addLocalDomain(
            name, root: URL(fileURLWithPath: store), options: ["--replica", replica], sourceLocation: sourceLocation)
        let synced = try await cli.run(["sync", name] + syncArguments)
        #expect(synced.status == 0, "sync \(name): \(synced)", sourceLocation: sourceLocation)
    }
}
