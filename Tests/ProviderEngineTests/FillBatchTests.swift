import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// ``Downloader/fillInPlace(batch:)``: the folder read-ahead's batch fills dataless files where
/// they stand (the inode a program may have open gets the bytes), records them in one
/// transaction, and leaves every file it cannot fill as it was.
@Suite struct FillBatchTests {
    func blocks(_ path: String) -> Int {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_blocks) : -1
    }

    @Test func aBatchFillsTheDatalessFilesInPlaceAndLeavesOthersAlone() async throws {
        try await Fixture.with { f in
            var contents: [String: Data] = [:]
            for index in 0..<6 { contents["f\(index).bin"] = bytes(1000 + index * 4099, seed: UInt64(index + 1)) }
            let files = try await DatalessLayoutTests.DatalessFiles(f, contents.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
            let (controller, replica, downloader, records) = (files.controller, files.replica, files.downloader, files.records)
            // f4.bin: a program's own file stands at the name (not dataless); f5.bin: partly
            // present (progressive hydration): neither is touched.
            try Data("mine".utf8).write(to: replica.url("f4.bin"), options: .atomic)
            let partial = records[5]
            try f.manager.store.addPresentRange(
                0..<100, domainID: controller.domainID, identifier: partial.identifier, contentVersion: partial.contentVersion)
            let inode = try #require(replica.fingerprint(atPath: replica.path("f0.bin"))).inode
            let reader = try CloseOnExecFile.reading(replica.url("f0.bin"))
            defer { try? reader.close() }

            let results = await downloader.fillInPlace(batch: records)
            #expect(results.count == records.count)
            let noted = replica.noting(downloadsOf: controller.domainID, in: f.manager.store)
            for (record, result) in zip(records.prefix(4), results.prefix(4)) {
                let filled = try result.get()
                #expect(filled.state == .materialized, "\(record.path)")
                #expect(try Data(contentsOf: replica.url(record.path)) == contents[record.path], "\(record.path)")
                #expect(!replica.placeholderExists(record.path), "\(record.path) is still marked dataless")
                let print = try #require(replica.fingerprint(atPath: replica.path(record.path)))
                // Noted as the engine's download in the database, not marked on the file (a mark
                // kept the attribute block the dataless mark and it needed together).
                #expect(DownloadMark.recognize(record, print, in: noted) != nil, "\(record.path)")
                #expect(DownloadMark.read(atPath: replica.path(record.path)) == nil, "\(record.path)")
                #expect(try controller.record(at: record.path).state == .materialized, "\(record.path) is not recorded")
            }
            #expect(try reader.readToEnd() == contents["f0.bin"], "the descriptor opened before reads the contents")
            #expect(replica.fingerprint(atPath: replica.path("f0.bin"))?.inode == inode)
            #expect(throws: FileProviderError.self) { try results[4].get() }
            #expect(try Data(contentsOf: replica.url("f4.bin")) == Data("mine".utf8))
            #expect(throws: FileProviderError.self) { try results[5].get() }
            #expect(replica.placeholderExists("f5.bin"))
            #expect(try controller.record(at: "f5.bin").state == .placeholder)
        }
    }

    @Test func aStoreThatFailsLeavesEveryFileDatalessAndUnrecorded() async throws {
        try await Fixture.with { f in
            let files = try await DatalessLayoutTests.DatalessFiles(
                f, (0..<3).map { ("g\($0).bin", bytes(5000, seed: UInt64($0 + 20))) })
            let (controller, replica, downloader, records) = (files.controller, files.replica, files.downloader, files.records)
            f.memory.setFailure(FileProviderError(.serverUnreachable, "down"), for: .fetchContents)
            let results = await downloader.fillInPlace(batch: records)
            for (record, result) in zip(records, results) {
                #expect(throws: FileProviderError.self) { try result.get() }
                #expect(replica.placeholderExists(record.path), "\(record.path) is no longer dataless")
                #expect(replica.fingerprint(atPath: replica.path(record.path))?.size == 5000)
                #expect(blocks(replica.path(record.path)) <= 8)
                #expect(try controller.record(at: record.path).state == .placeholder)
            }
            // The next batch, with the store back, fills them.
            f.memory.setFailure(nil, for: .fetchContents)
            let again = await downloader.fillInPlace(batch: records)
            #expect(again.allSatisfy { (try? $0.get()) != nil })
        }
    }
}
