/// How a ``FUSESession`` mounts and what it asks of the kernel.
public struct FUSEMountOptions: Sendable, Hashable {
    /// The mount's source in `/proc/self/mountinfo` and `df` (`fsname`): the domain's name.
    /// Commas and backslashes are escaped.
    public var name: String
    /// The type after `fuse.` in `mountinfo` (`subtype`): `fuse.fileprovider`.
    public var subtype: String = "fileprovider"
    /// Lets other users (root included) use the mount (`allow_other`). An ordinary user needs
    /// `user_allow_other` in `/etc/fuse.conf` for it.
    public var allowOther = false
    /// The kernel checks permissions from the modes (`default_permissions`), as on any file
    /// system; without it, every requester may do anything the file system allows.
    public var defaultPermissions = true
    /// `fusermount3` unmounts when this process ends, however it ends (`auto_unmount`): a
    /// `kill -9` leaves no stale mount (programs get `ENOTCONN` until it is gone).
    public var autoUnmount = true
    /// How long the kernel may trust a name (entry) and an item's attributes without asking
    /// again, in seconds: long, since ``FUSESession/invalidate(inode:)`` and
    /// ``FUSESession/invalidate(entry:in:)`` tell it when a sync changes an item.
    public var entryTimeout: Double = 3600
    public var attributeTimeout: Double = 3600
    /// How long the kernel may trust that a name does not exist (0: it asks every time). A sync
    /// that adds an item must invalidate the name when this is above 0.
    public var negativeTimeout: Double = 0
    /// The kernel keeps writes in its page cache and sends them later, in large requests
    /// (`FUSE_CAP_WRITEBACK_CACHE`): small writes (`echo >>`, editors, SQLite) go at page cache
    /// speed. The kernel keeps sizes and modification times of open files itself then.
    public var writebackCache = true
    /// Listings carry attributes (`readdirplus`): `ls -l` and `find` need no lookup per item.
    public var listingsWithAttributes = true
    /// The file system clears set-user-ID and set-group-ID bits and file capabilities itself
    /// when a file is written, truncated or given away (`FUSE_HANDLE_KILLPRIV_V2`, asked for by
    /// hand: libfuse 3.14 cannot). The kernel then marks the mount `SB_NOSEC` and stops asking
    /// `security.capability` before every `write(2)` (one request per call otherwise, once the
    /// file system answers extended attributes at all). True for a file system that writes
    /// through to a backing file system, which clears them as for any writer. Needs a kernel
    /// with FUSE protocol 7.33 (Linux 5.11); older ones are not asked.
    public var handlesKillPrivileges = false
    /// The largest read, write and readahead request, in bytes (`max_pages`; 1 MiB).
    public var maximumRequestBytes: UInt32 = 1 << 20
    /// Threads serving requests at most (each blocks while its request waits for bytes), and
    /// idle ones kept waiting.
    public var maximumThreads: UInt32 = 16
    public var idleThreads: UInt32 = 4

    public init(name: String) { self.name = name }

    /// The `-o` options for libfuse and `fusermount3`.
    var arguments: [String] {
        func escaped(_ value: String) -> String {
            value.replacingAll("\\", with: "\\\\").replacingAll(",", with: "\\,")
        }
        var options = ["fsname=" + escaped(name), "subtype=" + escaped(subtype)]
        if allowOther { options.append("allow_other") }
        if defaultPermissions { options.append("default_permissions") }
        if autoUnmount { options.append("auto_unmount") }
        return options.flatMap { ["-o", $0] }
    }
}

extension String {
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
