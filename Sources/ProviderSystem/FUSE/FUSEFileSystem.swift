/// What a FUSE mount shows, and what happens when programs use it: the part the engine
/// implements (the FUSE replica layout), under a ``FUSESession`` that speaks to the kernel.
///
/// Items are known by inode numbers the file system chooses: stable for an item's life (the
/// metadata database's row id, say), 1 for the root folder. The kernel counts the lookups it
/// holds of each inode and gives them back in ``forget(_:lookups:)``; a file system keeps no
/// table of every item (memory stays bounded): what it needs for an inode it finds from the
/// number (a database row), and whatever it keeps per inode it drops when the count reaches 0.
///
/// Threads: the session calls these methods on threads of its own (never Swift's cooperative
/// pool), several at once, and waits for each: a method may block (database queries, waiting
/// for bytes being fetched). Errors are errno values (``FUSEError``), which the program's call
/// fails with. `requester` says who asks (issue #42's access rules by program).
///
/// What the session answers itself: `.` and `..` in listings; `lseek` (`SEEK_DATA`/`SEEK_HOLE`,
/// left to the kernel, which reports no holes: the whole file is data, unlike the sparse
/// backing file); `flush`, locks (kept by the kernel), extended attributes and `fallocate`
/// (not supported).
public protocol FUSEFileSystem: Sendable {
    /// The item `name` in the folder `parent`; counts one lookup of its inode.
    /// - Throws: `noEntry` when there is none; `notFolder` when `parent` is not a folder.
    func lookup(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes

    /// The kernel drops `lookups` of its lookups of `inode` (it forgot the name or the item was
    /// removed). Never fails; nothing to answer.
    func forget(_ inode: UInt64, lookups: UInt64)

    /// The attributes of `inode`; `descriptor` is the file's backing descriptor when the
    /// program asked about an open file (`fstat`), nil otherwise.
    /// - Throws: `noEntry` when the inode is unknown.
    func attributes(of inode: UInt64, descriptor: Int32?, by requester: FUSERequester) throws(FUSEError) -> FUSEAttributes

    /// Changes attributes of `inode` (truncate, chmod, chown, times) and returns them all, as
    /// they are now. `descriptor` as in ``attributes(of:descriptor:by:)``.
    /// - Throws: `noEntry`; `notPermitted`/`accessDenied` when the change is refused; `ioError`
    ///   when a truncate needs bytes that cannot be fetched.
    func setAttributes(_ changes: FUSEAttributeChanges, of inode: UInt64, descriptor: Int32?, by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes

    /// Adds the items of the folder `folder` to `sink`, in a stable order, starting after the
    /// entry whose cookie is `cookie` (0: from the first), until the folder ends or ``FUSEListingSink/add(_:_:cookie:)``
    /// returns false.
    /// - Throws: `noEntry`; `notFolder`.
    func list(_ folder: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester)
        throws(FUSEError)

    /// A program opens the folder `inode` to list it: what the file system keeps for this
    /// open, and whether the kernel may keep the listing (``FUSEOpenFolder``). The default
    /// keeps nothing and lets the kernel keep nothing.
    /// - Throws: `noEntry`; `notFolder`.
    func openFolder(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEOpenFolder

    /// ``list(_:after:into:by:)`` for the open folder `handle` (from ``openFolder(_:by:)``): a
    /// file system may go on from where the last part of this listing ended rather than
    /// start again. The default calls ``list(_:after:into:by:)``.
    /// - Throws: as ``list(_:after:into:by:)``.
    func list(_ folder: UInt64, handle: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester)
        throws(FUSEError)

    /// The last close of the open folder `handle`. Never fails.
    func releaseFolder(_ inode: UInt64, handle: UInt64)

    /// The target of the symbolic link `inode`, as bytes.
    /// - Throws: `noEntry`; `invalid` when it is not a symbolic link.
    func readLink(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8]

    /// Opens the file `inode` for a program with open's `flags` (`O_RDONLY`/`O_WRONLY`/`O_RDWR`,
    /// `O_TRUNC`, ...; with the writeback cache the session turns `O_WRONLY` into `O_RDWR` and
    /// drops `O_APPEND`, as the kernel then reads pages and places appends itself): a backing
    /// descriptor, and whether the file is complete (the kernel keeps its cache).
    /// - Throws: `noEntry`; `isFolder`; `accessDenied`; `ioError` when the file cannot be had.
    func open(_ inode: UInt64, flags: Int32, by requester: FUSERequester) throws(FUSEError) -> FUSEOpenFile

    /// A program reads `count` bytes at `offset` of the open file `inode`: return once those
    /// bytes (up to the end of the file) are present in `descriptor` (fetching them first, the
    /// progressive hydrator); the session then answers from `descriptor`. A file system whose
    /// bytes could be taken away again (a fill that fails gives its blocks back) may instead
    /// call `answer` (the session's answer from `descriptor`) while it holds them, at most once
    /// and never after throwing; the session answers itself when it was not called.
    /// - Throws: `ioError` when the bytes cannot be fetched (the store is unreachable): the
    ///   program's read fails, it never reads bytes that are not the file's.
    func read(
        _ inode: UInt64, descriptor: Int32, offset: UInt64, count: Int, by requester: FUSERequester, answer: () -> Void
    ) throws(FUSEError)

    /// Writes `bytes` at `offset` of the open file `inode` (to `descriptor`) and returns how
    /// many were written. With the writeback cache these come from the kernel's page cache,
    /// later than the program's `write`, and ``FUSERequester/processIdentifier`` is 0.
    /// - Throws: `noSpace`; `ioError`.
    func write(_ inode: UInt64, descriptor: Int32, bytes: UnsafeRawBufferPointer, offset: UInt64, by requester: FUSERequester)
        throws(FUSEError) -> Int

    /// Creates and opens the file `name` in `parent` with permission bits `mode` (the program's
    /// umask already applied by the kernel), open's `flags` (as ``open(_:flags:by:)``); counts
    /// one lookup.
    /// - Throws: `exists` (with `O_EXCL`); `noEntry` when `parent` is gone; `noSpace`.
    func create(_ name: FUSEName, in parent: UInt64, mode: UInt32, flags: Int32, by requester: FUSERequester)
        throws(FUSEError) -> (FUSEAttributes, FUSEOpenFile)

    /// Makes the folder `name` in `parent`; counts one lookup.
    /// - Throws: `exists`; `noEntry` when `parent` is gone.
    func makeFolder(_ name: FUSEName, in parent: UInt64, mode: UInt32, by requester: FUSERequester) throws(FUSEError)
        -> FUSEAttributes

    /// Makes the symbolic link `name` in `parent` pointing at `target`; counts one lookup.
    /// - Throws: `exists`; `noEntry`; `notSupported` where links are not kept.
    func makeSymbolicLink(_ name: FUSEName, in parent: UInt64, target: [UInt8], by requester: FUSERequester)
        throws(FUSEError) -> FUSEAttributes

    /// Removes the file or link `name` from `parent` (an open file stays readable through its
    /// descriptors until released).
    /// - Throws: `noEntry`; `isFolder`.
    func remove(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError)

    /// Removes the empty folder `name` from `parent`.
    /// - Throws: `noEntry`; `notEmpty`; `notFolder`.
    func removeFolder(_ name: FUSEName, in parent: UInt64, by requester: FUSERequester) throws(FUSEError)

    /// Renames `name` in `parent` to `newName` in `newParent`, replacing an item there as
    /// `rename(2)` does unless `flags` say otherwise (editors' save-by-rename).
    /// - Throws: `noEntry`; `exists` (``FUSERenameFlags/noReplace``); `notEmpty` when replacing a
    ///   folder that holds items; `invalid` for flags not supported.
    func rename(
        _ name: FUSEName, in parent: UInt64, to newName: FUSEName, in newParent: UInt64, flags: FUSERenameFlags,
        by requester: FUSERequester) throws(FUSEError)

    /// Makes what was written to `descriptor` durable (`fsync`; `dataOnly` for `fdatasync`).
    /// - Throws: `ioError`; `noSpace`.
    func synchronize(_ inode: UInt64, descriptor: Int32, dataOnly: Bool, by requester: FUSERequester) throws(FUSEError)

    /// The last close of an open (`flags` as opened): the session closes `descriptor` after this
    /// returns. Never fails (what a release would report is lost to the program).
    func release(_ inode: UInt64, descriptor: Int32, flags: Int32)

    /// What `df` shows.
    /// - Throws: `ioError`.
    func statistics(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEVolumeStatistics

    /// The value of the extended attribute `name` of `inode` (`getxattr`). Never reads
    /// contents: a file system that fetches contents never fetches for this.
    /// - Throws: `noAttribute` (ENODATA) when the item has none of that name; `noEntry`;
    ///   `notImplemented` when this file system keeps no extended attributes (the kernel then
    ///   stops asking: every program's call fails with EOPNOTSUPP).
    func extendedAttribute(_ name: FUSEName, of inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8]

    /// The names of the extended attributes of `inode` (`listxattr`).
    /// - Throws: `noEntry`; `notImplemented` as ``extendedAttribute(_:of:by:)``.
    func extendedAttributeNames(of inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [FUSEName]

    /// Sets the extended attribute `name` of `inode` to `value` (`setxattr`).
    /// - Throws: `notPermitted` for an attribute this file system owns; `exists`
    ///   (``FUSEAttributeFlags/create``) or `noAttribute` (``FUSEAttributeFlags/replace``);
    ///   `noEntry`; `noSpace`; `notImplemented`.
    func setExtendedAttribute(
        _ name: FUSEName, to value: UnsafeRawBufferPointer, flags: FUSEAttributeFlags, of inode: UInt64, by requester: FUSERequester
    ) throws(FUSEError)

    /// Removes the extended attribute `name` of `inode` (`removexattr`).
    /// - Throws: `notPermitted` for an attribute this file system owns; `noAttribute` when
    ///   there is none; `noEntry`; `notImplemented`.
    func removeExtendedAttribute(_ name: FUSEName, of inode: UInt64, by requester: FUSERequester) throws(FUSEError)
}

/// A file system that keeps nothing per open folder: every part of a listing is asked with its
/// cookie alone, and the kernel keeps no listing.
extension FUSEFileSystem {
    public func openFolder(_ inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> FUSEOpenFolder {
        FUSEOpenFolder(handle: 0, keepsListing: false)
    }

    public func list(
        _ folder: UInt64, handle: UInt64, after cookie: UInt64, into sink: inout FUSEListingSink, by requester: FUSERequester
    ) throws(FUSEError) {
        try list(folder, after: cookie, into: &sink, by: requester)
    }

    public func releaseFolder(_ inode: UInt64, handle: UInt64) {}
}

/// A file system that keeps no extended attributes: every call answers `notImplemented`
/// (ENOSYS), after which the kernel no longer asks and programs get EOPNOTSUPP.
extension FUSEFileSystem {
    public func extendedAttribute(_ name: FUSEName, of inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [UInt8] {
        throw .notImplemented
    }

    public func extendedAttributeNames(of inode: UInt64, by requester: FUSERequester) throws(FUSEError) -> [FUSEName] {
        throw .notImplemented
    }

    public func setExtendedAttribute(
        _ name: FUSEName, to value: UnsafeRawBufferPointer, flags: FUSEAttributeFlags, of inode: UInt64, by requester: FUSERequester
    ) throws(FUSEError) {
        throw .notImplemented
    }

    public func removeExtendedAttribute(_ name: FUSEName, of inode: UInt64, by requester: FUSERequester) throws(FUSEError) {
        throw .notImplemented
    }
}
