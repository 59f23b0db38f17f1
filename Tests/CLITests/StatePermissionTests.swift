import Foundation
import ProviderStore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The state folder and the database name every path of every domain: only their owner may read
/// them. Replica folders are the user's files and keep the user's umask.
@Suite struct StatePermissionTests {
    /// The permission bits of a file or folder, or `nil` when it does not exist.
    func mode(_ url: URL) -> mode_t? {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    /// The files and folders of the state folder that must be private, with their mode.
    func privateModes(_ home: URL) -> [String: mode_t?] {
        var modes: [String: mode_t?] = [".": mode(home)]
        for folder in ["locks", "locks/sync", "staging", "signals"] { modes[folder] = mode(home.appendingPathComponent(folder)) }
        for file in ["metadata.sqlite", "metadata.sqlite-wal", "metadata.sqlite-shm", "metadata.sqlite.lock"] {
            modes[file] = mode(home.appendingPathComponent(file))
        }
        return modes
    }

    let expected: [String: mode_t?] = [
        ".": 0o700, "locks": 0o700, "locks/sync": 0o700, "staging": 0o700, "signals": 0o700,
        "metadata.sqlite": 0o600, "metadata.sqlite-wal": 0o600, "metadata.sqlite-shm": 0o600, "metadata.sqlite.lock": 0o600,
    ]

    @Test func theStateFolderAndTheDatabaseAreReadableOnlyByTheirOwner() async throws {
        let temp = try TemporaryFolder()
        let home = temp.url.appendingPathComponent("home")
        let cli = CLIRunner(home: home)
        try temp.write("src/a.txt", Data("a".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), sync: true)

        // The -wal and -shm files exist while the database is open (here, in this process).
        let database = try MetadataStore(url: home.appendingPathComponent("metadata.sqlite"))
        #expect(try database.domain(named: "d") != nil)
        #expect(privateModes(home) == expected)
        // The replica keeps the user's umask.
        let mask = umask(0o022)
        umask(mask)
        #expect(mode(home.appendingPathComponent("domains/d")) == 0o777 & ~mask)
        // The domain's own staging folder in it too.
        #expect(staging(home).lastPathComponent != "staging")
        #expect(mode(staging(home)) == 0o700)
    }

    @Test func aStateFolderOfAnOlderVersionIsTightenedWhenOpened() async throws {
        let temp = try TemporaryFolder()
        let home = temp.url.appendingPathComponent("home")
        let cli = CLIRunner(home: home)
        try temp.write("src/a.txt", Data("a".utf8))
        try await cli.addLocalDomain("d", root: temp.url.appendingPathComponent("src"), sync: true)
        let database = try MetadataStore(url: home.appendingPathComponent("metadata.sqlite"))
        #expect(try database.domain(named: "d") != nil)
        // As an older version left them: readable to everyone.
        for (relative, mode) in expected {
            let url = relative == "." ? home : home.appendingPathComponent(relative)
            #expect(chmod(url.path, mode == 0o700 ? 0o755 : 0o644) == 0, "\(relative)")
        }
        let listed = try await cli.run(["domain", "list"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(privateModes(home) == expected)
        // A folder of it removed meanwhile is made again, private.
        try FileManager.default.removeItem(at: home.appendingPathComponent("signals"))
        #expect(try await cli.run(["signal", "d"]).status == 0)
        #expect(mode(home.appendingPathComponent("signals")) == 0o700)
    }

    /// The domain's staging folder below the state folder.
    func staging(_ home: URL) -> URL {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: home.appendingPathComponent("staging").path)) ?? []
        return home.appendingPathComponent("staging/" + (folders.first ?? ""))
    }
}
