import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A sync records new versions, then downloads. When it ends in between (killed, or the
/// downloads fail), the next sync still owes the replica those downloads.
@Suite struct DueDownloadTests {
    @Test func downloadsASyncLeftUndoneAreDoneByTheNextSync() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "pinned/a.txt", data: Data("a".utf8))
            _ = try f.memory.write(path: "doc.txt", data: Data("one".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.pin(paths: ["pinned"])) == [nil])
            #expect(codes(await controller.materialize(paths: ["doc.txt"], recursive: false)) == [nil])

            // New file below the pinned folder, an edit of a downloaded file; every download of
            // this sync fails.
            _ = try f.memory.write(path: "pinned/new.txt", data: Data("new".utf8))
            _ = try f.memory.write(path: "doc.txt", data: Data("two!".utf8))
            f.memory.setFailure(FileProviderError(.localIOFailure, "disk hiccup"), for: .fetchContents)
            let failed = try await controller.sync()
            #expect(failed.downloaded == 0 && failed.notices.count == 2, "\(failed.notices)")
            #expect(try controller.record(at: "pinned/new.txt").state == .placeholder)
            #expect(try controller.record(at: "doc.txt").isOutdated)

            // Nothing changed in the store since: the next sync still downloads both.
            f.memory.setFailure(nil, for: .fetchContents)
            let report = try await controller.sync()
            #expect(report.downloaded == 2, "\(report.notices)")
            #expect(try Data(contentsOf: f.url(controller, "pinned/new.txt")) == Data("new".utf8))
            #expect(try Data(contentsOf: f.url(controller, "doc.txt")) == Data("two!".utf8))
            #expect(!FileManager.default.fileExists(atPath: f.placeholderURL(controller, "pinned/new.txt").path))
            #expect(try !controller.record(at: "doc.txt").isOutdated)
            #expect(try await controller.sync().downloaded == 0)
        }
    }
}
