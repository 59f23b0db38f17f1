import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// Sync down reads what is due for download from the database a page at a time
/// (``DomainContext/subtreePage`` records) and downloads each page before reading the next.
/// Here pages are 3 records and far more is due: outdated downloaded files, pinned
/// placeholders, placeholders below a pinned folder (and below a pinned folder inside it), and
/// files this sync itself finds changed, some of them also left due by the sync before.
@Suite("Due downloads in pages")
struct DueDownloadPagingTests {
    static let docs = (0..<7).map { "docs/d\($0).txt" }
    static let loose = (0..<4).map { "loose/l\($0).txt" }
    static let pinnedNew = (0..<5).map { "pinned/n\($0).txt" } + (0..<3).map { "pinned/sub/s\($0).txt" }
    static let fresh = (0..<2).map { "other/f\($0).txt" }

    @Test func everyDueFileIsDownloadedOnceAcrossPages() async throws {
        try await Fixture.with { f in
            for path in Self.docs + Self.loose + Self.fresh + ["pinned/old.txt", "pinned/sub/old.txt", "other/keep.txt"] {
                try f.memory.write(path: path, data: Data("old \(path)".utf8))
            }
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.pin(paths: ["pinned", "pinned/sub"])).allSatisfy { $0 == nil })
            let downloaded = await controller.materialize(paths: ["docs", "other"], recursive: true)
            #expect(downloaded.allSatisfy { $0.error == nil }, "\(downloaded.compactMap(\.message))")

            // Every download fails: the store's edits, the new pinned files and the pinned
            // loose files stay due in the database.
            f.memory.setFailure(FileProviderError(.localIOFailure, "disk hiccup"), for: .fetchContents)
            _ = await controller.pin(paths: Self.loose)
            for path in Self.docs + Self.pinnedNew { try f.memory.write(path: path, data: Data("new \(path)".utf8)) }
            let failed = try await controller.sync()
            #expect(failed.downloaded == 0)
            for path in Self.loose + Self.pinnedNew { #expect(try controller.record(at: path).state == .placeholder, "\(path)") }
            for path in Self.docs { #expect(try controller.record(at: path).isOutdated, "\(path)") }

            // Changed again, so this sync finds them itself (d0, d1 are also due from before),
            // and two files changed only now.
            for path in Self.docs.prefix(2) + Self.fresh { try f.memory.write(path: path, data: Data("newer \(path)".utf8)) }
            f.memory.setFailure(nil, for: .fetchContents)
            controller.subtreePage.withLock { $0 = 3 }
            let fetched = Mutex<[ItemIdentifier]>([])
            f.memory.setHook(for: .fetchContents) { identifier in
                if let identifier { fetched.withLock { $0.append(identifier) } }
            }
            let report = try await controller.sync()

            let due = Self.docs + Self.loose + Self.pinnedNew + Self.fresh
            #expect(report.notices.isEmpty, "\(report.notices)")
            #expect(report.downloaded == due.count)
            #expect(fetched.withLock { $0 }.map(\.rawValue).sorted() == due.sorted())
            for path in due {
                let record = try controller.record(at: path)
                #expect(record.state == .materialized && !record.isOutdated, "\(path)")
                let expected = Self.docs.prefix(2).contains(path) || Self.fresh.contains(path) ? "newer" : "new"
                let data = try Data(contentsOf: f.url(controller, path))
                #expect(data == Data("\(Self.loose.contains(path) ? "old" : expected) \(path)".utf8), "\(path)")
            }
            #expect(try await controller.sync().downloaded == 0)
        }
    }

    @Test func anEvictingPolicyEvictsInPagesInsteadOfDownloading() async throws {
        try await Fixture.with { f in
            for path in Self.docs + ["keep/k.txt"] { try f.memory.write(path: path, data: Data("old \(path)".utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            let downloaded = await controller.materialize(paths: ["docs", "keep"], recursive: true)
            #expect(downloaded.allSatisfy { $0.error == nil }, "\(downloaded.compactMap(\.message))")
            let set = await controller.setPolicy(.evictOnRemoteUpdate, paths: ["docs"])
            #expect(set.outcomes.allSatisfy { $0.error == nil })

            // The edits are recorded, their downloads fail: due from the database next time.
            f.memory.setFailure(FileProviderError(.localIOFailure, "disk hiccup"), for: .fetchContents)
            for path in Self.docs + ["keep/k.txt"] { try f.memory.write(path: path, data: Data("new \(path)".utf8)) }
            controller.subtreePage.withLock { $0 = 3 }
            let report = try await controller.sync()
            f.memory.setFailure(nil, for: .fetchContents)
            #expect(report.evictedOnUpdate == Self.docs.count, "\(report.notices)")
            for path in Self.docs { #expect(try controller.record(at: path).state == .placeholder, "\(path)") }
            #expect(try controller.record(at: "keep/k.txt").isOutdated)

            let next = try await controller.sync()
            #expect(next.downloaded == 1 && next.evictedOnUpdate == 0, "\(next.notices)")
            #expect(try Data(contentsOf: f.url(controller, "keep/k.txt")) == Data("new keep/k.txt".utf8))
        }
    }
}
