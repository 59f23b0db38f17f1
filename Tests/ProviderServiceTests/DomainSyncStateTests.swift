import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import Testing

@testable import ProviderService

/// The D-Bus interface's domain states from what serve knows, without a bus.
@Suite struct DomainSyncStateTests {
    static func record(connected: Bool = true, failures: Int = 0, error: String? = nil) -> DomainRecord {
        var record = DomainRecord(name: "d", backendKind: "local", configuration: [:], replicaPath: "/tmp/d")
        record.isConnected = connected
        record.failureCount = failures
        record.nextRetryAt = failures > 0 ? Date().addingTimeInterval(60) : nil
        record.lastError = error
        return record
    }

    @Test func statesFollowSyncsAndTheirOutcomes() {
        let activity = SyncActivity()
        // Before serve's first sync ends: syncing (it is due at start).
        #expect(DomainSyncState.of(Self.record(), activity: activity).state == .syncing)
        activity.began("d")
        #expect(DomainSyncState.of(Self.record(), activity: activity).state == .syncing)
        activity.ended("d", .init())
        #expect(DomainSyncState.of(Self.record(), activity: activity) == (.inSync, nil))

        // An unreachable store is offline; other failures and partial syncs are errors, with why.
        activity.ended("d", .init(code: .serverUnreachable, message: "cannot connect to files.example.com:22"))
        #expect(DomainSyncState.of(Self.record(), activity: activity) == (.offline, "cannot connect to files.example.com:22"))
        activity.ended("d", .init(code: .notAuthenticated, message: "password refused"))
        #expect(DomainSyncState.of(Self.record(), activity: activity) == (.error, "password refused"))
        activity.ended("d", .init(message: "1 item skipped", partial: true))
        #expect(DomainSyncState.of(Self.record(), activity: activity) == (.error, "1 item skipped"))

        // Disconnected is paused, whatever the last sync said; connecting again forgets it.
        let paused = DomainSyncState.of(Self.record(connected: false), activity: activity)
        #expect(paused.state == .paused && paused.detail?.contains("fileproviderctl domain connect d") == true)
        activity.changed("d")
        #expect(DomainSyncState.of(Self.record(), activity: activity).state == .syncing)

        // A backoff recorded by an earlier process, before this one's first sync ended: error.
        #expect(
            DomainSyncState.of(Self.record(failures: 2, error: "quota exceeded"), activity: SyncActivity()) == (.error, "quota exceeded"))
        #expect(DomainSyncState.allCases.map(\.rawValue) == ["in-sync", "syncing", "paused", "offline", "error"])
    }

    @Test func theListenerHearsEveryChange() {
        let activity = SyncActivity()
        let heard = Mutex<[String]>([])
        activity.listen { domain in heard.withLock { $0.append(domain) } }
        activity.began("a")
        activity.ended("a", .init())
        activity.changed("b")
        activity.listen(nil)
        activity.began("c")
        #expect(heard.withLock { $0 } == ["a", "a", "b"])
    }
}
