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
    @Test func thousandsOfUsesAreWrittenWithoutWaitingForTheTimerOrAFlush() async throws {
        let temp = try TemporaryFolder()
        defer { temp.remove() }
        let store = try MetadataStore(url: temp.url("metadata.sqlite"))
        let domain = try store.insertDomain(
            DomainRecord(name: "d", backendKind: "test", configuration: ["root": "/x"], replicaPath: temp.path + "/r"))
        let domainID = try #require(domain.id)
        let executor = BlockingExecutor(name: "use-recorder-test", threads: 1)
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
}
