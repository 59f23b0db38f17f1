import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// ``UseRecorder``: uses are held and written together, by the timer, by a flush, or at once
/// when thousands are held.
@Suite struct UseRecorderTests {
    /// A database in `temp` with one domain, its identifier, and an executor of one thread.
    static func database(in temp: TemporaryFolder) throws -> (MetadataStore, Int64, BlockingExecutor) {
        let store = try MetadataStore(url: temp.url("metadata.sqlite"))
        let domain = try store.insertDomain(
            DomainRecord(name: "d", backendKind: "test", configuration: ["root": "/x"], replicaPath: temp.path + "/r"))
        return (store, try #require(domain.id), BlockingExecutor(name: "use-recorder-test", threads: 1))
    }

    @Test func thousandsOfUsesAreWrittenWithoutWaitingForTheTimerOrAFlush() async throws {
        let temp = try TemporaryFolder()
        defer { temp.remove() }
        let (store, domainID, executor) = try Self.database(in: temp)
        // A timer that does not fire while the test runs: only an early write writes.
        let recorder = UseRecorder(store: store, executor: executor, logger: Logger(label: "test"), interval: 3600)
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        for index in 0..<(UseRecorder.earlyWriteCount - 1) {
            recorder.used(domainID: domainID, identifier: ItemIdentifier("f\(index)"), at: date)
        }
        // One use short of the count: held.
        #expect(recorder.earlyWrite == nil)
        #expect(try store.lastUse(domainID: domainID, identifier: "f0") == nil)
        recorder.used(domainID: domainID, identifier: "last", at: date)
        let early = try #require(recorder.earlyWrite)
        await early.value
        #expect(try store.lastUse(domainID: domainID, identifier: "f0") == date)
        #expect(try store.lastUse(domainID: domainID, identifier: "last") == date)
        #expect(recorder.earlyWrite == nil)
    }

    /// A flush waits for the timer's write that took the uses a moment before: eviction flushes
    /// and then reads the uses, and a flush that returned while that write was still under way
    /// let it evict the file a program had just read (`DatalessBudgetTests`, now and then).
    @Test func aFlushWaitsForTheWriteUnderWay() async throws {
        let temp = try TemporaryFolder()
        defer { temp.remove() }
        let (store, domainID, executor) = try Self.database(in: temp)
        let recorder = UseRecorder(store: store, executor: executor, logger: Logger(label: "test"), interval: 0.01)
        // The executor's one thread is busy until `gate` opens: the timer's write waits for it.
        let gate = DispatchSemaphore(value: 0)
        let busy = Task { try await executor.run { gate.wait() } }
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        recorder.used(domainID: domainID, identifier: "read", at: date)
        // The timer fired and took the use: nothing is held any more.
        #expect(await eventually(timeout: 10) { recorder.heldCount == 0 })
        let flushed = Mutex(false)
        let flush = Task {
            await recorder.flush()
            flushed.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!flushed.withLock { $0 }, "the flush returned before the use was written")
        gate.signal()
        await flush.value
        #expect(try store.lastUse(domainID: domainID, identifier: "read") == date)
        _ = try await busy.value
    }
}
