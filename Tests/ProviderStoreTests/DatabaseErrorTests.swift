import Foundation
import GRDB
import ProviderCore
import Testing

@testable import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// A database error's message names SQLite's extended result code, which says which of its I/O
/// errors (a short read, a failed read, a lock, the WAL index...) it was: GRDB's description
/// gives only the primary code, "SQLite error 10: disk I/O error".
struct DatabaseErrorTests {
    @Test func theExtendedCodeIsNamedBesideThePrimaryOne() {
        let shortRead = DatabaseError(resultCode: .SQLITE_IOERR_SHORT_READ, message: "disk I/O error", sql: "PRAGMA schema_version")
        #expect(
            MetadataStore.describe(shortRead)
                == "SQLite error 10 (SQLITE_IOERR_SHORT_READ / extended 522): disk I/O error - while executing `PRAGMA schema_version`")
        let plain = DatabaseError(resultCode: .SQLITE_IOERR, message: "disk I/O error")
        #expect(MetadataStore.describe(plain) == "SQLite error 10 (SQLITE_IOERR): disk I/O error")
        // A code this table does not know (a newer SQLite's) still gives its number.
        let unknown = DatabaseError(resultCode: ResultCode(rawValue: 10 | (99 << 8)), message: "disk I/O error")
        #expect(MetadataStore.describe(unknown) == "SQLite error 10 (extended 25354): disk I/O error")
        #expect(MetadataStore.describe(CocoaError(.fileNoSuchFile)).contains("CocoaError"))
    }

    /// The failure seen in CI: a reader's WAL descriptor no longer being the WAL file (another
    /// part of the process closed its number) fails the next read transaction at its first
    /// statement. Here the store's `-wal` descriptors are swapped for a write-only /dev/null
    /// (`pread` fails with EBADF) and swapped back afterwards.
    @Test func aReadThatCannotReadTheWALSaysWhichIOErrorItWas() throws {
        try withStore { store, _ in
            _ = try makeDomain(store, "a")
            _ = try store.domains()
            // A new commit: the next read transaction reads the changed pages from the WAL.
            _ = try makeDomain(store, "b")
            let wal = store.url.resolvingSymlinksInPath().path + "-wal"
            let descriptors = Self.descriptors(openOn: wal)
            try #require(!descriptors.isEmpty, "no descriptor of this process is open on \(wal)")
            let writeOnly = open("/dev/null", O_WRONLY | O_CLOEXEC)
            try #require(writeOnly >= 0)
            defer { close(writeOnly) }
            var saved: [(number: Int32, copy: Int32)] = []
            for number in descriptors {
                let copy = fcntl(number, F_DUPFD_CLOEXEC, 0)
                try #require(copy >= 0)
                saved.append((number, copy))
                try #require(dup2(writeOnly, number) == number)
            }
            let error = #expect(throws: FileProviderError.self) { try store.domains() }
            for (number, copy) in saved {
                #expect(dup2(copy, number) == number && fcntl(number, F_SETFD, FD_CLOEXEC) == 0)
                close(copy)
            }
            #expect(error?.code == .localIOFailure)
            #expect(
                error?.message.contains("SQLite error 10 (SQLITE_IOERR_READ / extended 266): disk I/O error") == true,
                "\(error?.message ?? "")")
            #expect(try store.domains().map(\.name) == ["a", "b"])
        }
    }

    /// The numbers of this process's descriptors open on `path`.
    static func descriptors(openOn path: String) -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { name in
            guard let number = Int32(name),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
                target == path
            else { return nil }
            return number
        }
    }
}
