import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

extension Downloader {
    /// Fetches bytes `range` of an item's dataless file into it, where it stands (progressive
    /// hydration), and puts the file's modification date back to the item's. The bytes are
    /// written but not flushed nor recorded: ``recordRanges(_:of:)`` does that.
    /// - Returns: the range written (`range` clamped to the item's size).
    /// - Throws: `noSuchItem` when the file at the item's path is not its dataless file;
    ///   `versionNoLongerAvailable` when the store has another version than the record's; what
    ///   the backend throws (`fileWriteOutOfSpace` for a full disk).
    func fetchRange(_ range: Range<Int64>, of record: ItemRecord) async throws(FileProviderError) -> Range<Int64> {
        let replica = self.replica
        let target = replica.path(record.path)
        let isOurs = try await executor.run { replica.isPlaceholder(of: record.identifier, at: record.path) }
        guard isOurs else {
            throw FileProviderError(.noSuchItem, "\(display(record.path)) is no longer the item's dataless file; sync again")
        }
        let written = try await backend.fetchPartialContents(
            for: record.identifier, version: record.version, range: range, into: URL(fileURLWithPath: target, isDirectory: false))
        let domain = domainName
        try await executor.run {
            // Before the date: the hydrator takes the change time the date leaves as its own.
            ReplicaStatus.partial.write(atPath: target, domain: domain)
            if let date = record.modificationDate { try replica.setModificationDate(date, atPath: target) }
        }
        return written.range
    }

    /// Writes zeros over `range` (a few KiB) of an item's dataless file: the data block that
    /// starts a missing region (see ``ProgressiveHydrator``). Not recorded as present. Never
    /// into a file that is no longer the item's dataless file (completed meanwhile: those bytes
    /// are contents now).
    /// - Throws: `noSuchItem` when the file is no longer the item's dataless file;
    ///   `localIOFailure` (`fileWriteOutOfSpace`) when the file cannot be written.
    func writeMarker(_ range: Range<Int64>, of record: ItemRecord) async throws(FileProviderError) {
        let target = replica.path(record.path)
        let replica = self.replica
        let display = self.display(record.path)
        try await executor.run {
            let fd = open(target, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { throw POSIXError.error("cannot open", path: target) }
            defer { close(fd) }
            guard let state = Replica.datalessState(ofDescriptor: fd), state.key == PlaceholderOwner.key(record.identifier.rawValue) else {
                throw FileProviderError(.noSuchItem, "\(display) is no longer the item's dataless file; sync again")
            }
            defer { if let date = record.modificationDate { try? replica.setModificationDate(date, atPath: target) } }
            try Replica.writeZeros(fd, range, path: target, "cannot write a marker block into")
        }
    }

    /// Records ranges of an item's partially present file once they are on disk: flushes the
    /// file (`fdatasync`), then writes the ranges in one transaction, only while the item still
    /// has the record's content version. Blocking parts through the executor.
    /// - Returns: the item's present ranges as recorded, or `nil` when the item changed (its
    ///   ranges are then not recorded: they are of an older version).
    /// - Throws: `localIOFailure` when the file cannot be flushed or the database written.
    func recordRanges(_ ranges: [Range<Int64>], of record: ItemRecord) async throws(FileProviderError) -> [Range<Int64>]? {
        let target = replica.path(record.path)
        let store = self.store
        let domainID = self.domainID
        return try await executor.run { () throws(FileProviderError) -> [Range<Int64>]? in
            let fd = open(target, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { throw POSIXError.error("cannot open to flush", path: target) }
            defer { close(fd) }
            _ = try POSIXError.check(fdatasync(fd), "cannot flush", path: target)
            var result: [Range<Int64>]?
            // A range punched out since it was fetched (an eviction) is not recorded: it holds
            // zeros now.
            for range in ranges where Replica.holdsData(descriptor: fd, range) {
                result = try store.addPresentRange(
                    range, domainID: domainID, identifier: record.identifier, contentVersion: record.contentVersion)
                if result == nil { return nil }
            }
            return result
        }
    }

    /// Turns an item's partially present file whose every byte is present into a downloaded
    /// file: flushed, dated, marked as the engine's download, the dataless mark removed last,
    /// recorded as materialized and its ranges forgotten. `modifiedLocally`: a program wrote
    /// into it while it was partial, so it is recorded as an edit to send (its contents are not
    /// the store's). `changeTime`: the file's change time after the engine's last write into
    /// it (``ProgressiveHydrator``'s), or `nil` when unknown: a file changed since, or of another
    /// size than the item's, was written by a program whose write was not reported yet, and is
    /// recorded as an edit too.
    /// - Throws: `localIOFailure` when the file cannot be flushed or marked, or the database
    ///   written; `noSuchItem` when the file is no longer the item's dataless file;
    ///   `cannotSynchronize` when a program has it open for writing (and `modifiedLocally` is
    ///   false: what it writes would pass for the store's bytes).
    func completePartial(_ record: ItemRecord, modifiedLocally reported: Bool, changeTime: Int64? = nil)
        async throws(FileProviderError) -> ItemRecord
    {
        let replica = self.replica
        let target = replica.path(record.path)
        let completion = try await executor.run { () throws(FileProviderError) -> PartialCompletion in
            var modifiedLocally = reported
            guard replica.isPlaceholder(of: record.identifier, at: record.path) else {
                throw FileProviderError(.noSuchItem, "\(self.display(record.path)) is no longer the item's dataless file")
            }
            let fd = open(target, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { throw POSIXError.error("cannot open to flush", path: target) }
            defer { close(fd) }
            if !modifiedLocally {
                // No program may write while the file is recorded as the store's bytes: a write
                // between the flush and the fingerprint would pass for the store's contents and
                // never be sent. A read lease is granted only while nothing has the file open for
                // writing, and holds back any open for writing until it is released (the
                // descriptor's close, below). Where leases are not available, as before.
                if SystemCalls.takeReadLease(fd) != 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    throw FileProviderError(
                        .cannotSynchronize,
                        "\(self.display(record.path)) is open for writing; it is completed when the program is done with it")
                }
                // A program that wrote and closed the file before the lease, whose write the
                // event thread has not reported yet (`>>` right after its open returned): the
                // file is longer or shorter than the item, or changed after the engine's last
                // write. Its bytes are an edit, never the store's.
                var status = stat()
                if fstat(fd, &status) == 0 {
                    let changed = changeTime ?? Int64.max
                    let now = ProgressiveHydrator.changeTime(status)
                    if Int64(status.st_size) != record.size || now > changed {
                        modifiedLocally = true
                        self.context.logger.info(
                            "\(self.display(record.path)): changed by a program before it was completed (\(status.st_size) bytes of \(record.size); change time \(now), the engine's last write \(changed)): recorded as an edit"
                        )
                    }
                }
            }
            _ = try POSIXError.check(fdatasync(fd), "cannot flush", path: target)
            if !modifiedLocally, let date = record.modificationDate { try replica.setModificationDate(date, atPath: target) }
            guard let print = replica.fingerprint(atPath: target) else {
                throw FileProviderError(.localIOFailure, "\(target) vanished while it was completed")
            }
            if !modifiedLocally { self.note([(StagedFile(path: target), record.item, print)]) }
            let status =
                modifiedLocally
                ? ReplicaStatus.unsent
                : ReplicaStatus.downloaded(path: record.path, own: record.contentPolicy, store: self.store, domainID: self.domainID)
            status.write(atPath: target, domain: self.domainName)
            try Self.clearDataless(atPath: target)
            return PartialCompletion(print: print, modifiedLocally: modifiedLocally)
        }
        let (print, modifiedLocally) = (completion.print, completion.modifiedLocally)
        var updated = record
        updated.markMaterialized(contentVersion: record.contentVersion, fingerprint: print)
        // An edit: the next scan finds the fingerprint off and sends the contents.
        if modifiedLocally { updated.markContentsPending() }
        updated.lastError = nil
        let store = self.store
        let domainID = self.domainID
        let completed = updated
        try await executor.run {
            try store.apply(domainID: domainID, upserts: [completed], deletions: [])
            try store.removePresentRanges(domainID: domainID, identifier: completed.identifier)
        }
        return updated
    }

    /// Gives back the blocks of an item's dataless file that hold bytes of another content
    /// version than the record's, and forgets their ranges: the item changed in the store since
    /// they were fetched. Nothing happens when no stale ranges are recorded.
    /// - Throws: `localIOFailure` when the file cannot be punched or the database written.
    func dropStaleRanges(of record: ItemRecord) async throws(FileProviderError) {
        let replica = self.replica
        let store = self.store
        let domainID = self.domainID
        let target = replica.path(record.path)
        try await executor.run {
            let bytes = try store.presentBytes(domainID: domainID, identifier: record.identifier) ?? 0
            let current = try store.presentRanges(
                domainID: domainID, identifier: record.identifier, contentVersion: record.contentVersion)
            guard bytes > 0, current.isEmpty, replica.isPlaceholder(of: record.identifier, at: record.path) else { return }
            let fd = open(target, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { throw POSIXError.error("cannot reopen", path: target) }
            defer { close(fd) }
            var status = stat()
            _ = try POSIXError.check(fstat(fd, &status), "cannot read the size of", path: target)
            if status.st_size > 0 { try Replica.punchContents(fd, size: Int64(status.st_size), path: target) }
            if let date = record.modificationDate { try replica.setModificationDate(date, atPath: target) }
            try store.removePresentRanges(domainID: domainID, identifier: record.identifier)
        }
    }
}

/// What completing a partially present file found: its fingerprint, and whether a program's
/// bytes are in it (an edit to send).
private struct PartialCompletion: Sendable {
    var print: FileFingerprint
    var modifiedLocally: Bool
}
