import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

extension ProviderManager {
    /// The marker of an unfinished conversion of a domain: `<home>/conversions/<name>`, holding
    /// the target mode.
    func conversionMarkerPath(forDomainNamed name: String) -> String {
        home.appendingPathComponent("conversions/\(name)").path
    }

    /// The mode an unfinished conversion of the domain was taking it to (written before the
    /// conversion moves anything, removed once the new mode is recorded), or `nil` when none is
    /// unfinished.
    public func unfinishedConversion(ofDomainNamed name: String) -> String? {
        ConversionMarker.target(atPath: conversionMarkerPath(forDomainNamed: name))
    }

    /// Refuses engine work on a domain whose conversion did not finish: its files may be in
    /// two folders, and a scan of either would take the others for deleted.
    /// - Throws: `providerDomainTemporarilyUnavailable` saying how to finish the conversion.
    func checkNoUnfinishedConversion(_ name: String) throws(FileProviderError) {
        if let target = unfinishedConversion(ofDomainNamed: name) { throw ConversionMarker.unfinished(name, target) }
    }

    /// Converts a domain's replica to `mode`, moving its files without losing any: downloaded,
    /// pinned and edited files, conflicted copies and everything else the user put there are
    /// moved as they are (renamed, so the next sync sees the same edits against the same base
    /// versions); only placeholders change their form. To `dataless`: the replica folder's
    /// contents move into the backing folder (``backingURL(forDomainNamed:)``), each
    /// `<name>.placeholder` becomes a dataless file, and the replica folder stays empty (the
    /// mount point of `serve`). To `placeholder-files`: the backing folder's contents move into
    /// the replica folder, each dataless file becomes `<name>.placeholder`, and the backing
    /// folder is removed.
    ///
    /// `onAccess` picks how programs reach a dataless domain's files. A domain converted to
    /// dataless gets the mechanism asked for, or with ``OnAccessSelection/keep`` what
    /// ``OnAccessSelection/auto`` picks (``chooseOnAccess(_:backing:)``), recorded with the
    /// reason. A dataless domain converted to `dataless` with another mechanism moves no file:
    /// both on-access layouts keep the files in the backing folder in one form (a file not
    /// downloaded is a sparse file marked with its item; folders the database calls dataless are
    /// filled from the database by either), so only the record changes, and with it what the
    /// next `serve` mounts on the replica folder (a mount a killed `serve` left there, a dead
    /// FUSE mount or a fanotify bind mount no group guards, is detached first).
    ///
    /// Holds the domain's serve lock (no `serve` may run it) and sync lock (waiting for a
    /// running sync) throughout. The target mode is written to a marker file first: until the
    /// new mode is recorded, no engine work starts on the domain (``controller(for:)`` and syncs
    /// refuse with a message saying how to finish), and running this again after an
    /// interruption, even `kill -9`, finishes the conversion (to dataless with the mechanism
    /// recorded before anything moved, unless another is asked for). Both folders must be on
    /// one file system: files move by renaming, never by copying.
    ///
    /// A domain in `mode` already (and, for a dataless domain, on the mechanism asked for) is
    /// left as it is (``ConversionReport/unchanged``).
    /// - Throws: `providerDomainNotFound` for an unknown domain; `cannotSynchronize` while a
    ///   `serve` process serves the domain; `invalidArgument` when a conversion to the other
    ///   mode did not finish, a mechanism is asked for with `placeholderFiles`, the replica
    ///   folder and backing folder overlap each other or another domain's folders, the backing
    ///   folder holds files already, or the replica folder is still a mount point;
    ///   `notSupported` when the mechanism asked for cannot work here (fanotify: no
    ///   CAP_SYS_ADMIN, a kernel before 6.14, a file system that refuses the mark; FUSE: no
    ///   libfuse 3, `/dev/fuse` or `fusermount3`), or with ``OnAccessSelection/auto`` neither can,
    ///   or the two folders are on different file systems; `permissionDenied` when this user
    ///   cannot use `/dev/fuse`; `filenameCollision` when a file of one name is in both folders;
    ///   `localIOFailure` (or the failure's code) naming a file that cannot be moved or written;
    ///   `cancelled` when the task is cancelled while waiting for a sync.
    public func convertDomain(
        named name: String, to mode: ReplicaMode, onAccess: OnAccessSelection = .keep, events: ConversionEventHandler? = nil
    ) async throws(FileProviderError) -> ConversionReport {
        try await PoolCheck.during("convert") { () async throws(FileProviderError) -> ConversionReport in
            try await converting(named: name, to: mode, onAccess: onAccess, events: events)
        }
    }

    /// ``convertDomain(named:to:onAccess:events:)``: every database read, lock and file operation on the
    /// engine's threads.
    private func converting(
        named name: String, to mode: ReplicaMode, onAccess: OnAccessSelection, events: ConversionEventHandler?
    ) async throws(FileProviderError) -> ConversionReport {
        let markerPath = conversionMarkerPath(forDomainNamed: name)
        let home = self.home
        if mode != .dataless && onAccess != .keep {
            throw FileProviderError(
                .invalidArgument,
                "--on-access chooses how programs reach a dataless domain's files; convert to --mode dataless, or leave it out")
        }
        let serveLock = try await blocking { [self] () throws(FileProviderError) -> DomainLock in
            _ = try self.domain(named: name)
            if let pending = ConversionMarker.target(atPath: markerPath), pending != mode.rawValue {
                throw FileProviderError(
                    .invalidArgument,
                    "the conversion of domain '\(name)' to \(pending) did not finish; finish it first with 'fileproviderctl domain convert \(name) --mode \(pending)', then convert it to \(mode.rawValue)"
                )
            }
            do throws(FileProviderError) {
                return try DomainLock.acquire(home: home, domain: name)
            } catch where error.code == .cannotSynchronize {
                let who = DomainLock.holder(home: home, domain: name).map { "process \($0)" } ?? "another process"
                throw FileProviderError(
                    .cannotSynchronize,
                    "domain '\(name)' is served by \(who); stop 'fileproviderctl serve' first (a conversion moves every file serve watches), then run this command again"
                )
            }
        }
        defer { withExtendedLifetime(serveLock) {} }
        let syncLock = try await waitForSyncLock(of: name, events: events)
        defer { withExtendedLifetime(syncLock) {} }

        // Read again under the locks: another conversion may have finished meanwhile.
        let (domain, id, resumed, backing, estimated) = try await blocking {
            [self] () throws(FileProviderError) -> (DomainRecord, Int64, Bool, URL, Int) in
            let record = try self.domain(named: name)
            guard let id = record.id else { throw FileProviderError(.providerDomainNotFound, "domain \(name) has no id") }
            return (
                record, id, ConversionMarker.target(atPath: markerPath) != nil, try backingURL(forDomainNamed: name),
                try self.store.itemCount(domainID: id)
            )
        }
        let replica = URL(fileURLWithPath: domain.replicaPath)
        if !resumed && domain.replicaMode == mode {
            let root = try replicaRoot(of: domain).path
            var report = ConversionReport(domain: name, from: mode, to: mode, source: root, destination: root)
            report.unchanged = true
            if mode == .dataless {
                report.onAccessFrom = domain.onAccess
                report.onAccessTo = domain.onAccess
                report.onAccessReason = domain.onAccessReason
                if onAccess != .keep { return try await switchingOnAccess(of: domain, id: id, to: onAccess, report: report) }
            }
            return report
        }
        // How programs will reach the files of a domain made dataless: chosen (and refused where
        // it cannot work) before anything moves; a rerun keeps what the first run recorded.
        var choice: (mechanism: OnAccessMechanism, reason: String?)?
        if mode == .dataless {
            if resumed && onAccess == .keep {
                choice = (domain.onAccess, domain.onAccessReason)
            } else {
                choice = try await blocking { () throws(FileProviderError) -> (OnAccessMechanism, String?) in
                    let chosen = try Self.chooseOnAccessForConversion(onAccess.requested, backing: backing)
                    return (chosen.mechanism, chosen.reason)
                }
            }
        }
        // Read with one layout, written with the other.
        let to = ReplicaLayouts.layout(for: mode, onAccess: choice?.mechanism ?? .fanotify)
        let from = ReplicaLayouts.conversionSource(of: domain, to: to)
        let source = from.keepsFilesInBackingFolder ? backing : replica
        let destination = to.keepsFilesInBackingFolder ? backing : replica
        var report = ConversionReport(domain: name, from: from.mode, to: mode, source: source.path, destination: destination.path)
        report.resumed = resumed
        report.onAccessFrom = from.mode == .dataless ? domain.onAccess : nil
        report.onAccessTo = choice?.mechanism
        report.onAccessReason = choice?.reason ?? nil
        let folders = ConversionFolders(
            manager: self, domain: domain, layout: to, replica: replica, backing: backing, markerPath: markerPath)
        if !resumed { try await executor.run { try folders.check() } }
        if let choice {
            // Recorded before anything moves (a placeholder-files domain's record ignores it), so
            // a rerun after an interruption finishes with the same mechanism.
            let store = self.store
            try await blocking { () throws(FileProviderError) in
                try store.setOnAccess(domainID: id, choice.mechanism, reason: choice.reason)
            }
        }
        try await executor.run { try folders.prepare() }
        // An interruption stops the work at the next entry; the marker keeps the domain blocked
        // until a rerun finishes.
        let stop = Mutex(false)
        var converting = ReplicaConversion(
            domain: name, domainID: id, from: from, to: to, source: source, destination: destination, store: store, events: events,
            estimated: estimated, stopped: { stop.withLock { $0 } })
        converting.pageSize = conversionPage.withLock { $0 }
        let conversion = converting
        let started = report
        let executor = self.executor
        do {
            report = try await withTaskCancellationHandler {
                try await executor.run { () throws(FileProviderError) -> ConversionReport in
                    var report = started
                    try conversion.run(into: &report)
                    // The old folder is empty now; an old backing folder goes.
                    if source == backing && destination != backing && rmdir(backing.path) != 0 && errno != ENOENT {
                        throw POSIXError.error("cannot remove the emptied backing folder", path: backing.path)
                    }
                    return report
                }
            } onCancel: {
                stop.withLock { $0 = true }
            }
        } catch {
            throw FileProviderError.wrap(error)
        }
        // Done: recorded and finished even when an interruption comes now.
        let store = self.store
        // What a FUSE serve recorded before (ReplicaChangeFeed) says nothing of the files now.
        try await blocking { () throws(FileProviderError) in
            try store.setReplicaMode(domainID: id, mode, reason: "asked for (domain convert --mode \(mode.rawValue))")
            ReplicaChangeFeed.forget(home: home, domain: name)
        }
        let finishing = Task.detached {
            // The emptied replica folder is no replica of the domain's any more: a process that
            // still has the old mode finds it unmarked and empty and refuses to scan it.
            try await executor.run { try folders.finish() }
        }
        do { try await finishing.value } catch { throw FileProviderError.wrap(error) }
        if let controller = controllers.withLock({ $0.removeValue(forKey: name) }) { await controller.close() }
        return report
    }

    /// Moves a dataless domain to the mechanism `selection` picks, under the locks
    /// ``converting(named:to:onAccess:events:)`` holds: the files stay as they are in the
    /// backing folder, the record changes. A domain on that mechanism already is left as it is.
    /// - Throws: as ``convertDomain(named:to:onAccess:events:)``.
    private func switchingOnAccess(
        of domain: DomainRecord, id: Int64, to selection: OnAccessSelection, report: ConversionReport
    ) async throws(FileProviderError) -> ConversionReport {
        var report = report
        if case .only(let mechanism) = selection, mechanism == domain.onAccess { return report }
        let backing = try backingURL(forDomainNamed: domain.name)
        let (store, home) = (self.store, self.home)
        let chosen = try await blocking { () throws(FileProviderError) -> (mechanism: OnAccessMechanism, reason: String) in
            let chosen = try Self.chooseOnAccessForConversion(selection.requested, backing: backing)
            if chosen.mechanism == domain.onAccess { return chosen }
            try Self.freeReplicaFolder(of: domain, backing: backing)
            try store.setOnAccess(domainID: id, chosen.mechanism, reason: chosen.reason)
            // The files changed under another layout: a FUSE serve's record says nothing of them.
            ReplicaChangeFeed.forget(home: home, domain: domain.name)
            return chosen
        }
        guard chosen.mechanism != domain.onAccess else { return report }
        report.unchanged = false
        report.onAccessTo = chosen.mechanism
        report.onAccessReason = chosen.reason
        // A controller opened with the other layout must not go on.
        if let controller = controllers.withLock({ $0.removeValue(forKey: domain.name) }) { await controller.close() }
        return report
    }

    /// ``chooseOnAccess(_:backing:)`` for a conversion: a refusal says to keep the domain as it
    /// is, where `domain add` says to use placeholder-files mode.
    /// - Throws: what ``chooseOnAccess(_:backing:)`` throws.
    static func chooseOnAccessForConversion(_ requested: OnAccessMechanism?, backing: URL) throws(FileProviderError)
        -> (mechanism: OnAccessMechanism, reason: String)
    {
        do {
            return try chooseOnAccess(requested, backing: backing)
        } catch {
            throw FileProviderError(
                error.code,
                error.message.replacingOccurrences(of: OnAccessSupport.instead, with: "keep the domain as it is; nothing was changed"))
        }
    }

    /// Leaves a dataless domain's replica folder free for the other mechanism's mount: a mount
    /// a `serve` that died left there (a FUSE mount whose process is gone, a fanotify bind mount
    /// no group guards any more) is detached. Blocking; call it holding the domain's serve lock.
    /// - Throws: `invalidArgument` when the folder is still a mount point (of something else,
    ///   or one that cannot be detached), saying how to unmount it.
    static func freeReplicaFolder(of domain: DomainRecord, backing: URL) throws(FileProviderError) {
        let path = domain.replicaPath
        _ = FUSEMountCheck.detachDeadMount(at: path, subtype: FUSEMountOptions(name: domain.name).subtype)
        if ReplicaMount.isMountPoint(path) { _ = try? ReplicaMount.detachUnguarded(at: path, backing: backing.path) }
        var status = stat()
        let dead = lstat(path, &status) != 0 && (errno == ENOTCONN || errno == ECONNABORTED)
        if dead || ReplicaMount.isMountPoint(path) {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(path) is still a mount point (left by a 'serve' that was killed?); unmount it with 'fusermount3 -u \(path)' or, as root, 'umount \(path)' (the files are safe in \(backing.path)) and run this command again"
            )
        }
    }

    /// Takes a domain's sync lock, waiting while a sync holds it.
    /// - Throws: `cancelled` when the task is cancelled while waiting; `localIOFailure` when
    ///   the lock file cannot be created or locked.
    private func waitForSyncLock(of name: String, events: ConversionEventHandler?) async throws(FileProviderError) -> DomainLock {
        let wait = SyncLockWait(path: DomainLock.syncPath(home: home, domain: name), pidGrace: 0, executor: executor)
        return try await wait.lock(cancelledMessage: "stopped waiting for the sync of \(name) to finish; nothing was converted") {
            holder in events?(.waitingForSync(process: holder.process))
        }
    }
}
