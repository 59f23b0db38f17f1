import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A FUSE domain's replica path while `serve` runs: a ``ReplicaFileSystem`` over the domain's
/// backing folder, mounted on the replica folder (``DomainRecord/replicaPath``) through libfuse
/// (``FUSESession``; an ordinary user mounts through `fusermount3`, and `auto_unmount` takes
/// the mount away however `serve` ends). Without it the replica folder is an empty folder.
///
/// After each sync, ``refresh()`` tells the kernel what the engine changed in the backing
/// folder behind it (items added, removed, replaced, downloaded, evicted): its caches of names,
/// attributes and pages are long-lived otherwise.
public final class FUSEReplicaMount: Sendable {
    /// Told of each folder a program opens through a mount: the domain, the folder's relative
    /// path, the program's process and user. Called on the FUSE session's threads, during
    /// `opendir`: it must return at once.
    public typealias FolderOpened = @Sendable (_ domain: String, _ path: String, _ process: Int32, _ user: UInt32) -> Void

    /// The domain's name.
    public let domain: String
    let session: FUSESession
    let fileSystem: ReplicaFileSystem
    let logger: Logger

    private init(domain: String, session: FUSESession, fileSystem: ReplicaFileSystem, logger: Logger) {
        self.domain = domain
        self.session = session
        self.fileSystem = fileSystem
        self.logger = logger
    }

    /// Mounts every FUSE domain of `records` (the others are left alone), each recording the
    /// changes programs make in its feed of `feeds` (by domain name; a new one where none is
    /// given); on a failure the mounts made are taken away again. `folderOpened` is told of the
    /// folders programs open.
    /// - Throws: what ``mount(_:manager:feed:logger:folderOpened:)`` throws, naming the domain.
    public static func mountAll(
        _ records: [DomainRecord], manager: ProviderManager, feeds: [String: ReplicaChangeFeed] = [:], logger: Logger,
        folderOpened: FolderOpened? = nil
    ) async throws(FileProviderError) -> [FUSEReplicaMount] {
        var mounts: [FUSEReplicaMount] = []
        for record in records where ReplicaLayouts.layout(of: record).mountsThroughFUSE {
            do {
                mounts.append(
                    try await mount(
                        record, manager: manager, feed: feeds[record.name] ?? ReplicaChangeFeed(), logger: logger,
                        folderOpened: folderOpened))
            } catch {
                await unmountAll(mounts)
                throw FileProviderError(error.code, "cannot serve \(record.name)'s files through FUSE: \(error.message)")
            }
        }
        return mounts
    }

    /// Unmounts each of `mounts` (programs that still have files open keep them until they
    /// close them; later accesses find the empty replica folder).
    public static func unmountAll(_ mounts: [FUSEReplicaMount]) async {
        for mount in mounts { await mount.unmount() }
    }

    /// Mounts a FUSE domain's backing folder on its replica folder; every change programs make
    /// through it is recorded in `feed` before the reply that makes it visible.
    /// - Throws: `invalidArgument` when the domain is not a FUSE domain, or its replica folder is
    ///   not empty or is a mount point already; `notSupported` when libfuse, `/dev/fuse` or
    ///   `fusermount3` is missing; `permissionDenied` when this user cannot use `/dev/fuse`
    ///   (each message says what to do: ``FUSESession/mount(_:at:options:)``).
    public static func mount(
        _ record: DomainRecord, manager: ProviderManager, feed: ReplicaChangeFeed, logger: Logger, folderOpened: FolderOpened? = nil
    ) async throws(FileProviderError) -> FUSEReplicaMount {
        guard ReplicaLayouts.layout(of: record).mountsThroughFUSE, let id = record.id, let backing = try manager.backingURL(of: record)
        else {
            throw FileProviderError(.invalidArgument, "\(record.name) is not a domain served through FUSE")
        }
        // Progressive hydration needs ranged reads from the store.
        let ranged = (try? await manager.controller(for: record.name))?.backend.capabilities.supportsRangedReads ?? false
        let hydration: Hydration = record.hydration == .progressive && ranged ? .progressive : .full
        let fetcher = ReplicaFetcher(manager: manager, domain: record.name, domainID: id, hydration: hydration, logger: logger)
        let fileSystem = ReplicaFileSystem(
            backing: backing.path, fetcher: fetcher, gate: AccessGate(manager: manager), feed: feed, logger: logger,
            folderOpened: folderOpened)
        let options = {
            var options = FUSEMountOptions(name: record.name)
            // Writes go to the backing files, whose file system clears set-ID bits and
            // capabilities as for any writer: the kernel need not ask `security.capability`
            // before every write.
            options.handlesKillPrivileges = true
            return options
        }()
        let replicaPath = record.replicaPath
        let session = try await manager.blocking { () throws(FileProviderError) -> FUSESession in
            try? FileManager.default.createDirectory(atPath: replicaPath, withIntermediateDirectories: true)
            return try FUSESession.mount(fileSystem, at: replicaPath, options: options)
        }
        let how = hydration == .progressive ? "progressive hydration" : "whole files"
        let fallback = record.hydration == .progressive && !ranged ? " (its store has no ranged reads)" : ""
        logger.info("\(record.name): files on access through FUSE at \(replicaPath) (backing folder \(backing.path)), \(how)\(fallback)")
        return FUSEReplicaMount(domain: record.name, session: session, fileSystem: fileSystem, logger: logger)
    }

    /// Unmounts (on the engine's threads: `fusermount3` runs), once the folder read-ahead
    /// started no more batches and the running ones finished (programs may wait on them).
    public func unmount() async {
        await fileSystem.fetcher.readAhead.stop()
        let session = self.session
        do { try await fileSystem.fetcher.manager.executor.runEvenIfCancelled { session.unmount() } } catch {
            // The executor is shut down (serve is ending): unmounted here rather than left.
            session.unmount()
        }
        await fileSystem.gate.flush()
        logger.info("\(domain): FUSE mount at \(session.mountPoint) taken away")
    }

    /// Tells the kernel what changed since it was last told, for every inode it holds: a name
    /// gone, a file replaced by another (eviction, a new version: the inode gets a new
    /// generation so the kernel takes the new size), contents or attributes changed in place
    /// (its pages and attributes are dropped), a folder whose entries changed (its kept listing
    /// is dropped: a backing folder's change time moved, or a dataless folder's rows no longer
    /// give the listing the kernel took). Items of dataless folders are compared with their
    /// rows, a folder's rows read a page at a time. Call it after a sync; the cost is one
    /// `lstat` per inode the kernel holds on disk and one row per item of the dataless folders
    /// it holds. On the engine's threads, never the session's.
    public func refresh() async {
        let (fileSystem, session, logger, domain) = (self.fileSystem, self.session, self.logger, self.domain)
        _ = try? await fileSystem.fetcher.manager.executor.run {
            let told = Self.refresh(fileSystem, session)
            if told > 0 { logger.debug("\(domain): told the kernel about \(told) changed items") }
        }
    }

    /// ``refresh()``'s work; returns how many items the kernel was told about. Blocking.
    private static func refresh(_ fileSystem: ReplicaFileSystem, _ session: FUSESession) -> Int {
        let inodes = fileSystem.inodes
        var told = 0
        var storedChildren: [UInt64: [ReplicaInodes.Held]] = [:]
        var storedFolders: [ReplicaInodes.Held] = []
        for held in inodes.held() {
            if held.source == .database { storedFolders.append(held) }
            if held.inDatabase {
                storedChildren[held.parent, default: []].append(held)
                continue
            }
            var status = stat()
            let path = held.path.isEmpty ? fileSystem.backing : fileSystem.backing + "/" + String(decoding: held.path, as: UTF8.self)
            let now = lstat(path, &status) == 0 ? ReplicaInodes.Seen(status) : nil
            let changed: Bool
            let replaced: Bool
            switch (held.seen, now) {
            case (nil, nil): continue
            case (let seen?, let now?) where !seen.isOnDisk:
                // Told from the database; its folder was populated since.
                if seen.mode & UInt32(S_IFMT) == UInt32(S_IFDIR) && now.mode & UInt32(S_IFMT) == UInt32(S_IFDIR) {
                    // A folder keeps what the kernel was told (its date on disk is the
                    // population's), until its entries change on disk after the population:
                    // the first refresh takes its change time, a later one that differs tells.
                    if seen.change.tv_sec == 0 && seen.change.tv_nsec == 0 {
                        var kept = seen
                        kept.change = now.change
                        inodes.update(held.inode, seen: kept, replaced: false)
                        continue
                    }
                    // Its entries changed on disk (a sync placed or removed items): the kernel
                    // drops its kept listing, but the folder goes on answering its record's
                    // attributes (the change time a program saw stays: `tar` compares it).
                    if seen.change.tv_sec != now.change.tv_sec || seen.change.tv_nsec != now.change.tv_nsec {
                        var kept = seen
                        kept.change = now.change
                        inodes.update(held.inode, seen: kept, replaced: false)
                        try? session.invalidate(inode: held.inode)
                        told += 1
                    }
                    continue
                } else {
                    changed = seen.differs(from: now)
                    replaced =
                        seen.size != now.size && now.mode & UInt32(S_IFMT) == UInt32(S_IFREG) && !fileSystem.isBeingWritten(held.inode)
                    if !changed { inodes.update(held.inode, seen: now, replaced: false) }
                }
            case (let seen?, let now?):
                changed = seen != now
                // With the writeback cache the kernel keeps a file's size over what it is told:
                // a file whose size changed behind it (a dataless file rewritten for a new
                // version) gets a new inode there, unless a program writes it through the mount
                // (its own writes). A change of date alone drops its pages and attributes.
                replaced =
                    seen.backingInode != now.backingInode
                    || (seen.size != now.size && now.mode & UInt32(S_IFMT) == UInt32(S_IFREG) && !fileSystem.isBeingWritten(held.inode))
            default:
                changed = true
                replaced = now == nil && held.inode != 1
            }
            guard changed else { continue }
            tell(held, now: now, replaced: replaced, inodes, session)
            told += 1
        }
        let store = fileSystem.fetcher.manager.store
        let domainID = fileSystem.fetcher.domainID
        for folder in storedFolders {
            let record = (try? store.item(domainID: domainID, path: fileSystem.text(folder.path))) ?? nil
            guard let record, record.kind == .folder else { continue }  // gone: told as an item of its folder
            guard record.isDataless else {
                // Populated since (by the engine): its items are on disk now, the same names.
                inodes.setSource(folder.inode, .disk)
                continue
            }
            var held: [[UInt8]: ReplicaInodes.Held] = [:]
            for child in storedChildren[folder.inode] ?? [] { held[child.name] = child }
            var listed: [(name: [UInt8], type: Int32)] = []
            var after: String?
            var failed = false
            while true {
                guard let page = try? store.children(domainID: domainID, inFolderAt: record.path, after: after, limit: 512) else {
                    failed = true
                    break
                }
                for child in page {
                    let name = Array(child.path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last ?? [])
                    listed.append((name, ReplicaFolderReader.type(of: child.kind)))
                    guard let item = held.removeValue(forKey: name) else { continue }
                    let now = fileSystem.storedSeen(child)
                    guard let seen = item.seen, !seen.differs(from: now) else {
                        // Nothing of a dataless folder is open: a file that changed, or an item
                        // of another kind, is a new inode for the kernel.
                        let replaced =
                            item.seen.map { ($0.mode ^ now.mode) & UInt32(S_IFMT) != 0 || Self.contentsChanged($0, now) } ?? false
                        tell(item, now: now, replaced: replaced, inodes, session)
                        told += 1
                        continue
                    }
                }
                after = page.last?.path
                if page.count < 512 { break }
            }
            if failed { continue }
            for gone in held.values {
                tell(gone, now: nil, replaced: true, inodes, session)
                told += 1
            }
            if let kept = folder.listingDigest, kept != ReplicaFolderReader.digest(listed) {
                inodes.setListingDigest(folder.inode, nil)
                try? session.invalidate(inode: folder.inode)
                told += 1
            }
        }
        // The root's attributes (and kept listing) with any change.
        if told > 0 { try? session.invalidate(inode: 1) }
        return told
    }

    /// Whether a regular file's size or modification time differs between `seen` and `now`.
    private static func contentsChanged(_ seen: ReplicaInodes.Seen, _ now: ReplicaInodes.Seen) -> Bool {
        now.mode & UInt32(S_IFMT) == UInt32(S_IFREG)
            && (seen.size != now.size || seen.modification.tv_sec != now.modification.tv_sec
                || seen.modification.tv_nsec != now.modification.tv_nsec)
    }

    /// Tells the kernel `held` changed: `replaced` (or gone) drops its name, else its
    /// attributes and pages (a folder's kept listing); `now` is what it is told from now on.
    private static func tell(
        _ held: ReplicaInodes.Held, now: ReplicaInodes.Seen?, replaced: Bool, _ inodes: ReplicaInodes, _ session: FUSESession
    ) {
        if replaced {
            // The name gets a new inode number at its next lookup: the kernel keeps a cached
            // file's size (writeback cache) for as long as it holds the inode, whatever its
            // generation, and a program polling the file holds it (the old size stayed).
            inodes.update(held.inode, seen: now, replaced: true)
            inodes.detach(held.name, in: held.parent)
            try? session.invalidate(entry: FUSEName(bytes: held.name), in: held.parent)
        } else {
            inodes.update(held.inode, seen: now, replaced: false)
            try? session.invalidate(inode: held.inode)
        }
    }

    /// Whether the file at `path` (relative) is being fetched for a program now (see
    /// ``ReplicaFetcher/isFilling(_:)``). Any thread.
    public func isFilling(_ path: String) -> Bool { fileSystem.fetcher.isFilling(path) }
}
