import Foundation
import Logging
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// Progressive hydration of dataless files (Windows' progressive hydration, Apple's
/// `fetchPartialContents`): a read of bytes [a, b) fetches only the chunks that cover them
/// (``ChunkPlan``), plus read-ahead while a program reads in order, writes them into the sparse
/// file where it stands, and lets the read go on. Which ranges are present is kept here per
/// file and recorded in the database (``MetadataStore/addPresentRange(_:domainID:identifier:contentVersion:)``)
/// once their bytes are flushed, so a restart or a crash keeps what is on disk and never takes
/// a hole for contents. When every byte is present the file becomes an ordinary downloaded
/// file (``Downloader/completePartial(_:modifiedLocally:changeTime:)``).
///
/// A program that writes into a partially present file first waits for the chunks its write
/// covers (the kernel sends the write's range like a read's); once it wrote (``modified(_:)``,
/// from `FAN_MODIFY` and `FAN_CLOSE_WRITE`), the rest of the file is fetched around its bytes
/// — only ranges that are not present, which its writes never touch — and the file becomes a
/// local edit of the item.
///
/// A read of present bytes is answered from memory while the file's change time is the one
/// this hydrator last saw. Any other change time sends the read through the database: the same
/// item at the same content version keeps what is known (the change was a fetch of its own or a
/// program's write, which `FAN_MODIFY` reports); a new version or another item starts afresh.
package final class ProgressiveHydrator: Sendable {
    /// A file's identity on its file system.
    package struct FileKey: Hashable, Sendable {
        package let device: UInt64
        package let inode: UInt64

        package init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }
    }

    /// What is known of one partially present file.
    private struct State: Sendable {
        var record: ItemRecord
        var present: [Range<Int64>]
        var fetching: [UUID: (range: Range<Int64>, task: Task<Void, any Error>)] = [:]
        var plan = ChunkPlan()
        var changeTime: Int64
        var modified = false
        var completing: Task<ItemRecord, any Error>?
        /// Whether ``completing`` records the file as a program's edit.
        var completingModified = false
        var flushing = false
        var unrecorded: [Range<Int64>] = []
        /// Whether ``present`` was checked against the file's blocks since a program last
        /// opened it (see ``opened(_:)``).
        var validated = true
        /// Replaced by an entry of another version: starts no fetch any more.
        var retired = false

        var covered: [Range<Int64>] { present + fetching.values.map(\.range) }
    }

    /// A file this hydrator serves, with the downloader of its domain.
    private final class Entry: Sendable {
        let state: Mutex<State>
        let downloader: Downloader
        let key: FileKey
        init(_ state: State, downloader: Downloader, key: FileKey) {
            self.state = Mutex(state)
            self.downloader = downloader
            self.key = key
        }
    }

    private let files = Mutex<[FileKey: Entry]>([:])
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Whether bytes `range` of the file `key` are present and its state is current
    /// (`changeTime` is the file's change time now). Any thread; no system call.
    func isPresent(_ key: FileKey, range: Range<Int64>, changeTime: Int64) -> Bool {
        guard let entry = files.withLock({ $0[key] }) else { return false }
        return entry.state.withLock { state in
            // While fetches are in flight the change time moves with this hydrator's own writes:
            // it does not send every read through the database then (a sequential reader's
            // reads would each wait on it). A version change is still caught there: the next
            // fetch is of the old version, which the store refuses.
            (state.changeTime == changeTime || !state.fetching.isEmpty) && state.validated && !state.modified
                && ChunkPlan.contains(state.present, range)
                && !state.plan.wantsPlan(read: range)
        }
    }

    /// Whether the bytes `range` of the file `key` are known present, whether or not a read of
    /// them would plan a read-ahead: what a program that may not fetch (access rules,
    /// `present-only`) may read. Any thread.
    func holds(_ key: FileKey, range: Range<Int64>, changeTime: Int64) -> Bool {
        guard let entry = files.withLock({ $0[key] }) else { return false }
        return entry.state.withLock { state in
            (state.changeTime == changeTime || !state.fetching.isEmpty) && state.validated && !state.modified
                && ChunkPlan.contains(state.present, range)
        }
    }

    /// Whether bytes of the file at `path` of `domain` are being fetched (its writes are the
    /// engine's, not a program's). Any thread.
    func isFetching(domain: String, path: String) -> Bool {
        let entries = files.withLock { Array($0.values) }
        return entries.contains { entry in
            entry.downloader.domainName == domain
                && entry.state.withLock { $0.record.path == path && (!$0.fetching.isEmpty || $0.completing != nil) }
        }
    }

    /// A program opened the file `key` (`FAN_OPEN`, which the kernel queues before any of that
    /// program's accesses): the bytes known present are checked against the file's blocks at
    /// its next access. While a program has the file open nothing can punch it out (eviction
    /// takes a write lease first), so between opens what is known stays true. Any thread.
    func opened(_ key: FileKey) {
        guard let entry = files.withLock({ $0[key] }) else { return }
        entry.state.withLock { $0.validated = false }
    }

    /// Makes bytes `range` of the item's dataless file present (fetching what is missing), and
    /// starts read-ahead. Returns `true` when the file is now complete (an ordinary downloaded
    /// file: the caller may stop watching it); `false` while bytes are missing, and when every
    /// byte is present but a program has the file open for writing (it is completed as an edit
    /// once the program wrote, ``modified(_:key:changeTime:downloader:)``).
    /// - Throws: what ``Downloader/fetchRange(_:of:)`` throws; `versionNoLongerAvailable` when
    ///   the item changed meanwhile; what completing throws.
    func provide(
        _ record: ItemRecord, key: FileKey, changeTime: Int64, range: Range<Int64>, downloader: Downloader
    ) async throws(FileProviderError) -> Bool {
        let entry = try await self.entry(for: record, key: key, changeTime: changeTime, downloader: downloader)
        var first = true
        // Until the bytes are present: a fetch in flight that covered them may have held only a
        // marker block for them (see ``start(_:in:state:)``), and a store may answer a ranged
        // read with fewer bytes than asked, so look again after waiting, for as long as each look
        // finds more bytes present (a whole file filled on open needs many on a loaded machine;
        // a fixed number of looks let such an open go on with bytes missing). Eight looks in a
        // row that find nothing new give up: the access goes on and asks again.
        var lastPresent: Int64 = -1
        var stalled = 0
        while stalled < 8 {
            let bytes = entry.state.withLock { $0.present.reduce(Int64(0)) { $0 + Int64($1.count) } }
            if bytes > lastPresent {
                lastPresent = bytes
                stalled = 0
            } else {
                stalled += 1
            }
            let (waits, present, retired) = entry.state.withLock { state -> ([Task<Void, any Error>], Bool, Bool) in
                if state.retired { return ([], false, true) }
                let lower = max(0, min(range.lowerBound, state.record.size))
                let upper = max(lower, min(range.upperBound, state.record.size))
                let needed = lower..<upper
                var runs: [Range<Int64>] = []
                if first {
                    // Planned even when present: the read moves the sequence on (read-ahead).
                    let (demand, ahead) = state.plan.plan(read: range, size: state.record.size, covered: state.covered)
                    runs = demand + ahead
                } else if !ChunkPlan.contains(state.present, needed) {
                    runs = ChunkPlan.split(ChunkPlan.gaps(in: needed, excluding: state.covered))
                }
                // The markers of every run started here (read-ahead too) before the access goes on.
                let markers = runs.map { start($0, in: entry, state: &state) }
                if ChunkPlan.contains(state.present, needed) { return (markers, true, false) }
                return (markers + state.fetching.values.filter { $0.range.overlaps(needed) }.map(\.task), false, false)
            }
            // The item changed meanwhile: the entry of its new version serves the access.
            if retired { return try await provide(record, key: key, changeTime: changeTime, range: range, downloader: downloader) }
            first = false
            do {
                for task in waits { try await task.value }
            } catch {
                throw FileProviderError.wrap(error)
            }
            if present { break }
        }
        let done = entry.state.withLock { ChunkPlan.missing(size: $0.record.size, covered: $0.present).isEmpty }
        guard done else { return false }
        do {
            _ = try await self.complete(entry)
            return true
        } catch  where error.code == .cannotSynchronize {
            // Open for writing: the access may go on (its bytes are present). Said at info: a
            // whole-file reader (tar) sees the change time move when the completion comes later.
            logger.info("\(entry.downloader.domainName): \(TerminalText.quoted(record.path)): every byte present; \(error.message)")
            return false
        }
    }

    /// Handles a program's write into a partially present file: fetches the rest of it around
    /// what the program wrote and records it as a local edit of the item. Does nothing for a
    /// file this hydrator does not know and the database has no ranges of.
    /// - Throws: what fetching or completing throws (the file stays partially present, marked
    ///   modified; the next access tries again).
    func modified(_ record: ItemRecord, key: FileKey, changeTime: Int64, downloader: Downloader) async throws(FileProviderError) {
        let entry = try await self.entry(for: record, key: key, changeTime: changeTime, downloader: downloader)
        let waits = entry.state.withLock { state -> [Task<Void, any Error>] in
            state.modified = true
            for run in ChunkPlan.missing(size: state.record.size, covered: state.covered) { start(run, in: entry, state: &state) }
            return state.fetching.values.map(\.task)
        }
        do {
            for task in waits { try await task.value }
        } catch {
            throw FileProviderError.wrap(error)
        }
        _ = try await complete(entry)
    }

    /// Forgets every file of a domain (it is no longer served).
    func forget(where belongs: (ItemRecord) -> Bool) {
        files.withLock { files in
            files = files.filter { !belongs($0.value.state.withLock { $0.record }) }
        }
    }

    // MARK: State

    /// The entry of a file, loaded from the database when it is new here or changed since.
    private func entry(
        for record: ItemRecord, key: FileKey, changeTime: Int64, downloader: Downloader
    ) async throws(FileProviderError) -> Entry {
        if let entry = files.withLock({ $0[key] }) {
            // The same item at the same content version: the change was this hydrator's own
            // writes (a marker, a fetch not yet recorded here) or a program's (which `FAN_MODIFY`
            // reports): what is known stays true. Anything else is read again.
            let current = entry.state.withLock { state -> (present: [Range<Int64>], validated: Bool)? in
                guard state.record.identifier == record.identifier, state.record.contentVersion == record.contentVersion else {
                    return nil
                }
                return (state.present, state.validated)
            }
            if let (present, validated) = current {
                // Opened since the last check: something may have punched bytes out meanwhile
                // (an eviction, by this process or another); only ranges that are still data on
                // disk stay present.
                var kept = present
                if !validated {
                    let path = downloader.replica.path(record.path)
                    kept = try await downloader.executor.run { Replica.rangesHoldingData(atPath: path, present) }
                }
                entry.state.withLock { state in
                    if kept.count != present.count { state.present = MetadataStore.merged(state.present.filter { kept.contains($0) }) }
                    state.validated = true
                    state.changeTime = max(state.changeTime, changeTime)
                }
                return entry
            }
            // Another item or version: no more fetches of the old one; wait for those in flight,
            // then read it again.
            let tasks = entry.state.withLock { state in
                state.retired = true
                return Array(state.fetching.values.map(\.task))
            }
            for task in tasks { _ = try? await task.value }
        }
        try await downloader.dropStaleRanges(of: record)
        let store = downloader.store
        let domainID = downloader.domainID
        let path = downloader.replica.path(record.path)
        let replica = downloader.replica
        let present = try await downloader.executor.run { () throws(FileProviderError) -> [Range<Int64>] in
            // Completed since the access was seen (its entry went with the completion, and the
            // database forgot its ranges): a new entry would take every byte for missing and
            // write markers (zeros) over the contents.
            guard replica.isPlaceholder(of: record.identifier, at: record.path) else {
                throw FileProviderError(.noSuchItem, "\(downloader.display(record.path)) is no longer the item's dataless file")
            }
            // Only what is still data on disk: a range some path forgot to drop when it replaced
            // or punched the file must not be taken for contents.
            return Replica.rangesHoldingData(
                atPath: path,
                try store.presentRanges(domainID: domainID, identifier: record.identifier, contentVersion: record.contentVersion))
        }
        let entry = Entry(State(record: record, present: present, changeTime: changeTime), downloader: downloader, key: key)
        return files.withLock { files in
            // Another event may have loaded it meanwhile: one entry per file and version, always
            // (two would each plan fetches the other does not see, and one's marker block could
            // land on the other's bytes).
            if let other = files[key],
                other.state.withLock({ $0.record.identifier == record.identifier && $0.record.contentVersion == record.contentVersion })
            {
                return other
            }
            files[key] = entry
            return entry
        }
    }

    /// Starts fetching `run` into the file, under the state's lock.
    ///
    /// Every missing region of a partially present file starts with a block of data (zeros),
    /// as a dataless file starts with one (``Replica/writeLeadingBlock(_:size:path:)``): a copy
    /// tool that skips what `lseek(SEEK_HOLE)` calls holes (`cp`) would otherwise skip a
    /// missing region without reading a byte of it — no read, no event, zeros in the copy. With
    /// the marker it reads the block, the read's event fetches the chunk there, and the chunk's
    /// own end gets a marker in turn. So a fetch first writes a marker over its own first block
    /// (a region being fetched is still missing until its bytes land; the returned task ends
    /// once the marker is written, and the access that started the fetch waits for it), and a
    /// fetch that ends before the end of the file, where nothing is present or on its way,
    /// writes one there; it holds the marker's bytes as being fetched until then, so no other
    /// fetch writes there meanwhile.
    @discardableResult
    private func start(_ run: Range<Int64>, in entry: Entry, state: inout State) -> Task<Void, any Error> {
        let id = UUID()
        let record = state.record
        let size = record.size
        let markerEnd = min(size, run.upperBound + Int64(Replica.leadingBlock))
        let markerWanted =
            run.upperBound < size
            && !state.covered.contains { $0.lowerBound <= run.upperBound && run.upperBound < $0.upperBound }
        let held = run.lowerBound..<(markerWanted ? markerEnd : run.upperBound)
        let leading = run.lowerBound..<min(run.upperBound, run.lowerBound + Int64(Replica.leadingBlock))
        let marker = Task { () async throws in try await entry.downloader.writeMarker(leading, of: record) }
        let task = Task { [self] () async throws in
            do {
                try await marker.value
                let written = try await entry.downloader.fetchRange(run, of: record)
                var marked: Range<Int64>?
                if markerWanted, written.upperBound == run.upperBound {
                    // Up to what another fetch holds or has written since.
                    let end = entry.state.withLock { state in
                        state.covered.filter { $0 != held && $0.lowerBound >= run.upperBound }.map(\.lowerBound).min().map {
                            min($0, markerEnd)
                        } ?? markerEnd
                    }
                    if end > run.upperBound {
                        try await entry.downloader.writeMarker(run.upperBound..<end, of: record)
                        marked = run.upperBound..<end
                    }
                }
                logger.debug(
                    "\(entry.downloader.domainName): \(TerminalText.quoted(record.path)): fetched bytes \(written.lowerBound)..<\(written.upperBound) (\(written.count) bytes)"
                )
                let changeTime = try await entry.downloader.executor.run {
                    Self.changeTime(atPath: entry.downloader.replica.path(record.path))
                }
                entry.state.withLock { state in
                    state.fetching[id] = nil
                    guard state.record.version == record.version else { return }
                    state.present = MetadataStore.merged(state.present + [written])
                    state.unrecorded.append(written)
                    if let changeTime, !state.modified { state.changeTime = max(state.changeTime, changeTime) }
                    if let marked { fetchMarkerGap(marked, in: entry, state: &state) }
                }
                flush(entry)
                // Read-ahead may fetch the last bytes with no read left to notice.
                if entry.state.withLock({ $0.completing == nil && ChunkPlan.missing(size: $0.record.size, covered: $0.present).isEmpty }) {
                    completeInBackground(entry)
                }
            } catch {
                entry.state.withLock { _ = $0.fetching.removeValue(forKey: id) }
                logger.warning(
                    "\(entry.downloader.display(record.path)): bytes \(run.lowerBound)..<\(run.upperBound) not fetched: \(error)")
                throw error
            }
        }
        state.fetching[id] = (held, task)
        return marker
    }

    /// Fetches the marker block a fetch wrote after its run (`marker`) at once, under the
    /// state's lock, when the read-ahead asked for those bytes and what follows them is present
    /// or on its way: the next window was planned while the fetch held the block, around it,
    /// and a sequential reader would otherwise stop there and wait for a fetch of 4 KiB (six
    /// times in a `cat` of 1 GiB).
    private func fetchMarkerGap(_ marker: Range<Int64>, in entry: Entry, state: inout State) {
        guard !state.retired, !state.modified, marker.upperBound <= state.plan.horizon,
            ChunkPlan.gaps(in: marker, excluding: state.covered) == [marker],
            marker.upperBound == state.record.size || ChunkPlan.contains(state.covered, marker.upperBound..<marker.upperBound + 1)
        else { return }
        start(marker, in: entry, state: &state)
    }

    /// How long fetched ranges wait to be recorded, so that one flush records many.
    static let recordDelay: Duration = .milliseconds(250)

    /// Records the ranges fetched since the last record, once flushed; one flush at a time per
    /// file, in the background (a read does not wait for it), at most about four times a second
    /// (often enough that the last flush, which completing the file waits for, is short).
    private func flush(_ entry: Entry) {
        let begin = entry.state.withLock { state -> Bool in
            if state.flushing || state.unrecorded.isEmpty { return false }
            state.flushing = true
            return true
        }
        guard begin else { return }
        Task { [self] in
            // Fetches of the next moment are recorded with these: one flush of the file for
            // many chunks (a flush per chunk made a sequential read wait on the disk).
            try? await Task.sleep(for: Self.recordDelay)
            while true {
                let (ranges, record) = entry.state.withLock { state -> ([Range<Int64>], ItemRecord) in
                    let ranges = state.unrecorded
                    state.unrecorded = []
                    return (ranges, state.record)
                }
                if ranges.isEmpty { break }
                do {
                    let recorded = try await entry.downloader.recordRanges(ranges, of: record)
                    // Not recorded while completing is expected: the file is whole now. Else the
                    // item changed, or the bytes were punched out: the next access checks (the
                    // entry stays, so that no second one plans fetches beside its own).
                    if recorded == nil, entry.state.withLock({ $0.completing == nil }) {
                        logger.info(
                            "\(entry.downloader.display(record.path)): fetched ranges not recorded (changed in the store, or punched out)")
                        entry.state.withLock { $0.validated = false }
                    }
                } catch {
                    // Not recorded: fetched again after a restart. The file stays served.
                    logger.warning(
                        "\(entry.downloader.display(record.path)): present ranges not recorded: \(FileProviderError.wrap(error).message)")
                }
            }
            entry.state.withLock { $0.flushing = false }
            // Ranges that came in after the loop looked.
            if entry.state.withLock({ !$0.unrecorded.isEmpty }) { flush(entry) }
        }
    }

    /// Completes the file (``complete(_:)``) without waiting; a failure is logged, and the next
    /// access tries again.
    private func completeInBackground(_ entry: Entry) {
        Task { [self] in
            do {
                _ = try await complete(entry)
            } catch {
                let error = FileProviderError.wrap(error)
                let path = entry.state.withLock { $0.record.path }
                // Open for writing: completed as an edit once the program wrote.
                let level: Logger.Level = error.code == .cannotSynchronize ? .debug : .warning
                logger.log(level: level, "\(entry.downloader.display(path)): every byte present, not completed: \(error.message)")
            }
        }
    }

    /// Turns a file whose every byte is present into a downloaded file (once, however many
    /// callers), then forgets it.
    private func complete(_ entry: Entry) async throws(FileProviderError) -> ItemRecord {
        // A completion that started before a program wrote records the store's bytes, which
        // it refuses while the program has the file open for writing: once it ended, one that
        // records the edit.
        let outdated = entry.state.withLock { state in state.modified && !state.completingModified ? state.completing : nil }
        // Completed before the program wrote (it waited for the lease): its write changed the
        // file's fingerprint, and sync sends it.
        if let outdated, let completed = try? await outdated.value { return completed }
        let task = entry.state.withLock { state -> Task<ItemRecord, any Error> in
            if let running = state.completing, running != outdated || !state.modified { return running }
            let record = state.record
            let modified = state.modified
            let changeTime = state.changeTime
            state.completingModified = modified
            let task = Task { [self] () async throws -> ItemRecord in
                let completed = try await entry.downloader.completePartial(record, modifiedLocally: modified, changeTime: changeTime)
                files.withLock { files in if files[entry.key] === entry { files[entry.key] = nil } }
                let edited = modified || completed.localSize == -1
                logger.info(
                    "\(entry.downloader.domainName): \(TerminalText.quoted(record.path)): fetched on access, every byte present (\(record.size) bytes)\(edited ? "; written by a program: sent as an edit" : ""); now an ordinary downloaded file"
                )
                return completed
            }
            state.completing = task
            return task
        }
        do {
            return try await task.value
        } catch {
            entry.state.withLock { $0.completing = nil }
            throw FileProviderError.wrap(error)
        }
    }

    /// A file's change time in nanoseconds, or `nil`. Blocking.
    static func changeTime(atPath path: String) -> Int64? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return Self.changeTime(status)
    }

    /// The change time of a `stat` result, in nanoseconds.
    package static func changeTime(_ status: stat) -> Int64 {
        Int64(status.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(status.st_ctim.tv_nsec)
    }
}
