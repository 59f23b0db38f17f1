import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

extension Downloader {
    /// Fills an item's dataless file with its contents where it stands (the same inode), for a
    /// program that is reading it: a download renamed over the file would leave that program
    /// reading the old, empty inode. Dataless layout only.
    ///
    /// Where the store has ranged reads, the bytes are written once, into the file itself, as
    /// progressive hydration writes its ranges (``Backend/fetchPartialContents(for:version:range:into:)``
    /// of the whole file, of the record's content version: positioned writes that never
    /// truncate, so the file keeps the item's size throughout), hashed as they are written.
    /// Otherwise, or when the store has another version than the record's, the download is
    /// staged and then written over the file.
    ///
    /// The file stays marked dataless (marked as being filled) until its contents are complete,
    /// checked (size, the store's hash), dated and noted as the engine's download, so a crash or a
    /// failure never leaves a file that looks downloaded but is not: a failure gives the
    /// written blocks back and the file is as it was (the next access tries again); a crash
    /// leaves it marked dataless with some blocks written, which nothing takes for contents (no
    /// range of it is recorded as present) and the next fill writes over. The item is recorded
    /// as materialized once the file is complete. Concurrent fills of one item share one
    /// download.
    /// - Throws: `noSuchItem` when the file at the item's path is not its dataless file;
    ///   `fileWriteOutOfSpace` when it does not fit beside the reserve; what the backend
    ///   throws; `corruptData` when the store sent another size than it announced, or bytes that
    ///   do not match the content hash it sent (twice: a mismatch is fetched once more).
    func fillInPlace(_ record: ItemRecord) async throws(FileProviderError) -> ItemRecord {
        do {
            return try await startFill(record).task.value
        } catch {
            throw FileProviderError.wrap(error)
        }
    }

    /// Starts the fill of `record`'s dataless file in place, or joins the one under way (as
    /// ``fillInPlace(_:)``, which awaits its task): its task, which throws what
    /// ``fillInPlace(_:)`` throws, and how far it has written the file, for a reader that may
    /// read the bytes written before the fill ends (``FillWatermark``).
    func startFill(_ record: ItemRecord) -> (task: Task<ItemRecord, any Error>, watermark: FillWatermark) {
        let key = ItemIdentifier("fill:" + record.identifier.rawValue)
        return fills.withLock { map in
            if let running = map[key] {
                joinedFills.withLock { $0 += 1 }
                return running
            }
            let watermark = FillWatermark()
            let task = Task { [self] () async throws -> ItemRecord in
                defer {
                    _ = self.fills.withLock { $0.removeValue(forKey: key) }
                    watermark.end()
                }
                return try await self.performFillOnceMore(record, watermark: watermark)
            }
            map[key] = (task, watermark)
            return (task, watermark)
        }
    }

    /// ``performFill(_:watermark:)``, and once more after a download that did not match the
    /// store's hash (never placed), then recorded on the item. Only the first try moves
    /// `watermark`: the failed one revoked it.
    private func performFillOnceMore(_ record: ItemRecord, watermark: FillWatermark) async throws(FileProviderError) -> ItemRecord {
        do {
            return try await performFill(record, watermark: watermark)
        } catch  where HashMismatch.isMismatch(error) {
            context.logger.warning("\(error.message); fetching it once more")
            do {
                return try await performFill(record, watermark: nil)
            } catch  where HashMismatch.isMismatch(error) {
                await recordMismatch(error, of: record)
                throw error
            }
        }
    }

    /// Fills the file in place from a ranged read where the store has them (falling back to a
    /// staged download when the store has another version, or refuses ranged reads after
    /// all), else from a staged download.
    private func performFill(_ record: ItemRecord, watermark: FillWatermark?) async throws(FileProviderError) -> ItemRecord {
        let replica = self.replica
        let isOurs = try await executor.run { replica.isPlaceholder(of: record.identifier, at: record.path) }
        guard isOurs else {
            throw FileProviderError(.noSuchItem, "\(display(record.path)) is no longer the item's dataless file; sync again")
        }
        if backend.capabilities.supportsRangedReads && record.size > 0 {
            do {
                return try await performRangedFill(record, watermark: watermark)
            } catch  where error.code == .versionNoLongerAvailable || error.code == .notSupported {
                // Changed in the store since the last sync (its size may differ): the staged
                // download takes what the store has now.
                context.logger.debug("\(display(record.path)): \(error.message); filled from a staged download instead")
            }
        }
        return try await performStagedFill(record)
    }

    /// Writes the whole file into itself with one ranged read of the record's content version,
    /// hashed as it is written (``ContentSink``), then checks, dates, marks and records it. A
    /// failure punches out what was written and leaves the file dataless. `watermark` follows
    /// the bytes written without a gap (the sink's), and is revoked before a failure punches.
    /// - Throws: what ``fillInPlace(_:)`` throws; `versionNoLongerAvailable` when the store has
    ///   another version (nothing was written then, or it was given back).
    private func performRangedFill(_ record: ItemRecord, watermark: FillWatermark?) async throws(FileProviderError) -> ItemRecord {
        let replica = self.replica
        // The bytes go into the item's own file; the promise is held under the name a staged
        // fill would use (nothing is created there), so that the space is counted.
        let fill = try await reserveFill(record) { fill throws(FileProviderError) in try Replica.markFilling(atPath: fill.target) }
        defer { fill.release() }
        let target = fill.target
        let sink = FastSHA256.sink()
        if let watermark { sink.observeContiguous { watermark.advance(to: $0) } }
        let destination = URL(fileURLWithPath: target, isDirectory: false)
        let backend = self.backend
        let written: PartialContents
        do {
            written = try await ContentSink.feeding([destination: sink]) { () async throws(FileProviderError) -> PartialContents in
                try await backend.fetchPartialContents(
                    for: record.identifier, version: record.version, range: 0..<record.size, into: destination)
            }
        } catch {
            sink.cancel()
            // Cut short (a reset connection, a short or lying reply, a full disk): what was
            // written is given back, the file is dataless as before.
            let reported = try? await executor.run { () throws(FileProviderError) -> FileProviderError in
                watermark?.revoke()
                try Self.restoreDataless(atPath: target, size: record.size)
                return fill.reported(error)
            }
            throw reported ?? error
        }
        let item = written.item
        let streamed = await sink.finish(size: item.size)
        let (print, sha256) = try await executor.runToCompletion { () throws -> (FileFingerprint, String?) in
            do {
                guard item.size == record.size, written.range == 0..<record.size,
                    replica.fileSize(atPath: target) == record.size
                else {
                    throw FileProviderError(
                        .corruptData,
                        "the download of \(self.display(record.path)) wrote \(written.range.count) bytes of \(item.size), expected \(record.size); try again"
                    )
                }
                let sha256 = try self.checkHash(of: item, staged: target, path: record.path, streamed: streamed)
                if let date = item.contentModificationDate { try replica.setModificationDate(date, atPath: target) }
                return (try self.markFilled(record, item), sha256)
            } catch {
                watermark?.revoke()
                try Self.restoreDataless(atPath: target, size: record.size)
                throw error
            }
        }
        return try await recordFill(record, item, print: print, sha256: sha256)
    }

    /// Promises the space of filling `record`'s dataless file and runs `prepare`, in one job on
    /// the executor (``FillSpace/reserve(for:in:space:prepare:)``): the start both fills share.
    /// - Throws: `fileWriteOutOfSpace` when the file does not fit beside the reserve; what
    ///   `prepare` throws (the space is given back then); `cancelled`.
    private func reserveFill(
        _ record: ItemRecord, prepare: @escaping @Sendable (FillSpace) throws(FileProviderError) -> Void
    ) async throws(FileProviderError) -> FillSpace {
        let (replica, space) = (self.replica, self.space)
        return try await executor.run { () throws(FileProviderError) in
            try FillSpace.reserve(for: record, in: replica, space: space, prepare: prepare)
        }
    }

    /// Writes the record of a filled file: materialized at the item's content version, with
    /// its fingerprint and hash.
    /// - Throws: `localIOFailure` when the database cannot be written.
    private func recordFill(_ record: ItemRecord, _ item: Item, print: FileFingerprint, sha256: String?)
        async throws(FileProviderError) -> ItemRecord
    {
        let filled = Self.downloaded(record, as: item, fingerprint: print, sha256: sha256)
        let (store, domainID) = (self.store, self.domainID)
        try await executor.run { try store.apply(domainID: domainID, upserts: [filled], deletions: []) }
        return filled
    }

    /// Downloads the file into a staging file (hashed as it is written), then writes it over
    /// the dataless file: for stores without ranged reads, and items that changed in the store
    /// since the last sync (their size may differ).
    private func performStagedFill(_ record: ItemRecord) async throws(FileProviderError) -> ItemRecord {
        let replica = self.replica
        // The download is staged under the promised name; the file being filled is the item's
        // own, and nothing may remove it to make room.
        let fill = try await reserveFill(record) { fill in
            // An empty staging file to write into, as the other download paths give.
            let staged = open(fill.promised, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            if staged >= 0 { close(staged) }
        }
        defer { fill.release() }
        let (target, promised) = (fill.target, fill.promised)
        // The download goes to the promised staging file, never into the dataless file itself: a
        // backend truncates its destination before it writes, and a program that stats the file
        // meanwhile (tar and rsync stat before they open) would see it empty or short. The bytes
        // are then written over the dataless file, whose size never changes on the way.
        defer { unlink(promised) }
        let item: Item
        // Hashed as the backend writes it (``ContentSink``).
        let sink = FastSHA256.sink()
        let destination = URL(fileURLWithPath: promised, isDirectory: false)
        let backend = self.backend
        do {
            item = try await ContentSink.feeding([destination: sink]) { () async throws(FileProviderError) -> Item in
                try await backend.fetchContents(for: record.identifier, version: nil, to: destination, offset: 0, progress: nil)
            }
        } catch {
            // Its hashing thread ends now, not when the sink goes.
            sink.cancel()
            throw (try? await executor.run { fill.reported(error) }) ?? error
        }
        let streamed = await sink.finish(size: item.size)
        let (print, sha256) = try await executor.runToCompletion { () throws -> (FileFingerprint, String?) in
            try self.checkStagedSize(promised, of: record, expected: item.size)
            let sha256 = try self.checkHash(of: item, staged: promised, path: record.path, streamed: streamed)
            do {
                try Replica.markFilling(atPath: target)
                try Self.copyInPlace(from: promised, to: target, size: item.size)
                // The store's item changed size since the last sync: its bytes are the truth.
                if item.size != record.size, truncate(target, off_t(item.size)) != 0 {
                    throw POSIXError.error("cannot size", path: target)
                }
                if let date = item.contentModificationDate { try replica.setModificationDate(date, atPath: target) }
            } catch {
                try Self.restoreDataless(atPath: target, size: record.size)
                throw error
            }
            return (try self.markFilled(record, item), sha256)
        }
        return try await recordFill(record, item, print: print, sha256: sha256)
    }

    /// Marks the complete, dated file of `record` as the download of `item` (fingerprint, the
    /// database's note, status) and removes its dataless mark, last: from then on the file is
    /// contents. Returns its fingerprint. Blocking.
    /// - Throws: `localIOFailure` when the file vanished or cannot be unmarked.
    private func markFilled(_ record: ItemRecord, _ item: Item) throws(FileProviderError) -> FileFingerprint {
        let target = replica.path(record.path)
        guard let filled = replica.fingerprint(atPath: target) else {
            throw FileProviderError(.localIOFailure, "\(target) vanished while it was filled")
        }
        note([(StagedFile(path: target), item, filled)])
        ReplicaStatus.downloaded(path: record.path, own: record.contentPolicy, store: store, domainID: domainID)
            .write(atPath: target, domain: domainName)
        try Self.clearDataless(atPath: target)
        return filled
    }

    /// Puts a dataless file back as it was after a fill that failed: its size, no blocks (what
    /// was written is given back), still marked dataless. Blocking.
    static func restoreDataless(atPath path: String, size: Int64) throws(FileProviderError) {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw POSIXError.error("cannot reopen", path: path) }
        defer { close(fd) }
        _ = try POSIXError.check(ftruncate(fd, off_t(max(0, size))), "cannot size", path: path)
        try Replica.punchContents(fd, size: size, path: path)
        try Replica.markFilling(atPath: path, false)
    }

    /// Removes the dataless mark of a file whose contents are complete. Blocking.
    static func clearDataless(atPath path: String) throws(FileProviderError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw POSIXError.error("cannot reopen", path: path) }
        defer { close(fd) }
        if ExtendedAttribute.remove(Replica.datalessAttribute, of: fd) != 0 && errno != ENODATA {
            throw POSIXError.error("cannot clear the dataless mark of", path: path)
        }
    }
}
