import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Executables of a `dataless` domain, never downloaded, run through the replica path while
/// `serve` runs: the dataless file has the store's executable bit, and an exec waits for the
/// real contents like any access.
@Suite("executables never downloaded", .serialized, .timeLimit(.minutes(5)))
struct OnAccessModeTests {
    @Test(arguments: [ServedDomain.Store.local, .sftp])
    func aScriptAndAnELFRunFromTheReplicaPath(_ kind: ServedDomain.Store) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        let elf = try #require(FileManager.default.contents(atPath: "/bin/true"))
        let files = [
            "bin/run.sh": Data("#!/bin/sh\necho ran \"$@\"\n".utf8), "bin/true": elf, "bin/notes.txt": Data("not a program\n".utf8),
        ]
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: files)
        // Made executable in the store after the first sync: a metadata change the next sync
        // gives the dataless files.
        for name in ["bin/run.sh", "bin/true"] { #expect(chmod(store.folder + "/" + name, 0o755) == 0) }
        let synced = try await domain.cli.run(["sync", domain.name])
        #expect(synced.status == 0, "\(synced)")
        try await domain.startServe()

        for name in ["bin/run.sh", "bin/true"] {
            #expect(fileStatus(domain.replica + "/" + name).map { $0.st_mode & 0o777 } == 0o755, "\(name)")
        }
        #expect(fileStatus(domain.replica + "/bin/notes.txt").map { $0.st_mode & 0o777 } == 0o644)
        let script = try await runProgram([domain.replica + "/bin/run.sh", "here"])
        #expect(script.succeeded, "\(script)")
        #expect(String(decoding: script.output, as: UTF8.self) == "ran here\n")
        let binary = try await runProgram([domain.replica + "/bin/true"])
        #expect(binary.succeeded, "\(binary)")
        let plain = try await runProgram([domain.replica + "/bin/notes.txt"])
        #expect(plain.status == 126, "\(plain)")
        try await domain.stopServe()
        await store.stop()
    }
}
