import ArgumentParser
import ProviderStore

struct VersionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Show the commit this program was built from and the versions of the libraries it uses.",
        discussion: """
            The commit is recorded when the program is built ('-dirty' when the checkout had \
            changes, 'unknown' when it was built outside a git checkout). The libraries' \
            versions are those of the libraries loaded now, as they report them: libssh2 \
            (sftp), libcurl and its TLS library (media), SQLite (the metadata database). \
            'fileproviderctl --version' (or -V) prints the first line only.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    /// `fileproviderctl 8aefee3c2a1b`: what `--version` prints.
    static var versionLine: String { "fileproviderctl \(buildCommit)" }

    /// Every library's version by name: the backends' (``ProviderCore/BackendDescriptor/libraryVersions``)
    /// and SQLite's.
    static func libraries() -> [String: String] {
        var result = ["SQLite": MetadataStore.sqliteVersion]
        for descriptor in AdapterList.descriptors {
            result.merge(descriptor.libraryVersions()) { first, _ in first }
        }
        return result
    }

    func run() async throws {
        let libraries = Self.libraries()
        if output.json {
            try Output.json(VersionJSON(commit: buildCommit, libraries: libraries))
            return
        }
        var text = Self.versionLine + "\n"
        for (name, version) in libraries.sorted(by: { $0.key.lowercased() < $1.key.lowercased() }) {
            text += "\(name) \(version)\n"
        }
        Output.write(text)
    }
}

/// `fileproviderctl version --json`.
struct VersionJSON: Encodable {
    /// The commit (12 hex digits, `-dirty` when the checkout had changes) or `unknown`.
    var commit: String
    /// Library name (`libssh2`, `libcurl`, `SQLite`) to version.
    var libraries: [String: String]
}
