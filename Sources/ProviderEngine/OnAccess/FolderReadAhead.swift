import Foundation
import Logging
import ProviderCore
import ProviderStore

/// Learns when programs read the dataless files of one folder one after another (a build,
/// `grep -r`, `cat *`, a photo viewer: each would pay a round trip to the store per file) and
/// then fetches the folder's other small files that are not downloaded, in batches, ahead of
/// them: the on-access read-ahead across files, as ``ProgressiveHydrator``'s is within one
/// file. One piece of code behind the layout seam, fed by both on-access layouts: fanotify's
/// handler (`OnAccessRequests` in ProviderService: pre-content events are accesses, `FAN_OPEN`
/// events opens) and the FUSE layout's ``ReplicaFetcher`` (a read of missing bytes, or a change
/// of a dataless file, is an access; every `open` an open).
///
/// ``FolderReadPattern`` says when: a few files of one folder accessed within a short window.
/// A read-ahead takes the folder's files small enough for a batch that are neither downloaded
/// nor asked for by a program (``ReadAheadResolving/readAheadCandidates(domainID:path:)``), in
/// name order after the file last asked for (then the ones before it), and fills them in place
/// in batches of ``batchFiles`` (``ReadAheadResolving/fill(batch:domain:)``, a few batches at
/// once). It is bounded: at most ``FolderReadPattern/Limits/lead`` files ahead of the
/// programs' opens of the folder, at most ``maxBytes`` per start, and never past the domain's
/// cache budget or the home's (it starts only within the room they leave, so it never makes
/// eviction drop a file). It stops when the programs stop (no open or access in the folder for
/// ``FolderReadPattern/Limits/idle`` seconds): no new batch starts; the batches running finish
/// (programs may be waiting on them).
///
/// A program that accesses a file a batch is filling waits for that batch (``accessed(domain:domainID:path:program:)``
/// returns `true` once its file is filled); a file a program asked for is left to the usual
/// path and never taken by a batch, so one file is never filled twice at once.
///
/// Access rules by program (issue 42): both layouts ask ``AccessGate`` before they report an
/// access here, and a program a rule limits (`deny`, `present-only`) is refused there, so it
/// never starts a read-ahead and its accesses are not counted. ``mayReadAhead`` is a second
/// hook (every program may, unless a caller says otherwise).
///
/// Any thread; its work runs in tasks; the engine's side (``ReadAheadResolving``) does the
/// blocking work off the cooperative pool. A caller on a thread of its own (a FUSE request)
/// waits for ``accessed(domain:domainID:path:program:)`` by blocking that thread.
package final class FolderReadAhead: Sendable {
    /// Whether the accesses of the process `program` in `domain` may start a read-ahead. The
    /// hook of access rules by program (issue 42): until they exist, every program may.
    package typealias Permission = @Sendable (_ program: Int32, _ domain: String) -> Bool

    /// Files in one batch (one backend call): small, so that a program waiting on a file of a
    /// batch waits for little more than its own.
    package static let batchFiles = 16
    /// Batches in flight at once (each over its own connection where the backend has several).
    package static let parallelBatches = 4
    /// The most bytes one start of a read-ahead fetches.
    package static let maxBytes: Int64 = 64 << 20

    /// What the read-ahead of a folder does next.
    private enum Next {
        case batch(count: Int, Task<Set<String>, Never>)
        case stop(resumable: Bool)
    }

    private struct State: Sendable {
        var pattern: FolderReadPattern
        /// The batches filling files, by `domain/path` of each file; a batch's value is the
        /// paths it filled.
        var inFlight: [String: Task<Set<String>, Never>] = [:]
        /// The read-ahead of each folder that has one.
        var runs: [FolderReadPattern.Folder: Task<Void, Never>] = [:]
        var stopping = false
    }

    private let engine: any ReadAheadResolving
    private let logger: Logger
    private let now: @Sendable () -> Double
    package let mayReadAhead: Permission
    private let state: Mutex<State>

    /// `now`: seconds on a monotonic clock (tests pass their own).
    package init(
        engine: any ReadAheadResolving, logger: Logger, limits: FolderReadPattern.Limits = FolderReadPattern.Limits(),
        now: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime },
        mayReadAhead: @escaping Permission = { _, _ in true }
    ) {
        self.engine = engine
        self.logger = logger
        self.now = now
        self.mayReadAhead = mayReadAhead
        state = Mutex(State(pattern: FolderReadPattern(limits: limits)))
    }

    // MARK: Hooks of the on-access handler

    /// A program (process `program`) accesses the dataless file at `path` (relative) of
    /// `domain`. Returns `true` when a read-ahead batch was filling the file and filled it
    /// (the access may go on); `false` when the file is left to the caller, which fetches it
    /// as usual (then no batch takes it). May start a read-ahead of the file's folder.
    package func accessed(domain: String, domainID: Int64, path: String, program: Int32) async -> Bool {
        let (folder, name) = FolderReadPattern.Folder.of(domainID: domainID, path: path)
        let key = domain + "/" + path
        let time = now()
        let counts = mayReadAhead(program, domain)
        let (batch, start) = state.withLock { state -> (Task<Set<String>, Never>?, Bool) in
            if let batch = state.inFlight[key] { return (batch, false) }
            let start = state.pattern.accessed(name, in: folder, by: program, at: time, counts: counts && !state.stopping)
            if start { state.runs[folder] = Task { [self] in await run(folder, domain: domain, from: name) } }
            return (nil, start)
        }
        if start { logger.debug("\(domain): files of \(TerminalText.quoted("/" + folder.path)) read one after another; reading ahead") }
        guard let batch else { return false }
        return await batch.value.contains(path)
    }

    /// A program opened the file at `path` (relative) of a domain: the programs reading a
    /// folder are still at it.
    package func opened(domainID: Int64, path: String) {
        let folder = FolderReadPattern.Folder.of(domainID: domainID, path: path).folder
        let time = now()
        state.withLock { $0.pattern.opened(in: folder, at: time) }
    }

    /// Whether a read-ahead batch is filling the file at `path` of `domain` (its writes are the
    /// engine's). Any thread.
    package func isFilling(domain: String, path: String) -> Bool {
        state.withLock { $0.inFlight[domain + "/" + path] != nil }
    }

    /// Starts no more batches and waits for the read-aheads to end (their running batches
    /// finish).
    package func stop() async {
        let runs = state.withLock { state -> [Task<Void, Never>] in
            state.stopping = true
            return Array(state.runs.values)
        }
        for run in runs { await run.value }
    }

    /// Whether a read-ahead of `folder` is running (tests).
    package func isRunning(domainID: Int64, folder: String) -> Bool {
        state.withLock { $0.runs[FolderReadPattern.Folder(domainID: domainID, path: folder)] != nil }
    }

    /// Waits until no read-ahead runs (tests).
    package func settle() async {
        while let run = state.withLock({ $0.runs.values.first }) { await run.value }
    }

    // MARK: The read-ahead of one folder

    /// Fetches the folder's small files that are not downloaded, batch after batch, while the
    /// pattern allows, starting after the file `name`.
    private func run(_ folder: FolderReadPattern.Folder, domain: String, from name: String) async {
        var filled = 0
        var bytes: Int64 = 0
        var outcome = "nothing fetched"
        let started = now()
        var resumable = false
        defer {
            state.withLock { state in
                state.pattern.stopped(folder, resumable: resumable)
                state.runs[folder] = nil
            }
        }
        let candidates: [ItemRecord]
        let room: Int64
        do {
            let path = folder.path.isEmpty ? name : folder.path + "/" + name
            let found = try await engine.readAheadCandidates(domainID: folder.domainID, path: path)
            (candidates, room) = (Self.order(found.files, after: name), found.room)
        } catch {
            logger.warning("\(domain): no read-ahead in \(TerminalText.quoted("/" + folder.path)): \(error.message)")
            return
        }
        var queue = candidates[...]
        var budget = min(Self.maxBytes, room)
        var running: [Task<Set<String>, Never>] = []
        var fetched = 0
        func finish(_ done: Set<String>) {
            filled += done.count
            bytes += candidates.lazy.filter { done.contains($0.path) }.reduce(0) { $0 + $1.size }
        }
        while true {
            let time = now()
            let next = state.withLock { state -> Next in
                if state.stopping { return .stop(resumable: false) }
                let allowance = min(Self.batchFiles, state.pattern.allowance(folder, fetched: fetched, at: time))
                if allowance == 0 {
                    // A lead ahead while the programs read on: their next access of a dataless
                    // file here starts it again. Idle: they stopped.
                    return .stop(resumable: !queue.isEmpty && !state.pattern.isIdle(folder, at: time))
                }
                var batch: [ItemRecord] = []
                while batch.count < allowance, let next = queue.first {
                    if state.inFlight[domain + "/" + next.path] != nil || state.pattern.wasAccessed(next.filename, in: folder) {
                        queue.removeFirst()
                        continue
                    }
                    if next.size > budget { break }
                    queue.removeFirst()
                    budget -= next.size
                    batch.append(next)
                }
                guard !batch.isEmpty else { return .stop(resumable: false) }
                let keys = batch.map { domain + "/" + $0.path }
                let task = Task { [self, batch] () -> Set<String> in
                    let results = await engine.fill(batch: batch, domain: domain)
                    var done = Set<String>()
                    for (record, result) in zip(batch, results) {
                        switch result {
                        case .success:
                            done.insert(record.path)
                            logger.info(
                                "\(domain): \(TerminalText.quoted(record.path)): fetched on access (read ahead with its folder, \(record.size) bytes)"
                            )
                        case .failure(let error):
                            logger.debug("\(domain): \(TerminalText.quoted(record.path)): not read ahead: \(error.message)")
                        }
                    }
                    // A file the batch did not fill is left to programs from now on (their
                    // waits fetch it the usual way): no later batch takes it.
                    self.state.withLock { state in
                        for key in keys { state.inFlight[key] = nil }
                        for record in batch where !done.contains(record.path) {
                            state.pattern.leave(record.filename, in: folder)
                        }
                    }
                    return done
                }
                for key in keys { state.inFlight[key] = task }
                return .batch(count: batch.count, task)
            }
            guard case .batch(let count, let task) = next else {
                guard case .stop(let again) = next else { break }
                // A lead ahead with batches running: the programs' opens meanwhile may let
                // it go on once the oldest is done.
                if again, !running.isEmpty {
                    finish(await running.removeFirst().value)
                    continue
                }
                resumable = again
                break
            }
            fetched += count
            running.append(task)
            if running.count >= Self.parallelBatches { finish(await running.removeFirst().value) }
        }
        for task in running { finish(await task.value) }
        if filled > 0 {
            outcome = "\(filled) files (\(bytes) bytes) in \(String(format: "%.2f", now() - started)) s"
            engine.requestEviction()
        }
        logger.info("\(domain): read ahead in \(TerminalText.quoted("/" + folder.path)): \(outcome)")
    }

    /// `files` (a folder's) in name order after `name`, then the ones before it: the order a
    /// program reading the folder file after file asks for them.
    package static func order(_ files: [ItemRecord], after name: String) -> [ItemRecord] {
        let sorted = files.sorted { $0.filename < $1.filename }
        let split = sorted.firstIndex { $0.filename > name } ?? sorted.endIndex
        return Array(sorted[split...] + sorted[..<split])
    }
}
