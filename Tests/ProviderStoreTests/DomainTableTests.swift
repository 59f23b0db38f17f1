import Foundation
import ProviderCore
import ProviderStore
import Testing

@Suite struct DomainTableTests {
    @Test func insertAssignsIDAndRoundTrips() throws {
        try withStore { store, _ in
            let inserted = try store.insertDomain(
                DomainRecord(
                    name: "photos", backendKind: "local", configuration: ["root": "/srv/p", "page-size": "10"], replicaPath: "/r/photos"))
            let id = try #require(inserted.id)
            let fetched = try #require(try store.domain(named: "photos"))
            #expect(fetched.id == id)
            #expect(fetched.backendKind == "local")
            #expect(fetched.options == ["root": "/srv/p", "page-size": "10"])
            #expect(fetched.replicaPath == "/r/photos")
            #expect(fetched.isConnected)
            #expect(fetched.lastError == nil)
            #expect(try store.domain(named: "nope") == nil)
        }
    }

    /// Every column of a domain, written and read column by column (``DomainRecord/values``,
    /// ``DomainRecord/init(row:)``), comes back as it was, through an insert and an update.
    @Test func aDomainRoundTripsEveryField() throws {
        try withStore { store, _ in
            var domain = DomainRecord(
                name: "every", backendKind: "webdav", configuration: ["url": "http://127.0.0.1:1/dav"], replicaPath: "/r/every",
                createdAt: Date(timeIntervalSince1970: 1_765_000_000.125))
            domain.replicaMode = .dataless
            domain.hydration = .progressive
            domain.onAccess = .fuse
            domain.onAccessReason = "asked for"
            domain.modeReason = "the default"
            domain.cacheBudget = 1 << 40
            domain.ignorePatterns = "*.tmp\n~*"
            var inserted = try store.insertDomain(domain)
            #expect(inserted.id != nil)
            #expect(try store.domain(named: "every") == inserted)
            inserted.isConnected = false
            inserted.lastSyncAt = Date(timeIntervalSince1970: 1_765_000_100.5)
            inserted.lastError = "unreachable"
            inserted.failureCount = 3
            inserted.nextRetryAt = Date(timeIntervalSince1970: 1_765_000_200.75)
            try store.updateDomain(inserted)
            #expect(try store.domains() == [inserted])
            let id = try #require(inserted.id)
            let failed = try #require(
                try store.recordDomainFailure(id: id, message: "again", nextRetry: { _ in Date(timeIntervalSince1970: 1_765_000_300) }))
            #expect(failed.failureCount == 4)
            #expect(try store.domain(named: "every")?.nextRetryAt == Date(timeIntervalSince1970: 1_765_000_300))
        }
    }

    @Test func duplicateNameIsFilenameCollision() throws {
        try withStore { store, _ in
            _ = try makeDomain(store, "same")
            expectCode(.filenameCollision) { try makeDomain(store, "same") }
            #expect(try store.domains().count == 1)
        }
    }

    @Test func domainsAreListedByNameAndUpdated() throws {
        try withStore { store, _ in
            for name in ["zeta", "alpha", "mid"] { _ = try makeDomain(store, name) }
            #expect(try store.domains().map(\.name) == ["alpha", "mid", "zeta"])
            var mid = try #require(try store.domain(named: "mid"))
            mid.lastError = "unreachable"
            mid.isConnected = false
            mid.lastSyncAt = Date(timeIntervalSince1970: 1_700_000_000)
            try store.updateDomain(mid)
            let fetched = try #require(try store.domain(named: "mid"))
            #expect(fetched.lastError == "unreachable")
            #expect(!fetched.isConnected)
            #expect(fetched.lastSyncAt == Date(timeIntervalSince1970: 1_700_000_000))
        }
    }
}
