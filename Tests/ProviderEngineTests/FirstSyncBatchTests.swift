import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// A domain's first sync of more items than one batch of the database writer
/// (`PullPass.batchSize`, `PullPass.backlog`): the walk gathers and sorts a batch while the
/// one before is written. Every item is recorded once with its own values, counted once, and
/// every folder's digest is kept, so the next sync finds the store unchanged.
@Suite struct FirstSyncBatchTests {
    @Test func aFirstSyncOfManyBatchesRecordsEveryItemOnce() async throws {
        // 12 folders of 1,000 files: 12,012 items, a dozen batches of 1,024 or more.
        let folders = 12
        let files = 1_000
        let total = folders * (files + 1)
        try await Fixture.with(memory: MemoryBackend(hasChangeFeed: false, pageSize: 500)) { f in
            var sizes: [String: Int64] = [:]
            for folder in 0..<folders {
                for file in 0..<files {
                    // Sizes that differ from file to file: a row written with another's values shows.
                    let path = "f\(folder)/n\(file).txt"
                    let data = Data(count: folder * files + file)
                    _ = try f.memory.write(path: path, data: data)
                    sizes[path] = Int64(data.count)
                }
            }
            let controller = try await f.addDomain()
            let first = try await controller.sync()
            #expect(first.added == total && first.listedItems == total, "\(first)")
            let store = controller.store
            #expect(try store.itemCount(domainID: controller.domainID) == total + 1, "the root and every item, counted once")
            let rows = try store.descendants(domainID: controller.domainID, of: "")
            #expect(rows.count == total)
            #expect(Set(rows.map(\.path)).count == total)
            let fileRows = rows.filter { $0.kind == .file }
            #expect(fileRows.count == folders * files)
            let wrong = fileRows.filter { sizes[$0.path] != $0.size }.map(\.path)
            #expect(wrong.isEmpty, "rows with another item's size: \(wrong.prefix(5))")
            let again = try await controller.sync()
            #expect(again.added == 0 && again.updated == 0 && again.deleted == 0, "\(again)")
            #expect(again.unchangedFolders == folders + 1, "every folder's digest was kept: \(again)")
        }
    }
}
