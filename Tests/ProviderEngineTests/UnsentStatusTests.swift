import Foundation
import ProviderCore
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// `unsent` is written from what a file is when the status is written, not from the scan that
/// found it: a scan that saw a fill half done took the file for one still being written, and
/// the `unsent` it then wrote on the finished download moved its change time while `tar` read it
/// ("file changed as we read it").
@Suite struct UnsentStatusTests {
    static func changeTime(_ path: String) -> timespec {
        var info = stat()
        _ = lstat(path, &info)
        return info.st_ctim
    }

    @Test func aDownloadNobodyChangedKeepsItsStatusAndChangeTimeAnEditIsUnsent() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "a.txt", data: Data("hello".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(await controller.materialize(paths: ["a.txt"], recursive: false).first?.error == nil)
            let path = controller.replica.path("a.txt")
            let before = Self.changeTime(path)
            #expect(ReplicaStatus.read(atPath: path) == .downloaded)

            UnsentStatus.write(on: ["a.txt"], in: controller.replica, domain: controller.domain.name)
            let after = Self.changeTime(path)
            #expect(ReplicaStatus.read(atPath: path) == .downloaded)
            #expect(before.tv_sec == after.tv_sec && before.tv_nsec == after.tv_nsec, "the change time moved")

            // An edit in place breaks the download's mark: unsent.
            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(" world".utf8))
            try handle.close()
            UnsentStatus.write(on: ["a.txt"], in: controller.replica, domain: controller.domain.name)
            #expect(ReplicaStatus.read(atPath: path) == .unsent)
        }
    }

    @Test func aFileNotThereOrAFolderGetsNothing() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.createDirectory(at: controller.replica.url("folder"), withIntermediateDirectories: true)
            UnsentStatus.write(on: ["missing.txt", "folder"], in: controller.replica, domain: controller.domain.name)
            #expect(ReplicaStatus.read(atPath: controller.replica.path("folder")) == nil)
            #expect(!FileManager.default.fileExists(atPath: controller.replica.path("missing.txt")))
        }
    }
}
