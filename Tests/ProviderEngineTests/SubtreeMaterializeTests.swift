import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// `materialize -R` reads a subtree from the database in pages (``DomainController/subtreePage``
/// records at a time), so its memory does not grow with the subtree. Here pages are 3 records.
@Suite("Recursive materialize in pages")
struct SubtreeMaterializeTests {
    // The subtree of the paging tests, and names that sort beside "a/" without being in it.
    static let inside = SubtreePagingTests.inside
    static let outside = SubtreePagingTests.outside

    @Test func everyFileOfTheSubtreeIsDownloadedAndEveryFolderShownWithoutPlaceholders() async throws {
        try await Fixture.with { f in
            for path in Self.inside + Self.outside { try f.memory.write(path: path, data: Data("\(path)\n".utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            controller.subtreePage.withLock { $0 = 3 }
            let last = LockedValue<(Int, Int)>((0, 0))
            let outcomes = await controller.materialize(paths: ["a"], recursive: true) { event in
                if case .transfer(_, _, let done, let total, _) = event { last.set((done, total)) }
            }
            #expect(Set(outcomes.map(\.path)) == Set(Self.inside.map { "mem:/" + $0 }))
            #expect(outcomes.count == Self.inside.count, "each file once: \(outcomes.map(\.path))")
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.message))")
            for path in Self.inside {
                #expect(try controller.record(at: path).state == .materialized, "\(path)")
                #expect(FileManager.default.contents(atPath: controller.replica.url(path).path) == Data("\(path)\n".utf8))
            }
            for path in Self.outside { #expect(try controller.record(at: path).state == .placeholder, "\(path)") }
            // Every folder below "a" is populated: no placeholder written only to be replaced,
            // and none left.
            let shown = tree(at: controller.replica.url("a"))
            #expect(!shown.contains { $0.hasSuffix(".placeholder") }, "\(shown)")
            for folder in ["a/x", "a/x/deep", "a/y", "a/y/empty"] {
                #expect(try controller.record(at: folder).isDataless == false, "\(folder)")
            }
            // Progress counts the whole subtree, not one page.
            #expect(last.get() == (Self.inside.count, Self.inside.count))
            // Nothing left to do: a second run downloads nothing again.
            let again = await controller.materialize(paths: ["a"], recursive: true)
            #expect(again.allSatisfy { $0.error == nil })
            #expect(f.memory.callCount(.fetchContents) == Self.inside.count)
        }
    }
}
