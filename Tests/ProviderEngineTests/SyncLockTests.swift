import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderService
import ProviderStore
import ProviderSystem
import ProviderTesting
import Testing

/// A serve of one domain that logs only critical lines (tests check state, not logs).
func quietServer(_ manager: ProviderManager, _ domain: String, _ options: ServeOptions) -> Server {
    var logger = Logger(label: "test.serve")
    logger.logLevel = .critical
    return Server(manager: manager, domains: [domain], options: options, logger: logger)
}

/// Engine events collected from any task.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [EngineEvent] = []

    var handler: EventHandler { { [self] event in lock.withLock { events.append(event) } } }

    /// The first `waitingForSync` event, as (process, serving).
    var waiting: (process: Int32?, serving: Bool)? {
        lock.withLock {
            for case .waitingForSync(let process, let serving) in events { return (process, serving) }
            return nil
        }
    }
}

/// One sync of a domain at a time, across processes: `serve` holds the domain's sync lock for
/// each pass, and any other sync waits for it.
@Suite struct SyncLockTests {
    @Test func aSyncWaitsForServesPassAndRunsAfterIt() async throws {
        try await Fixture.with { f in
            _ = try f.memory.write(path: "a.txt", data: Data("a".utf8))
            let controller = try await f.addDomain()
            // serve on a second manager of the same home, as a separate process would have; its
            // first pass stops inside the store until the gate opens.
            let gate = Gate()
            let listings = CallCounter()
            f.memory.setHook(for: .enumerateItems) { _ in
                _ = listings.increment()
                await gate.wait()
            }
            let manager = try ProviderManager(home: f.home, registry: TestRemote.registry)
            let server = quietServer(manager, "mem", ServeOptions(pollInterval: 3600))
            let serving = Task { try await server.run() }
            #expect(await eventually { listings.value >= 1 }, "serve's first pass never reached the store")

            // A sync of the same domain (here: another manager, as the CLI would be) waits and says
            // for whom; it does not touch the store meanwhile.
            let events = EventLog()
            let waiting = Task { try await controller.sync(events: events.handler) }
            #expect(await eventually { events.waiting != nil }, "the second sync did not wait")
            #expect(events.waiting?.process == getpid())
            #expect(events.waiting?.serving == true)
            let listedWhileWaiting = listings.value

            // A waiting sync can be cancelled.
            let cancelled = Task { try await controller.sync() }
            let third = EventLog()
            let observed = Task { try await controller.sync(events: third.handler) }
            #expect(await eventually { third.waiting != nil })
            observed.cancel()
            await expectCode(.cancelled) { try await observed.value }
            #expect(listings.value == listedWhileWaiting, "a waiting sync listed the store")

            f.memory.setHook(for: .enumerateItems, nil)
            await gate.open()
            let report = try await waiting.value
            #expect(report.listedItems == 1)
            _ = try await cancelled.value
            server.stop()
            try await serving.value
            #expect(try f.manager.store.integrityCheck() == "ok")
            await manager.close()
        }
    }

    @Test func aSyncWithNobodyElseDoesNotWait() async throws {
        try await Fixture.with { f in
            let controller = try await f.addDomain()
            let events = EventLog()
            try await controller.sync(events: events.handler)
            try await controller.sync(events: events.handler)
            #expect(events.waiting == nil)
            #expect(FileManager.default.fileExists(atPath: DomainLock.syncPath(home: f.home, domain: "mem")))
        }
    }

    /// A child process started at that moment holds a copy of the lock's descriptor until its
    /// `exec`: the lock file names this process, yet this process does not hold it. Taking the
    /// lock waits that moment out instead of saying the domain is served by this very process;
    /// a lock this process does hold is refused at once.
    @Test func aLockHeldOnlyByACopyOfItsDescriptorIsTakenOnceTheCopyCloses() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = DomainLock.path(home: folder, domain: "d")
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let copy = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(copy >= 0 && flock(copy, LOCK_EX) == 0)
        let pid = Array("\(getpid())\n".utf8)
        #expect(pid.withUnsafeBytes { pwrite(copy, $0.baseAddress, $0.count, 0) } == pid.count)
        // The "child" reaches exec 30 ms later (a thread stands in for it).
        Thread {
            usleep(30_000)
            close(copy)
        }.start()
        let lock = try DomainLock.acquire(home: folder, domain: "d")
        #expect(DomainLock.holder(home: folder, domain: "d") == getpid())
        #expect(throws: FileProviderError.self) { try DomainLock.acquire(home: folder, domain: "d") }
        withExtendedLifetime(lock) {}
    }
}
