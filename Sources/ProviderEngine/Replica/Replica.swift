import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Size, modification time and inode of a file in the replica: how the engine tells that a
/// materialized file was changed by someone else.
public struct FileFingerprint: Hashable, Sendable {
    public var size: Int64
    public var modificationNanos: Int64
    public var inode: Int64
    public var isRegularFile: Bool
    public var isDirectory: Bool
    /// A symlink (the fingerprint describes the link, never its target).
    public var isSymlink = false
    /// The permission bits (`st_mode & 0o7777`). Not part of what tells a local edit: `chmod`
    /// is a metadata change (``isExecutable``).
    public var permissions: UInt32 = 0o644

    /// The owner's x bit (`st_mode & 0o100`): how the scan tells a local `chmod +x`/`-x`.
    public var isExecutable: Bool { permissions & 0o100 != 0 }
}

/// The replica folder of one domain: real folders, materialized files under their real names,
/// and placeholders for the rest in the form its ``layout`` gives them (`<name>.placeholder`
/// files, or dataless files under their real names). All methods are blocking and run on the
/// engine's `BlockingExecutor`; each throws `FileProviderError` naming the path on failure.
public struct Replica: Sendable {
    /// The suffix of placeholder files.
    public static let placeholderSuffix = ".placeholder"

    public let root: URL
    /// A folder on the same file system for downloads in progress.
    public let staging: URL
    /// How an item appears here (a file that is not downloaded: `<name>.placeholder`, or a
    /// dataless file under its real name): every placeholder operation asks it.
    public let layout: any ReplicaLayout
    /// `root.path` and `staging.path`, worked out once: a URL decodes its path on every read,
    /// and each file the engine touches asks for one (1.5% of the CPU of `materialize -R` of
    /// small files).
    private let rootPath: String
    private let stagingFolder: String
    /// The database's notes of the domain's downloads (``DownloadNotes``): where the engine
    /// notes a download before it renames it into place, and what tells its downloads from
    /// local edits. `nil` in a replica made without them; set by ``noting(downloadsOf:in:)``.
    public internal(set) var downloadNotes: DownloadNotes?

    public init(root: URL, staging: URL, layout: any ReplicaLayout = PlaceholderFilesLayout()) {
        self.root = root
        self.staging = staging
        self.layout = layout
        rootPath = root.path
        stagingFolder = staging.path
    }

    /// A replica in the layout of `mode` (``ReplicaLayouts/layout(for:)``).
    public init(root: URL, staging: URL, layout mode: ReplicaMode) {
        self.init(root: root, staging: staging, layout: ReplicaLayouts.layout(for: mode))
    }

    /// The absolute path of an item at a relative path.
    public func path(_ relative: String) -> String {
        relative.isEmpty ? rootPath : rootPath + "/" + relative
    }

    /// The URL of an item at a relative path.
    public func url(_ relative: String) -> URL { URL(fileURLWithPath: path(relative)) }

    /// The URL of a file at a relative path, made without a look at the disk
    /// (`URL(fileURLWithPath:)` without `isDirectory` stats the path to learn whether it is a
    /// folder: 4% of the cooperative threads' CPU of 10,000 uploads).
    public func fileURL(_ relative: String) -> URL { URL(fileURLWithPath: path(relative), isDirectory: false) }

    /// The placeholder path of a relative path, as Apple's `placeholderURL(for:)`: the path
    /// with `.placeholder` added, or in its folder the shortened name of an item whose name is
    /// too long for that (``PlaceholderName``).
    public func placeholderPath(_ relative: String) -> String {
        let slash = relative.lastIndex(of: "/")
        let name = slash.map { relative[relative.index(after: $0)...] } ?? relative[...]
        if name.utf8.count + Self.placeholderSuffix.utf8.count <= PlaceholderName.maximumBytes {
            return path(relative) + Self.placeholderSuffix
        }
        let folder = slash.map { String(relative[..<$0]) } ?? ""
        return path(folder) + "/" + PlaceholderName.of(String(name))
    }

    /// Creates a folder; an existing folder is fine.
    public func makeFolder(_ relative: String) throws(FileProviderError) {
        PoolCheck.note()
        let target = path(relative)
        if mkdir(target, 0o755) == 0 { return }
        let code = errno
        if code == EEXIST, let print = fingerprint(atPath: target), print.isDirectory { return }
        throw POSIXError.error("cannot create folder", path: target, errno: code)
    }

    /// Writes the placeholder of a new item: created exclusively, so nothing is overwritten; an
    /// existing placeholder (left by an interrupted sync) is replaced atomically
    /// (``ReplicaLayout/createPlaceholder(_:_:in:)``).
    /// - Throws: `filenameCollision` when a file with contents stands where it goes;
    ///   `insufficientQuota` or `localIOFailure` when it cannot be written.
    public func createPlaceholder(_ relative: String, _ metadata: PlaceholderMetadata) throws(FileProviderError) {
        PoolCheck.note()
        try layout.createPlaceholder(relative, metadata, in: self)
    }

    /// Writes a placeholder atomically, as Apple's `writePlaceholder(at:withMetadata:)`
    /// (``ReplicaLayout/writePlaceholder(_:_:in:)``).
    /// - Throws: as ``createPlaceholder(_:_:)``.
    public func writePlaceholder(_ relative: String, _ metadata: PlaceholderMetadata) throws(FileProviderError) {
        PoolCheck.note()
        try layout.writePlaceholder(relative, metadata, in: self)
    }

    /// Writes bytes to a temporary sibling, then renames it over `target`.
    public func atomicWrite(_ bytes: [UInt8], to target: String) throws(FileProviderError) {
        PoolCheck.note()
        let slash = target.lastIndex(of: "/").map { target.index(after: $0) } ?? target.startIndex
        var temporary = ""
        var fd: Int32 = -1
        // Locked until renamed: a temporary file nobody holds a lock on was left by a process
        // that died, and ``removeAbandonedTemporary(atPath:)`` may delete it. Where the file
        // system has unnamed files, the file is locked before it has a name, so no scan can
        // ever take it.
        let parent = slash == target.startIndex ? "." : String(target[..<target.index(before: slash)])
        let folder = parent.isEmpty ? "/" : parent
        let unnamed = SystemCalls.openUnnamed(inFolder: folder, mode: 0o644)
        if unnamed >= 0 {
            _ = flock(unnamed, LOCK_EX)
            defer { close(unnamed) }
            try writeAll(unnamed, bytes, path: target)
            for _ in 0..<8 {
                temporary = target[..<slash] + ".fp-tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
                if SystemCalls.linkUnnamed(unnamed, to: temporary) == 0 {
                    do {
                        try POSIXError.check(rename(temporary, target), "cannot rename into place", path: target)
                    } catch {
                        unlink(temporary)
                        throw error
                    }
                    return
                }
                if errno != EEXIST { break }
            }
            // No /proc to name it through: the named way below.
        }
        // Otherwise a scan can take the lock between the create and the writer's lock and
        // delete the new file: the writer then holds an unlinked file and starts over with
        // another name.
        for _ in 0..<8 {
            temporary = target[..<slash] + ".fp-tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd < 0 { throw POSIXError.error("cannot write", path: temporary) }
            _ = flock(fd, LOCK_EX)
            var info = stat()
            if fstat(fd, &info) == 0 && info.st_nlink > 0 { break }
            close(fd)
            fd = -1
        }
        if fd < 0 { throw FileProviderError(.localIOFailure, "cannot write \(target): its temporary file kept being removed") }
        do {
            try writeAll(fd, bytes, path: temporary)
            try POSIXError.check(rename(temporary, target), "cannot rename into place", path: target)
            close(fd)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
    }

    /// Whether a name is one of ``atomicWrite(_:to:)``'s temporary files.
    public static func isTemporary(_ name: String) -> Bool { name.hasPrefix(".fp-tmp-") }

    /// Deletes a temporary file left by a process that died mid-write (nobody holds its lock).
    /// Returns whether it was deleted.
    @discardableResult
    public func removeAbandonedTemporary(atPath path: String) -> Bool {
        PoolCheck.note()
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
        return unlink(path) == 0
    }

    /// Reads a placeholder file (placeholder-files layout).
    public func readPlaceholder(_ relative: String) throws(FileProviderError) -> PlaceholderMetadata {
        PoolCheck.note()
        let target = placeholderPath(relative)
        guard let data = FileManager.default.contents(atPath: target) else {
            throw FileProviderError(.noSuchItem, "no placeholder at \(target)")
        }
        return try PlaceholderMetadata.read(from: data)
    }

    /// Removes a file; a missing file is fine.
    public func removeFile(atPath target: String) throws(FileProviderError) {
        PoolCheck.note()
        if unlink(target) == 0 || errno == ENOENT { return }
        throw POSIXError.error("cannot remove", path: target)
    }

    /// Removes an empty folder. Returns false when it holds something (nothing is removed).
    public func removeFolderIfEmpty(_ relative: String) throws(FileProviderError) -> Bool {
        PoolCheck.note()
        let target = path(relative)
        if rmdir(target) == 0 || errno == ENOENT { return true }
        if errno == ENOTEMPTY || errno == EEXIST { return false }
        throw POSIXError.error("cannot remove folder", path: target)
    }

    /// Renames within the replica, refusing to replace an existing target.
    /// - Throws: `filenameCollision` when the target exists.
    public func move(fromPath source: String, toPath target: String) throws(FileProviderError) {
        PoolCheck.note()
        if SystemCalls.renameNoReplace(source, target) != 0 { throw POSIXError.error("cannot move \(source) to", path: target) }
    }

    /// Renames, replacing the target.
    public func replace(fromPath source: String, toPath target: String) throws(FileProviderError) {
        PoolCheck.note()
        try POSIXError.check(rename(source, target), "cannot move \(source) to", path: target)
    }

    /// The fingerprint of a path (not following a final symlink), or `nil` when nothing is there.
    /// A file time in nanoseconds since 1970; a time past what 64 bits hold (after 2262 or
    /// before 1678: `touch` can set one) is held at the limit, never an overflow.
    package static func nanoseconds(_ time: timespec) -> Int64 {
        let (seconds, overflow) = Int64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return time.tv_sec < 0 ? .min : .max }
        let (total, over) = seconds.addingReportingOverflow(Int64(time.tv_nsec))
        return over ? .max : total
    }

    public func fingerprint(atPath target: String) -> FileFingerprint? {
        PoolCheck.note()
        var info = stat()
        guard lstat(target, &info) == 0 else { return nil }
        return Self.fingerprint(info)
    }

    /// The inode number of what `info` describes as the database keeps it: its bit pattern, as
    /// NFS, CIFS and FUSE file systems hand out 64-bit numbers with the top bit set.
    static func inode(_ info: stat) -> Int64 { Int64(bitPattern: UInt64(info.st_ino)) }

    /// The fingerprint of what `info` describes (its inode number as ``inode(_:)`` keeps it).
    static func fingerprint(_ info: stat) -> FileFingerprint {
        FileFingerprint(
            size: Int64(info.st_size),
            modificationNanos: nanoseconds(info.st_mtim),
            inode: inode(info),
            isRegularFile: (info.st_mode & S_IFMT) == S_IFREG,
            isDirectory: (info.st_mode & S_IFMT) == S_IFDIR,
            isSymlink: (info.st_mode & S_IFMT) == S_IFLNK,
            permissions: UInt32(info.st_mode & 0o7777))
    }

    /// Gives the file at `target` the x bits its item's flags ask for (``FileSystemFlags/applied(toMode:)``),
    /// from its `current` permission bits; nothing when they are already so. The file's size,
    /// date and inode stay (its fingerprint). Blocking.
    /// - Throws: `localIOFailure` naming the file when its mode cannot be set.
    public func applyFlags(_ flags: FileSystemFlags, toPath target: String, current: UInt32) throws(FileProviderError) {
        PoolCheck.note()
        let wanted = flags.applied(toMode: current & 0o7777)
        guard wanted != current & 0o7777 else { return }
        try POSIXError.check(chmod(target, mode_t(wanted)), "cannot set the mode of", path: target)
    }

    /// Sets a file's modification date.
    public func setModificationDate(_ date: Date, atPath target: String) throws(FileProviderError) {
        try setModificationDate(date, of: StagedFile(path: target))
    }

    /// Sets a file's modification date, through its folder's descriptor when it has one.
    func setModificationDate(_ date: Date, of file: StagedFile) throws(FileProviderError) {
        PoolCheck.note()
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let nanos = Int((date.timeIntervalSince1970 - seconds) * 1e9)
        var times = [timespec(tv_sec: Int(seconds), tv_nsec: nanos), timespec(tv_sec: Int(seconds), tv_nsec: nanos)]
        times[0].tv_nsec = SystemCalls.omitTime
        let done =
            file.folder.map { utimensat($0, file.name, &times, AT_SYMLINK_NOFOLLOW) }
            ?? utimensat(AT_FDCWD, file.path, &times, AT_SYMLINK_NOFOLLOW)
        try POSIXError.check(done, "cannot set the date of", path: file.path)
    }

    /// The fingerprint of a file, looked up through its folder's descriptor when it has one.
    func fingerprint(of file: StagedFile) -> FileFingerprint? {
        guard let folder = file.folder else { return fingerprint(atPath: file.path) }
        PoolCheck.note()
        var info = stat()
        guard fstatat(folder, file.name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return Self.fingerprint(info)
    }

    /// ``move(fromPath:toPath:)`` of a file looked up through its folder's descriptor when it
    /// has one.
    /// - Throws: `filenameCollision` when the target exists.
    func move(_ file: StagedFile, toPath target: String) throws(FileProviderError) {
        try move(file, toPath: target, into: nil)
    }

    /// ``move(_:toPath:)`` with the target's folder open as `into.folder` (the target named
    /// `into.name` in it): only the two names are looked up, not the target's whole path.
    /// - Throws: `filenameCollision` when the target exists.
    func move(_ file: StagedFile, toPath target: String, into: (folder: Int32, name: String)?) throws(FileProviderError) {
        guard let folder = file.folder else { return try move(fromPath: file.path, toPath: target) }
        PoolCheck.note()
        let done =
            into.map { SystemCalls.renameNoReplace(inFolder: folder, file.name, toFolder: $0.folder, $0.name) }
            ?? SystemCalls.renameNoReplace(inFolder: folder, file.name, to: target)
        if done != 0 { throw POSIXError.error("cannot move \(file.path) to", path: target) }
    }

    /// The size of a file, or `nil` when it does not exist.
    public func fileSize(atPath target: String) -> Int64? { fingerprint(atPath: target)?.size }

    /// Where the staging file `name` goes: in one of 16 folders inside `staging`, picked by a
    /// hash of the name (the same name always goes to the same folder, so a download resumes).
    ///
    /// Creating a file holds its folder's lock while the file system looks for a free inode.
    /// On ext4 without a journal that search steps over every inode freed in the last minute or
    /// more, so after a large deletion one create can take hundreds of microseconds; with a
    /// single folder, downloads running at once waited for each other there (and spun on the
    /// lock), leaving one core for the transfers and the server.
    public func stagingPath(named name: String) -> String {
        var hash: UInt32 = 0x811c_9dc5
        for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
        return stagingFolder + "/" + String(hash % 16, radix: 16) + "/" + name
    }

    /// The staging files present (absolute paths), in `staging` and its folders.
    public func stagedFiles() -> [String] {
        PoolCheck.note()
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: staging.path) else { return [] }
        var files: [String] = []
        for name in names {
            let path = staging.path + "/" + name
            if let inside = try? FileManager.default.contentsOfDirectory(atPath: path) {
                files += inside.map { path + "/" + $0 }
            } else {
                files.append(path)
            }
        }
        return files
    }

    /// Removes the staging copies that replays download to compare with a local file
    /// (`*.compare`): only a process killed while comparing leaves one behind.
    public func removeComparisonCopies() {
        PoolCheck.note()
        for path in stagedFiles() where path.hasSuffix(".compare") { unlink(path) }
    }

    /// Moves a staging file to another place in `staging` (making its folder); does nothing
    /// when `source` is not a file in `staging` or is missing.
    /// - Throws: `localIOFailure` when the file is there but cannot be moved.
    public func moveStagingFile(from source: String, to target: String) throws(FileProviderError) {
        PoolCheck.note()
        guard source.hasPrefix(staging.path + "/"), !source.contains("/../"), source != target,
            fingerprint(atPath: source)?.isRegularFile == true
        else { return }
        try makeStagingFolder(holding: target)
        try replace(fromPath: source, toPath: target)
    }

    /// Makes the folder of `target` (a path from ``stagingPath(named:)``) when it is missing.
    /// - Throws: `localIOFailure` naming the folder when it cannot be made.
    func makeStagingFolder(holding target: String) throws(FileProviderError) {
        let folder = String(target[..<(target.lastIndex(of: "/") ?? target.endIndex)])
        if mkdir(folder, 0o755) != 0 && errno != EEXIST {
            throw POSIXError.error("cannot create the staging folder", path: folder)
        }
    }

    /// Creates (or truncates, with `truncate`) the staging file at `target` (from
    /// ``stagingPath(named:)``), making its folder first when it is missing.
    /// - Throws: `localIOFailure` naming the file when it cannot be created.
    public func prepareStagingFile(atPath target: String, truncate: Bool) throws(FileProviderError) {
        PoolCheck.note()
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0)
        var fd = open(target, flags, 0o644)
        if fd < 0 && errno == ENOENT {
            try makeStagingFolder(holding: target)
            fd = open(target, flags, 0o644)
        }
        if fd < 0 { throw POSIXError.error("cannot create staging file", path: target) }
        close(fd)
    }

    /// Writes all of `bytes` to `fd`.
    /// - Throws: `localIOFailure` naming `path`.
    func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(FileProviderError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXError.error("cannot write", path: path)
            }
            offset += written
        }
    }
}
