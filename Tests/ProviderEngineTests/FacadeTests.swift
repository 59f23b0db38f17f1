import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// `DomainController` makes the parts an operation needs when it runs: sync up (the journal,
/// the uploader, conflicts, moves) only for a sync that uploads.
@Suite struct FacadeTests {
    @Test func onlyASyncThatUploadsMakesSyncUp() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: "d/a.txt", data: Data("a".utf8))
            try f.memory.write(path: "d/b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            let made = { controller.madeSyncUp.withLock { $0 != nil } }
            try await controller.sync(upload: false)
            #expect(!made(), "a sync that does not upload made sync up")
            #expect(await controller.materialize(paths: ["d/a.txt"], recursive: false).allSatisfy { $0.error == nil })
            #expect(await controller.evict(paths: ["d/a.txt"], recursive: false).allSatisfy { $0.error == nil })
            #expect(await controller.populate(paths: ["d"], recursive: true).allSatisfy { $0.error == nil })
            #expect(await controller.pin(paths: ["d/b.txt"]).allSatisfy { $0.error == nil })
            #expect(try controller.record(at: "d/b.txt").state == .materialized)
            #expect(!made(), "materialize, evict, populate or pin made sync up")
            try await controller.sync()
            #expect(made())
        }
    }
}
