import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension Replica {
    /// `F_SETLEASE` (`F_LINUX_SPECIFIC_BASE`), which Glibc declares only for `_GNU_SOURCE`.
    private static let setLease: Int32 = 1024

    /// Whether a program has the file at `relative` open (or mapped, or is running it), asked of
    /// the kernel: a write lease is granted only on a file no other open file description
    /// refers to (`fcntl(F_SETLEASE, F_WRLCK)`, `EAGAIN` otherwise); when granted it is given
    /// back at once. `false` when nothing is there, and when the kernel cannot tell (a file of
    /// another user, a file system without leases): such a file is taken as not open. Blocking.
    ///
    /// The answer is of the moment: a program may open the file right after. An eviction that
    /// follows is still safe, as every eviction is (a program that has the old file open goes on
    /// reading it).
    public func isOpen(_ relative: String) -> Bool {
        let fd = open(path(relative), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 { return false }
        defer { close(fd) }
        if fcntl(fd, Self.setLease, Int32(F_WRLCK)) == 0 {
            _ = fcntl(fd, Self.setLease, Int32(F_UNLCK))
            return false
        }
        return errno == EAGAIN
    }
}
