import Foundation
import ProviderCore
import ProviderEngine
import ProviderService
import ProviderStore
import ProviderSystem
import ProviderTesting
import Testing

/// Domain backoff (Apple's reaction to serverUnreachable and friends), `serve` at the engine
/// level, and `ProviderManager.explain`.
@Suite struct BackoffAndServeTests {
    @Test func policyIsExponentialCappedAndJittered() {
        let policy = BackoffPolicy.standard
        #expect(policy.delay(afterFailures: 1, random: 0) == 5)
        #expect(policy.delay(afterFailures: 2, random: 0) == 10)
        #expect(policy.delay(afterFailures: 3, random: 0) == 20)
        #expect(abs(policy.delay(afterFailures: 3, random: 0.999_999) - 24) < 0.001)
        #expect(policy.delay(afterFailures: 7, random: 0) == 300)
        #expect(policy.delay(afterFailures: 1000, random: 0.5) == 300)
        // Jitter never makes a wait shorter than the plain exponential one.
        for failures in 1...6 {
            let delay = policy.delay(afterFailures: failures)
            #expect(delay >= min(300, 5 * pow(2, Double(failures - 1))) && delay <= 300)
        }
    }

    @Test func unreachableStoreBacksTheDomainOffAndSuccessResets() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(try controller.backoff() == nil)

            f.remote.failListing(of: .rootContainer, with: FileProviderError(.serverUnreachable, "connection refused"))
            var previous: Date?
            for attempt in 1...3 {
                let before = Date()
                await expectCode(.serverUnreachable) { try await controller.sync() }
                let after = Date()
                let backoff = try #require(try controller.backoff())
                #expect(backoff.failureCount == attempt)
                #expect(backoff.error == "connection refused")
                let plain = 5 * pow(2, Double(attempt - 1))
                #expect(backoff.nextRetryAt >= before.addingTimeInterval(plain - 0.001), "after \(attempt) failures")
                #expect(backoff.nextRetryAt <= after.addingTimeInterval(plain * 1.2 + 0.001), "after \(attempt) failures")
                if let previous { #expect(backoff.nextRetryAt > previous) }
                previous = backoff.nextRetryAt
                #expect(backoff.isWaiting())
            }
            let record = try f.manager.domain(named: "mem")
            #expect(record.failureCount == 3 && record.lastError == "connection refused")

            f.remote.failListing(of: .rootContainer, with: nil)
            try await controller.sync()
            #expect(try controller.backoff() == nil)
            let reset = try f.manager.domain(named: "mem")
            #expect(reset.failureCount == 0 && reset.nextRetryAt == nil && reset.lastError == nil && reset.lastSyncAt != nil)
        }
    }

    @Test func otherDomainFailuresDoNotBackOff() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            f.remote.failListing(of: .rootContainer, with: FileProviderError(.permissionDenied, "no entry"))
            await expectCode(.permissionDenied) { try await controller.sync() }
            let record = try f.manager.domain(named: "mem")
            #expect(record.lastError == "no entry")
            #expect(record.failureCount == 0 && record.nextRetryAt == nil)
            #expect(try controller.backoff() == nil)
        }
    }

    @Test func uploadsThatCannotReachTheStoreBackOffToo() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            try await controller.sync()
            try Data("new".utf8).write(to: f.url(controller, "new.txt"))
            f.memory.setFailure(FileProviderError(.notAuthenticated, "the key was refused"), for: .createItem)
            await expectCode(.notAuthenticated) { try await controller.sync() }
            #expect(try controller.backoff()?.failureCount == 1)
            // The operation stays in the journal, and `why` says so: `failed`, since the store
            // refused it (nothing was done, so the next attempt is sent afresh, not replayed).
            let explanation = try f.manager.explain(ItemLocation(domain: "mem", path: "new.txt"))
            #expect(!explanation.known && explanation.localChange == "created")
            #expect(explanation.operations.map(\.operation) == ["create"])
            #expect(explanation.operations.first?.state == "failed")
            #expect(explanation.operations.first?.attempts == 1)
            #expect(explanation.operations.first?.lastError == "the key was refused")
            #expect(explanation.backoff?.failureCount == 1)
            #expect(explanation.reasons.contains { $0.hasPrefix("the domain is backing off until") })

            f.memory.setFailure(nil, for: .createItem)
            try await controller.sync()
            #expect(f.memory.contents(of: "new.txt") == Data("new".utf8))
            #expect(try controller.backoff() == nil)
            let after = try f.manager.explain(ItemLocation(domain: "mem", path: "new.txt"))
            #expect(after.known && after.operations.isEmpty && after.localChange == nil && after.backoff == nil)
        }
    }

    @Test func explainsPinsAndFailedOperations() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "docs/a.txt", data: Data("one".utf8))
            _ = try f.memory.write(path: "docs/b.txt", data: Data("b".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            #expect(codes(await controller.pin(paths: ["docs"])) == [nil, nil])
            let pinned = try f.manager.explain(ItemLocation(domain: "mem", path: "docs/a.txt"))
            #expect(pinned.state == "materialized" && pinned.pinned && pinned.pinnedBy == "/docs")
            #expect(pinned.policy == "eager" && pinned.policySetOn == "/docs")
            #expect(pinned.reasons.contains { $0.hasPrefix("eager through mem:/docs: pinned") })

            // An operation the store refused is kept with its error (sent afresh next time).
            try Data("edited locally".utf8).write(to: f.url(controller, "docs/a.txt"))
            f.memory.setFailure(FileProviderError(.permissionDenied, "read-only share"), for: .modifyItem, times: 1)
            let report = try await controller.sync()
            #expect(report.notices.contains { $0.contains("read-only share") })
            let failed = try f.manager.explain(ItemLocation(domain: "mem", path: "docs/a.txt"))
            #expect(failed.operations.first?.state == "failed")
            #expect(failed.operations.first?.lastError == "read-only share")
            #expect(failed.lastError == "read-only share")
            #expect(failed.localChange == "edited")

            await expectCode(.noSuchItem) { try f.manager.explain(ItemLocation(domain: "mem", path: "nothing/here")) }
        }
    }

    @Test func serveSyncsLocalChangesAndResumesAfterBackingOff() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("a".utf8))
            try await f.addDomain()
            // A second manager on the same home, as a separate serve process would have, with
            // short backoff times.
            let manager = try ProviderManager(
                home: f.home, registry: TestRemote.registry, backoffPolicy: BackoffPolicy(base: 0.05, cap: 0.2, jitter: 0))
            let server = quietServer(manager, "mem", ServeOptions(pollInterval: 3600, settleSeconds: 0, debounceSeconds: 0.05))
            let running = Task { try await server.run() }

            #expect(try await eventually { try manager.domain(named: "mem").lastSyncAt != nil })
            let replica = URL(fileURLWithPath: try manager.domain(named: "mem").replicaPath)
            #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("a.txt.placeholder").path))
            // Another serve may not run the same domain.
            #expect(DomainLock.holder(home: f.home, domain: "mem") == getpid())
            #expect(throws: FileProviderError.self) { try DomainLock.acquire(home: f.home, domain: "mem") }

            // A local file reaches the store through inotify (no poll is due for an hour).
            try FileManager.default.createDirectory(at: replica.appendingPathComponent("sub"), withIntermediateDirectories: true)
            try Data("local".utf8).write(to: replica.appendingPathComponent("sub/local.txt"))
            #expect(await eventually { f.memory.contents(of: "sub/local.txt") == Data("local".utf8) })

            // The store goes away: serve backs off and retries by itself; when it is back, the
            // domain recovers without a signal.
            f.remote.failListing(of: .rootContainer, with: FileProviderError(.serverUnreachable, "down"))
            _ = try manager.signalServe(domain: "mem")
            #expect(try await eventually { try manager.domain(named: "mem").failureCount >= 3 })
            f.remote.failListing(of: .rootContainer, with: nil)
            #expect(try await eventually { try manager.domain(named: "mem").failureCount == 0 })
            #expect(try manager.domain(named: "mem").lastError == nil)

            // A remote change comes down after a signal.
            _ = try f.memory.write(path: "remote.txt", data: Data("remote".utf8))
            _ = try manager.signalServe(domain: "mem")
            #expect(
                await eventually { FileManager.default.fileExists(atPath: replica.appendingPathComponent("remote.txt.placeholder").path) })

            server.stop()
            try await running.value
            #expect(DomainLock.holder(home: f.home, domain: "mem") == nil)
            #expect(try manager.store.integrityCheck() == "ok")
            await manager.close()
        }
    }

    /// A serve with nothing to do does not sync: its own scans open the replica's folders, and
    /// those opens wake nothing. (They did: every sync woke the next one, several a second.)
    @Test func anIdleServeSyncsOnlyWhenToldOrChanged() async throws {
        try await Fixture.with { f in
            // A file in the root only: a folder the first sync makes is a change serve sees
            // (one sync more, which finds nothing).
            _ = try f.memory.write(path: "a.txt", data: Data("a".utf8))
            try await f.addDomain()
            // No debounce: a wake-up would start a sync at once.
            let server = quietServer(f.manager, "mem", ServeOptions(pollInterval: 3600, settleSeconds: 0, debounceSeconds: 0))
            let running = Task { try await server.run() }
            #expect(await eventually { server.completedSyncs >= 1 })
            let replica = URL(fileURLWithPath: try f.manager.domain(named: "mem").replicaPath)
            for round in 1...3 {
                _ = try f.memory.write(path: "r\(round).txt", data: Data("r".utf8))
                _ = try f.manager.signalServe(domain: "mem")
                #expect(
                    await eventually {
                        FileManager.default.fileExists(atPath: replica.appendingPathComponent("r\(round).txt.placeholder").path)
                    })
                #expect(await eventually { server.completedSyncs >= 1 + round })
            }
            // The first sync and one per signal, nothing more.
            #expect(server.completedSyncs == 4)
            server.stop()
            try await running.value
        }
    }
}
