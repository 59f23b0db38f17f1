import Foundation
import ProviderCore
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Numbers the engine takes from the kernel and from files in the replica, which must never
/// trap: 64-bit inode numbers with the top bit set (NFS, CIFS and FUSE file systems hand them
/// out).
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
}
