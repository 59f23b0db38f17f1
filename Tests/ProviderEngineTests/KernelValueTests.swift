import Foundation
import ProviderCore
import ProviderStore
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Numbers the engine takes from the kernel and from files in the replica, which must never
/// trap: 64-bit inode numbers with the top bit set (NFS, CIFS and FUSE file systems hand them
/// out), placeholder files with dates no item can have.
@Suite struct KernelValueTests {
    @Test func anInodeNumberWithTheTopBitSetIsKeptAsItsBitPattern() {
        var info = stat()
        info.st_mode = S_IFREG | 0o644
        info.st_size = 3
        for (inode, kept) in [(ino_t(12), Int64(12)), (ino_t(1) << 63, Int64.min), (ino_t.max, Int64(-1))] {
            info.st_ino = inode
            let print = Replica.fingerprint(info)
            #expect(print.inode == kept && print.isRegularFile && print.size == 3, "inode \(inode)")
        }
    }

    @Test func aPlaceholderFileWithAnImpossibleDateIsReadWithoutIt() throws {
        func placeholder(date: String) throws -> PlaceholderMetadata {
            let text = """
                {"domain":"d","identifier":"i","parentIdentifier":"p","filename":"f","kind":"file",\
                "contentType":"public.data","size":3,"contentModificationDate":\(date),\
                "contentVersion":"00","metadataVersion":"00"}
                """
            return try PlaceholderMetadata.read(from: Data(text.utf8))
        }
        for date in ["1e300", "-1e300", "1e10", "-1e11"] {
            #expect(try placeholder(date: date).contentModificationDate == nil, "\(date)")
        }
        #expect(try placeholder(date: "1600000000.5").contentModificationDate == 1_600_000_000.5)
        #expect(try placeholder(date: "0").contentModificationDate == 0)
    }
}

/// The scan's settle test on file times a program set: a file dated centuries back (1684 on
/// tmpfs, here 1906 against a clock in 2223) is settled, and its age past Int64 does not trap.
@Suite struct ScanTimeTests {
    @Test func aFileDatedFarBackIsSettledWithoutOverflow() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-old-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url.appendingPathComponent("staging"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: url) }
        let replica = Replica(root: url, staging: url.appendingPathComponent("staging"))
        try Data("old".utf8).write(to: replica.url("old.txt"))
        var times = [timespec(tv_sec: -2_000_000_000, tv_nsec: 0), timespec(tv_sec: -2_000_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, replica.path("old.txt"), &times, 0) == 0)
        let root = ItemRecord(
            domainID: 1, item: Item(identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "", kind: .folder), path: "")
        let scanner = LocalScanner(replica: replica, domain: "d", ignore: IgnoreRules(), settleNanos: 1_000_000_000)
        let result = scanner.scan(records: [root], now: Date(timeIntervalSince1970: 8_000_000_000))
        #expect(result.changes.map(\.path) == ["old.txt"], "\(result.changes)")
        #expect(result.unsettled.isEmpty)
    }
}
