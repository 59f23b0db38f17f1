import Foundation
import GRDB
import Testing

@testable import ProviderStore

/// `SQLITE_PROTOCOL` (SQLite gave up reading the WAL index that other processes kept changing)
/// is tried again; any other error, and the last protocol error, goes through.
struct LockProtocolRetryTests {
    final class Attempts: @unchecked Sendable { var count = 0 }

    @Test func aTransactionRefusedWithALockProtocolErrorIsTriedAgain() throws {
        let attempts = Attempts()
        let value = try MetadataStore.retryingLockProtocolErrors { () throws -> Int in
            attempts.count += 1
            if attempts.count < 3 { throw DatabaseError(resultCode: .SQLITE_PROTOCOL, message: "locking protocol") }
            return 42
        }
        #expect(value == 42 && attempts.count == 3)
    }

    @Test func otherErrorsAndTheLastProtocolErrorGoThrough() {
        let other = Attempts()
        #expect(throws: DatabaseError.self) {
            try MetadataStore.retryingLockProtocolErrors { () throws -> Int in
                other.count += 1
                throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: "corrupt")
            }
        }
        #expect(other.count == 1)
        let protocolErrors = Attempts()
        let error = #expect(throws: DatabaseError.self) {
            try MetadataStore.retryingLockProtocolErrors { () throws -> Int in
                protocolErrors.count += 1
                throw DatabaseError(resultCode: .SQLITE_PROTOCOL, message: "locking protocol")
            }
        }
        #expect(error?.resultCode == .SQLITE_PROTOCOL)
        #expect(protocolErrors.count == MetadataStore.lockProtocolAttempts)
    }
}
