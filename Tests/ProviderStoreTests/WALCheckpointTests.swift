import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderStore

/// The write-ahead log goes back into the database file on the checkpoint thread
/// (`WALCheckpointer`), not in the writer's commits, and it stays bounded.
@Suite struct WALCheckpointTests {
    static func size(_ url: URL) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size]) as? NSNumber)?.int64Value ?? 0
    }

    @Test func theLogIsCopiedIntoTheDatabaseWhileTheWriterGoesOn() async throws {
        let folder = try TemporaryFolder("wal")
        defer { folder.remove() }
        let url = folder.path("metadata.sqlite")
        let store = try MetadataStore(url: url)
        let id = try makeDomain(store)
        let empty = Self.size(url)
        // About 15 MiB of log: past the 4 MiB from which a commit asks for a checkpoint, short
        // of the 64 MiB from which the writer would checkpoint itself.
        for batch in 0..<40 {
            let records = (0..<1_000).map { index in
                record(id, "folder\(batch)/a-longer-file-name-for-more-bytes-\(index).bin", size: 4096)
            }
            try store.insertNew(domainID: id, records: records)
        }
        let log = URL(fileURLWithPath: url.path + "-wal")
        // Without a checkpoint the rows would be in the log only and the database file as it was.
        #expect(await eventually { Self.size(url) > empty + 4 << 20 }, "nothing was checkpointed into \(url.path)")
        #expect(Self.size(log) < Int64(WALCheckpointer.inlinePages + 2_000) * 4096)
        #expect(try store.itemCount(domainID: id) == 40_000)
        #expect(try store.integrityCheck() == "ok")
    }
}
