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

    /// Mounts every FUSE domain of `records` (the others are left alone); on a failure the
    /// mounts made are taken away again.
    /// - Throws: what ``mount(_:manager:logger:)`` throws, naming the domain.
    public static func mountAll(_ records: [DomainRecord], manager: ProviderManager, logger: Logger) async throws(FileProviderError)
        -> [FUSEReplicaMount]
    {
        var mounts: [FUSEReplicaMount] = []
        for record in records where ReplicaLayouts.layout(of: record).mountsThroughFUSE {
            do {
                mounts.append(try await mount(record, manager: manager, logger: logger))
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

    /// Mounts a FUSE domain's backing folder on its replica folder.
    /// - Throws: `invalidArgument` when the domain is not a FUSE domain, or its replica folder is
    ///   not empty or is a mount point already; `notSupported` when libfuse, `/dev/fuse` or
    ///   `fusermount3` is missing; `permissionDenied` when this user cannot use `/dev/fuse`
    ///   (each message says what to do: ``FUSESession/mount(_:at:options:)``).
    public static func mount(_ record: DomainRecord, manager: ProviderManager, logger: Logger) async throws(FileProviderError)
        -> FUSEReplicaMount
    {
        guard ReplicaLayouts.layout(of: record).mountsThroughFUSE, let id = record.id, let backing = try manager.backingURL(of: record)
        else {
            throw FileProviderError(.invalidArgument, "\(record.name) is not a domain served through FUSE")
        }
        // Progressive hydration needs ranged reads from the store.
        let ranged = (try? await manager.controller(for: record.name))?.backend.capabilities.supportsRangedReads ?? false
        let hydration: Hydration = record.hydration == .progressive && ranged ? .progressive : .full
        let fetcher = ReplicaFetcher(manager: manager, domain: record.name, domainID: id, hydration: hydration, logger: logger)
        let fileSystem = ReplicaFileSystem(backing: backing.path, fetcher: fetcher, gate: AccessGate(manager: manager), logger: logger)
        let options = FUSEMountOptions(name: record.name)
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

    /// Tells the kernel what changed in the backing folder since it was last told, for every
    /// inode it holds: a name gone, a file replaced by another (eviction, a new version: the
    /// inode gets a new generation so the kernel takes the new size), contents or attributes
    /// changed in place (its pages and attributes are dropped). Call it after a sync; the
    /// cost is one `lstat` per inode the kernel holds. On the engine's threads, never the
    /// session's.
    public func refresh() async {
        let (fileSystem, session, logger, domain) = (self.fileSystem, self.session, self.logger, self.domain)
        _ = try? await fileSystem.fetcher.manager.executor.run {
            var told = 0
            for held in fileSystem.inodes.held() {
                var status = stat()
                let path = fileSystem.backing + "/" + String(decoding: held.path, as: UTF8.self)
                let now = lstat(path, &status) == 0 ? ReplicaInodes.Seen(status) : nil
                guard now != held.seen else { continue }
                let replaced = now == nil || held.seen.map { $0.backingInode != now?.backingInode } ?? false
                fileSystem.inodes.update(held.inode, seen: now, replaced: replaced)
                if replaced {
                    try? session.invalidate(entry: FUSEName(bytes: held.name), in: held.parent)
                } else {
                    try? session.invalidate(inode: held.inode)
                }
                told += 1
            }
            // The root's listing: the kernel keeps no listing of a folder, but its attributes.
            if told > 0 { try? session.invalidate(inode: 1) }
            if told > 0 { logger.debug("\(domain): told the kernel about \(told) changed items") }
        }
    }

    /// Whether the file at `path` (relative) is being fetched for a program now (see
    /// ``ReplicaFetcher/isFilling(_:)``). Any thread.
    public func isFilling(_ path: String) -> Bool { fileSystem.fetcher.isFilling(path) }
}
