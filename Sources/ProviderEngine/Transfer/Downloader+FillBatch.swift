import Foundation
import ProviderCore
import ProviderStore

extension Downloader {
    /// Fills several items' dataless files where they stand, as ``fillInPlace(_:)`` does for
    /// one, with the hand-offs of a batched download (``performBatch(_:report:placeholderFree:policies:)``):
    /// one job on the executor checks and marks them, the backend fetches them in one call
    /// (``Backend/fetchContents(_:progress:)``), one job checks, dates and unmarks them, and one
    /// transaction records them. In place, not renamed over: a program may open any of them
    /// meanwhile, and it must read the inode that gets the contents.
    ///
    /// For ``FolderReadAhead``, which makes sure that no other fill of these items runs (it
    /// takes only files no program asked for, and programs that ask for one of them wait for
    /// its batch). A file that is not its item's untouched dataless file any more (filled,
    /// partly present, emptied, replaced) is left alone. A failure leaves each file as it was
    /// (``restoreDataless(atPath:size:)``). Never cut short once the backend was called.
    /// Returns each record's outcome, in order: its record as filled, or the error.
    func fillInPlace(batch records: [ItemRecord]) async -> [Result<ItemRecord, FileProviderError>] {
        guard !records.isEmpty else { return [] }
        let (replica, space, store, domainID) = (self.replica, self.space, self.store, self.domainID)
        let staging = replica.staging.path
        // 1. Which files are still the items' untouched dataless files; space promised; marked
        //    as being filled.
        let prepared: [Result<SpaceReservations.Ticket, FileProviderError>]
        do {
            prepared = try await executor.run { () -> [Result<SpaceReservations.Ticket, FileProviderError>] in
                var results: [Result<SpaceReservations.Ticket, FileProviderError>?] = records.map { record in
                    let target = replica.path(record.path)
                    guard replica.isPlaceholder(of: record.identifier, at: record.path) else {
                        return .failure(FileProviderError(.noSuchItem, "\(target) is no longer the item's dataless file"))
                    }
                    // Partly present (progressive hydration): its ranges stay the hydrator's.
                    let ranges = try? store.presentRanges(
                        domainID: domainID, identifier: record.identifier, contentVersion: record.contentVersion)
                    guard ranges?.isEmpty ?? false else {
                        return .failure(FileProviderError(.cannotSynchronize, "\(target) is partly present"))
                    }
                    return nil
                }
                let wanted = records.indices.filter { results[$0] == nil }
                let tickets = space.reserve(
                    wanted.map { (records[$0].size, Self.batchStagingPath(replica, records[$0])) },
                    folder: staging)
                for (index, ticket) in zip(wanted, tickets) {
                    do throws(FileProviderError) {
                        let ticket = try ticket.get()
                        // An empty staging file to write into, as the other download paths give.
                        let staged = open(Self.batchStagingPath(replica, records[index]), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                        if staged >= 0 { close(staged) }
                        do throws(FileProviderError) {
                            try Replica.markFilling(atPath: replica.path(records[index].path))
                        } catch {
                            space.release(ticket)
                            throw error
                        }
                        results[index] = .success(ticket)
                    } catch {
                        results[index] = .failure(error)
                    }
                }
                return results.map { $0 ?? .failure(FileProviderError.notStarted) }
            }
        } catch {
            return records.map { _ in .failure(error) }
        }
        var marked: [(index: Int, ticket: SpaceReservations.Ticket)] = []
        for (index, step) in prepared.enumerated() {
            if case .success(let ticket) = step { marked.append((index, ticket)) }
        }
        func outcomes(_ placed: [Int: Result<ItemRecord, FileProviderError>]) -> [Result<ItemRecord, FileProviderError>] {
            records.indices.map { index in
                if let outcome = placed[index] { return outcome }
                if case .failure(let error) = prepared[index] { return .failure(error) }
                return .failure(FileProviderError.notStarted)
            }
        }
        if marked.isEmpty { return outcomes([:]) }
        // 2. One call of the backend for the batch, each file into itself.
        // Into staging files, never into the dataless files themselves: a backend truncates its
        // destination before it writes, and a program that stats a file the read-ahead took
        // (tar, rsync: they stat before they open) would see it empty or short.
        let requests = marked.map {
            ContentRequest(
                identifier: records[$0.index].identifier,
                destination: URL(fileURLWithPath: Self.batchStagingPath(replica, records[$0.index]), isDirectory: false))
        }
        // Each file hashed as the backend writes it (``ContentSink``).
        let sinks = requests.map { _ in FastSHA256.sink() }
        let backend = self.backend
        let fetched = await ContentSink.feeding(Dictionary(uniqueKeysWithValues: zip(requests.map(\.destination), sinks))) {
            () async -> [Result<Item, FileProviderError>] in
            await backend.fetchContents(requests, progress: nil)
        }
        let hashes = await FastSHA256.finish(sinks, fetched)
        // 3. Checked, dated, marked as downloads and unmarked; or put back as they were.
        let finished = marked
        let placed: [Int: Result<ItemRecord, FileProviderError>]
        do {
            placed = try await executor.runToCompletion { [self] () -> [Int: Result<ItemRecord, FileProviderError>] in
                var placed: [Int: Result<ItemRecord, FileProviderError>] = [:]
                // Filled and dated each; then noted as downloads together; then unmarked each.
                var filled: [(index: Int, target: String, item: Item, print: FileFingerprint, record: ItemRecord)] = []
                for (position, file) in finished.enumerated() {
                    defer { space.release(file.ticket) }
                    let record = records[file.index]
                    let target = replica.path(record.path)
                    let outcome = position < fetched.count ? fetched[position] : .failure(FileProviderError.notStarted)
                    let staged = Self.batchStagingPath(replica, record)
                    defer { unlink(staged) }
                    do throws(FileProviderError) {
                        let item = try outcome.get()
                        try checkStagedSize(staged, of: record, expected: item.size)
                        guard item.size == record.size, replica.fileSize(atPath: target) == record.size else {
                            throw FileProviderError(.cannotSynchronize, "\(display(record.path)) changed size in the store; sync again")
                        }
                        let sha256 = try checkHash(
                            of: item, staged: staged, path: record.path, streamed: position < hashes.count ? hashes[position] : nil)
                        try Self.copyInPlace(from: staged, to: target, size: item.size)
                        if let date = item.contentModificationDate { try replica.setModificationDate(date, atPath: target) }
                        guard let print = replica.fingerprint(atPath: target) else {
                            throw FileProviderError(.localIOFailure, "\(target) vanished while it was filled")
                        }
                        filled.append(
                            (file.index, target, item, print, Self.downloaded(record, as: item, fingerprint: print, sha256: sha256)))
                    } catch {
                        try? Self.restoreDataless(atPath: target, size: record.size)
                        placed[file.index] = .failure(error)
                    }
                }
                note(filled.map { (StagedFile(path: $0.target), $0.item, $0.print) })
                for file in filled {
                    do throws(FileProviderError) {
                        try Self.clearDataless(atPath: file.target)
                        placed[file.index] = .success(file.record)
                    } catch {
                        try? Self.restoreDataless(atPath: file.target, size: file.record.size)
                        placed[file.index] = .failure(error)
                    }
                }
                return placed
            }
        } catch {
            for file in finished { space.release(file.ticket) }
            return records.map { _ in .failure(error) }
        }
        // 4. One transaction for the files filled.
        let filled = placed.values.compactMap { try? $0.get() }
        if !filled.isEmpty {
            do {
                try await executor.runToCompletion { try store.apply(domainID: domainID, upserts: filled, deletions: []) }
            } catch {
                // The files are complete and marked as downloads: the next sync records them.
                return records.map { _ in .failure(error) }
            }
        }
        return outcomes(placed)
    }

    /// Where a fill in place (one file or a read-ahead batch) stages the download of `record` (the
    /// name its space was promised for). The two never fill one item at once: programs that ask
    /// for a file of a batch wait for the batch.
    static func batchStagingPath(_ replica: Replica, _ record: ItemRecord) -> String {
        replica.staging.path + "/" + stagingName(for: record.identifier) + ".fill"
    }

    /// Checks that the staged download of `record` at `staged` is as large as the store said
    /// when it sent it (`expected`). Blocking.
    /// - Throws: `corruptData` naming both sizes when it is not (or is gone).
    func checkStagedSize(_ staged: String, of record: ItemRecord, expected: Int64) throws(FileProviderError) {
        let size = replica.fileSize(atPath: staged)
        guard size == expected else {
            throw FileProviderError(
                .corruptData, "the download of \(display(record.path)) was \(size ?? 0) bytes, expected \(expected); try again")
        }
    }

    /// Writes the staged bytes over the dataless file at `target` without truncating it: its size
    /// never changes, so a program that stats it meanwhile sees the item's size. Blocking.
    ///
    /// - Throws: `localIOFailure` when either file cannot be opened, read or written.
    static func copyInPlace(from staged: String, to target: String, size: Int64) throws(FileProviderError) {
        let source = open(staged, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw FileProviderError(.localIOFailure, "cannot read \(staged): \(String(cString: strerror(errno)))") }
        defer { close(source) }
        let destination = open(target, O_WRONLY | O_CLOEXEC)
        guard destination >= 0 else {
            throw FileProviderError(.localIOFailure, "cannot write \(target): \(String(cString: strerror(errno)))")
        }
        defer { close(destination) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < size {
            let count = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, $0.count, off_t(offset)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw FileProviderError(.localIOFailure, "cannot read \(staged) at \(offset)") }
            var written = 0
            while written < count {
                let step = buffer.withUnsafeBytes {
                    pwrite(destination, $0.baseAddress! + written, count - written, off_t(offset) + off_t(written))
                }
                if step < 0 && errno == EINTR { continue }
                guard step > 0 else {
                    throw FileProviderError(.localIOFailure, "cannot write \(target): \(String(cString: strerror(errno)))")
                }
                written += step
            }
            offset += Int64(count)
        }
    }
}
