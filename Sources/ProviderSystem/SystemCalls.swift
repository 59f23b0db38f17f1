import CSystemShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The calls the Swift overlay of Glibc does not show (flags under `_GNU_SOURCE`, variadic
/// calls, constants), each a thin wrapper of its C shim in `CSystemShims`: the one way the rest
/// of the package reaches them, as swift-system's `Syscalls.swift` and NIOPosix's
/// `System.swift` keep such calls in one place. Each returns what the call returns, -1 with
/// `errno` on failure unless said otherwise, and throws nothing: the caller knows what failed
/// and turns `errno` into a `FileProviderError` (`POSIXError.error(_:path:errno:)`).
///
/// All block (file system calls): call them from the engine's executor or a thread of their
/// own, never from Swift's cooperative pool.
package enum SystemCalls {
    /// `UTIME_OMIT`: a time `utimensat`/`futimens` leaves as it is.
    package static let omitTime: Int = fp_utime_omit()

    /// `SEEK_DATA` for `lseek`: the next byte at or after an offset that is data, not a hole.
    package static let seekData = SEEK_DATA
    /// `SEEK_HOLE` for `lseek`: the next hole at or after an offset (the end of the file counts).
    package static let seekHole = SEEK_HOLE

    // MARK: Names

    /// Renames `from` to `to`, failing instead of replacing an existing `to`
    /// (`renameat2(RENAME_NOREPLACE)`): 0, or -1 with errno (`EEXIST` when `to` exists).
    package static func renameNoReplace(_ from: UnsafePointer<CChar>, _ to: UnsafePointer<CChar>) -> Int32 {
        fp_rename_noreplace(from, to)
    }

    /// Renames `name` in the folder open as `folder` to the path `to`, failing instead of
    /// replacing an existing `to`: 0, or -1 with errno (`EEXIST` when `to` exists).
    package static func renameNoReplace(inFolder folder: Int32, _ name: UnsafePointer<CChar>, to: UnsafePointer<CChar>) -> Int32 {
        fp_rename_noreplace_at(folder, name, to)
    }

    /// Renames `name` in the folder open as `folder` to `target` in the folder open as `into`,
    /// failing instead of replacing an existing `target`: 0, or -1 with errno (`EEXIST` when
    /// `target` exists). Only the two names are looked up.
    package static func renameNoReplace(
        inFolder folder: Int32, _ name: UnsafePointer<CChar>, toFolder into: Int32, _ target: UnsafePointer<CChar>
    ) -> Int32 {
        fp_rename_noreplace_between(folder, name, into, target)
    }

    /// A descriptor of the folder `path` for `*at` calls only (`O_PATH | O_DIRECTORY`: nothing
    /// is read through it), or -1 with errno.
    package static func openFolderPath(_ path: String) -> Int32 {
        fp_open_folder_path(path)
    }

    /// An unnamed regular file in `folder` (`O_TMPFILE`), open for writing, or -1 with errno
    /// (`EOPNOTSUPP`, `EISDIR` or `EINVAL` where the file system has no unnamed files). Making
    /// it does not take the folder's lock.
    package static func openUnnamed(inFolder folder: String, mode: mode_t) -> Int32 {
        fp_open_unnamed(folder, mode)
    }

    /// Gives the unnamed file `fd` (from ``openUnnamed(inFolder:mode:)``) the name `target`,
    /// never replacing anything: 0, or -1 with errno (`EEXIST` when the name is taken,
    /// `ENOENT` without `/proc`, which it goes through).
    package static func linkUnnamed(_ fd: Int32, to target: String) -> Int32 {
        fp_link_unnamed(fd, target)
    }

    // MARK: Contents

    /// Gives back the blocks of `offset..<offset+length` of `fd` (reads see zeros; the size
    /// stays: `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`): 0, or -1 with errno.
    package static func punchHole(_ fd: Int32, offset: off_t, length: off_t) -> Int32 {
        fp_punch_hole(fd, offset, length)
    }

    /// Takes a write lease on `fd` (`F_SETLEASE`, `F_WRLCK`; a break is signalled as SIGURG):
    /// 0, or -1 with errno. Granted only while no other open file or mapping of the inode
    /// exists (`EAGAIN` otherwise); while held, another open of the file waits until it is
    /// released. `EINVAL` where leases are disabled or the file system has none; `EACCES`
    /// without `CAP_LEASE` on a file of another owner.
    package static func takeWriteLease(_ fd: Int32) -> Int32 {
        fp_take_write_lease(fd)
    }

    /// Takes a read lease on `fd`, open read-only (`F_SETLEASE`, `F_RDLCK`): 0, or -1 with
    /// errno. Granted only while nothing has the file open for writing (`EAGAIN` otherwise);
    /// while held, an open for writing or a truncate waits until it is released. Other errors
    /// as ``takeWriteLease(_:)``.
    package static func takeReadLease(_ fd: Int32) -> Int32 {
        fp_take_read_lease(fd)
    }

    /// Releases a lease taken with ``takeWriteLease(_:)`` or ``takeReadLease(_:)``: 0, or -1
    /// with errno.
    package static func releaseLease(_ fd: Int32) -> Int32 {
        fp_release_lease(fd)
    }

    // MARK: File systems

    /// The type of the file system holding `path` (`statfs` `f_type`: 0xEF53 for ext4,
    /// 0x01021994 for tmpfs, ...), or -1 with errno.
    package static func fileSystemType(_ path: String) -> Int64 {
        Int64(fp_file_system_type(path))
    }

    // MARK: The process

    /// The width in columns of the terminal `fd` is open on (`TIOCGWINSZ`), or 0 when `fd` is
    /// not a terminal or the terminal does not say.
    package static func terminalColumns(_ fd: Int32) -> Int32 {
        fp_terminal_columns(fd)
    }

    /// Lets glibc keep up to `bytes` of freed memory at the top of each arena before giving it
    /// back to the kernel (`M_TRIM_THRESHOLD`); returns 1 on success, 0 otherwise.
    @discardableResult
    package static func setTrimThreshold(_ bytes: Int32) -> Int32 {
        fp_set_trim_threshold(bytes)
    }
}
