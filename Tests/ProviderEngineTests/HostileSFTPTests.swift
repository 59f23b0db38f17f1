import Foundation
import ProviderCore
import ProviderStore
import ProviderTesting
import SFTPAdapter
import Testing

@testable import ProviderEngine

/// The engine and the SFTP adapter against ``HostileSFTPServer`` (paramiko answering anything,
/// on 127.0.0.1): apart from the conformance suites, which run against a real sshd.
@Suite("Hostile SFTP server", .timeLimit(.minutes(5)))
struct HostileSFTPTests {
    /// Runs `body` with a domain `name` on a fresh hostile server, below its root path `root`.
    static func withDomain(
        _ name: String = "s", root: String = "/data", user: String = "hostile",
        _ body: (ProviderManager, DomainController) async throws -> Void
    ) async throws {
        try await HostileSFTPServer.withStarted { server in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-hostile-sftp-\(UUID().uuidString)")
                .resolvingSymlinksInPath()
            defer { try? FileManager.default.removeItem(at: folder) }
            let manager = try ProviderManager(
                home: folder.appendingPathComponent("home"), registry: BackendRegistry([SFTPBackend.descriptor]))
            do {
                try await manager.addDomain(name: name, kind: "sftp", options: server.options(root: root, user: user), replicaPath: nil)
                try await body(manager, try await manager.controller(for: name))
                await manager.close()
            } catch {
                await manager.close()
                throw error
            }
        }
    }

    @Test func impossibleSizesAreSkippedAndTheRestIsRecorded() async throws {
        try await Self.withDomain { manager, controller in
            let report = try await controller.sync()
            let skipped = report.notices.filter { $0.contains("skipped an item") }
            #expect(skipped.contains { $0.hasPrefix("s:/: skipped an item: \"huge.bin\": its size 18446744073709551615") }, "\(skipped)")
            #expect(skipped.contains { $0.hasPrefix("s:/: skipped an item: \"big.bin\": its size 9223372036854775808") }, "\(skipped)")
            #expect(report.notices.contains { $0.hasPrefix("s:/liar: not listed:") }, "\(report.notices)")
            let records = try manager.store.descendants(domainID: controller.domainID, of: "")
            #expect(records.allSatisfy { $0.size >= 0 && $0.size <= ItemBounds.maximumSize })
            let top = Set(records.filter { !$0.path.contains("/") }.map(\.path))
            #expect(top == ["epoch.txt", "good.txt", "late.txt", "liar", "long.bin", "loop", "short.bin"])
            // The absurd but possible dates are kept: 1970 and 2106.
            #expect(try controller.record(at: "epoch.txt").modificationDate == Date(timeIntervalSince1970: 0))
            #expect(try controller.record(at: "late.txt").modificationDate == Date(timeIntervalSince1970: 4_294_967_295))
        }
    }

    /// A listing that never ends stops at ``ItemBounds/maximumEntriesPerFolder`` instead of
    /// filling the memory: the folder is not listed, the sync says so and fails (it is the
    /// root), nothing is recorded.
    @Test func aListingThatNeverEndsStopsAtTheEntryLimit() async throws {
        try await Self.withDomain("e", root: "/endless") { manager, controller in
            let error = await #expect(throws: FileProviderError.self) { try await controller.sync() }
            #expect(error?.message.contains("lists more than 2000000 entries") == true, "\(error?.message ?? "")")
            let recorded = try manager.store.itemCount(domainID: controller.domainID)
            #expect(recorded <= 1)
        }
    }

    @Test func aFolderThatListsItselfEndsAtTheDepthLimit() async throws {
        try await Self.withDomain { manager, controller in
            let report = try await controller.sync()
            #expect(
                report.notices.contains { $0.contains("skipped an item: \"loop\" is 257 folders deep; the limit is 256") },
                "\(report.notices.suffix(3))")
            let depths = try manager.store.descendants(domainID: controller.domainID, of: "").map { $0.path.split(separator: "/").count }
            #expect(depths.max() == 256)
        }
    }

    /// What the issue saw: `materialize -R` after a size of 2^64−1 died of a precondition.
    @Test func materializingEverythingFailsOnlyTheLyingFiles() async throws {
        try await Self.withDomain { manager, controller in
            try await controller.sync()
            let outcomes = await controller.materialize(
                paths: ["good.txt", "epoch.txt", "late.txt", "short.bin", "long.bin"], recursive: false)
            let failed = Dictionary(uniqueKeysWithValues: outcomes.map { ($0.path, $0.error) })
            #expect(failed["s:/good.txt"] == .some(nil))
            #expect(failed["s:/epoch.txt"] == .some(nil))
            #expect(failed["s:/late.txt"] == .some(nil))
            #expect(failed["s:/short.bin"]??.code != nil, "announced 100 bytes, sent 40")
            #expect(try Data(contentsOf: controller.replica.url("good.txt")) == Data("hello".utf8))
            #expect(entry(at: controller.replica.url("short.bin")) == .none)
            // Every read answered with 20 bytes more than asked: only the 10 announced bytes
            // are taken, never the extra ones.
            #expect(failed["s:/long.bin"] == .some(nil))
            #expect(try Data(contentsOf: controller.replica.url("long.bin")) == Data(repeating: UInt8(ascii: "l"), count: 10))
            // Everything at once, the loop's 256 levels too: no trap, each item its outcome.
            let all = await controller.materialize(paths: [""], recursive: true)
            #expect(all.filter { $0.error != nil }.map(\.path) == ["s:/short.bin"], "\(all.filter { $0.error != nil })")
            #expect(all.count >= 255, "the 255 leaf.txt of the loop and short.bin")
        }
    }

    /// A fill in place (a program's read of a dataless file) over a connection the server
    /// resets mid-body (`reset.bin`: 1 MiB, reset past its first 256 KiB; through libssh2, and
    /// over the client's own channel as `limits`): the fill fails, and the file is left as it
    /// was: dataless, of the item's size, what was written given back, no download mark,
    /// nothing staged, not recorded. The next fill asks the store again.
    @Test(arguments: ["hostile", "limits"])
    func aFillCutMidBodyLeavesTheFileDataless(user: String) async throws {
        try await Self.withDomain(user: user) { manager, controller in
            try await controller.sync()
            // Not listed (a sync would trip over it): its record made from the store's item.
            let item = try await controller.backend.item(for: ItemIdentifier("reset.bin"))
            let record = ItemRecord(domainID: controller.domainID, item: item, path: "reset.bin")
            let folder = try DatalessLayoutTests.Folder()
            let replica = folder.replica
            let domain = controller.context
            let context = DomainContext(
                domain: domain.domain, domainID: domain.domainID, backend: domain.backend, replica: replica, store: domain.store,
                executor: domain.executor, newDatalessFolders: domain.newDatalessFolders, logger: domain.logger)
            let downloader = Downloader(context: context, depth: 2, space: manager.spaceReservations)
            try replica.createPlaceholder(record.path, PlaceholderMetadata(domain: "s", record: record))
            let path = replica.path("reset.bin")
            for attempt in 1...2 {
                let error = await #expect(throws: FileProviderError.self) { _ = try await downloader.fillInPlace(record) }
                #expect(error?.code == .serverUnreachable, "attempt \(attempt): \(String(describing: error))")
                #expect(replica.placeholderExists("reset.bin"), "still dataless")
                let print = try #require(replica.fingerprint(atPath: path))
                #expect(print.size == 1 << 20)
                var info = stat()
                #expect(lstat(path, &info) == 0 && info.st_blocks <= 8, "the bytes written were given back")
                #expect(DownloadMark.recognize(record, print, in: context.replica) == nil)
                #expect(try FileManager.default.contentsOfDirectory(atPath: replica.staging.path) == [])
                #expect(try manager.store.item(domainID: controller.domainID, identifier: record.identifier)?.state != .materialized)
            }
        }
    }
}
