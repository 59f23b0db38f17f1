import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// Recursive evict, online-only and populate read a subtree from the database in pages
/// (``DomainController/subtreePage`` records at a time), so their memory does not grow with
/// the subtree. Here pages are 3 records; items beside the subtree that sort around it ("-"
/// and "." come before "/") must be left alone, and no item below it skipped or done twice.
@Suite("Recursive evict, policy and populate in pages")
struct SubtreePagingTests {
    static let inside = [
        "a/f0", "a/f1", "a/x/g0", "a/x/g1", "a/x/g2", "a/x/deep/h0", "a/x/deep/h1", "a/y/i0", "a/y/empty/.keep", "a/z",
    ]
    static let outside = ["a-b/j", "a.c/k", "b/l"]

    /// A domain with every file downloaded, read in pages of 3.
    private func materialized(_ f: Fixture) async throws -> DomainController {
        for path in Self.inside + Self.outside { try f.memory.write(path: path, data: Data("\(path)\n".utf8)) }
        let controller = try await f.addDomain()
        try await controller.sync()
        let all = await controller.materialize(paths: ["a", "a-b", "a.c", "b"], recursive: true)
        #expect(all.allSatisfy { $0.error == nil }, "\(all.compactMap(\.message))")
        controller.subtreePage.withLock { $0 = 3 }
        return controller
    }

    @Test func pagesGiveEveryItemOfTheSubtreeOnceInPathOrder() async throws {
        try await Fixture.with { f in
            for path in Self.inside + Self.outside { try f.memory.write(path: path, data: Data("\(path)\n".utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync()
            let every = try controller.list(at: "a", recursive: true).map(\.path)
            for size in [1, 2, 3, 100] {
                controller.subtreePage.withLock { $0 = size }
                var read: [String] = []
                try await controller.reader.forEachSubtreePage(below: "a") { page in
                    read += page.map(\.path)
                    return true
                }
                #expect(read == every, "pages of \(size)")
            }
            #expect(Set(every).isSuperset(of: Self.inside) && every.allSatisfy { $0.hasPrefix("a/") })
        }
    }

    @Test func recursiveEvictTakesEveryFileOfTheSubtreeOnce() async throws {
        try await Fixture.with { f in
            let controller = try await materialized(f)
            let outcomes = await controller.evict(paths: ["a"], recursive: true)
            #expect(outcomes.map(\.path).sorted() == Self.inside.map { "mem:/" + $0 }.sorted())
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.message))")
            for path in Self.inside { #expect(try controller.record(at: path).state == .placeholder, "\(path)") }
            for path in Self.outside { #expect(try controller.record(at: path).state == .materialized, "\(path)") }
        }
    }

    @Test func onlineOnlyEvictsEveryFileOfTheSubtreeOnce() async throws {
        try await Fixture.with { f in
            let controller = try await materialized(f)
            let result = await controller.setPolicy(.onlineOnly, paths: ["a"])
            #expect(result.outcomes.map(\.path).sorted() == Self.inside.map { "mem:/" + $0 }.sorted())
            #expect(result.outcomes.allSatisfy { $0.error == nil }, "\(result.outcomes.compactMap(\.message))")
            for path in Self.inside { #expect(try controller.record(at: path).state == .placeholder, "\(path)") }
            for path in Self.outside { #expect(try controller.record(at: path).state == .materialized, "\(path)") }
        }
    }

    @Test func recursivePopulateShowsEveryFolderOfTheSubtree() async throws {
        try await Fixture.with { f in
            for path in Self.inside + Self.outside { try f.memory.write(path: path, data: Data("\(path)\n".utf8)) }
            let controller = try await f.addDomain()
            try await controller.sync(populationBudget: 0)
            controller.subtreePage.withLock { $0 = 3 }
            let outcomes = await controller.populate(paths: ["a"], recursive: true)
            #expect(outcomes.map(\.path) == ["mem:/a"])
            #expect(outcomes.allSatisfy { $0.error == nil }, "\(outcomes.compactMap(\.message))")
            for folder in ["a", "a/x", "a/x/deep", "a/y", "a/y/empty"] {
                #expect(try controller.record(at: folder).isDataless == false, "\(folder)")
            }
            for folder in ["a-b", "a.c", "b"] { #expect(try controller.record(at: folder).isDataless, "\(folder)") }
            let shown = Set(tree(at: controller.replica.url("a")))
            for path in Self.inside { #expect(shown.contains(String(path.dropFirst(2)) + ".placeholder"), "\(path) in \(shown)") }
        }
    }
}
