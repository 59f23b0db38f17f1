import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where a backend hands the bytes of a file it transfers, besides the file itself: the engine
/// hashes a download as it is written and an upload as it is read, and never reads a file a
/// second time just to hash it (Docs/Reliability.md, "Content hashes").
///
/// The engine installs sinks for the task that calls the backend with
/// ``feeding(_:_:)``, one per file: a download's destination, an upload's contents. A
/// backend takes the sink of that file with ``for(_:)`` in its `async` method, before it hands
/// the work to threads of its own (task-local values do not follow it there), and calls
/// ``consume(_:at:)`` with every piece it writes into the destination, or reads from the
/// contents and sends, with the piece's offset in the file.
///
/// Pieces may come from several threads at once and out of order (ranges over several
/// connections): the sink hashes them in file order. A piece is the bytes of the file at its
/// offset, already written (a download) or just read (an upload), so a piece that arrives ahead
/// of a gap is not copied: only its place is noted, and once the gap is filled the hashing
/// thread reads it back from the file (from the page cache, where the write just put it) when
/// its turn comes. Where the file cannot be opened, or the sink was made for no file, such
/// pieces are held, at most ``pendingLimit`` bytes. Past that limit, or when a piece overlaps
/// bytes already hashed, it gives up and the file gets no hash. A piece at offset 0 once others were hashed starts again (a
/// backend that rewrites its destination from the first byte, an upload sent again). A backend
/// that never takes its sink is still correct: its files have no hash.
///
/// The hash runs on a thread of its own (`HashingThread`), fed in file order through a
/// bounded queue (``queueLimit``): ``consume(_:at:)`` copies the piece into the queue and
/// returns, so the thread that moves the bytes goes on with the next piece while the last one is
/// hashed, and a transfer takes about the longer of its copy and its hash, not their sum. Pieces
/// that fill a gap are queued with it, never hashed under the sink's lock. The thread starts with
/// the first byte past 64 KiB (a file no larger is hashed by ``finish(size:)`` on the
/// caller's thread, in microseconds: no thread started and joined per small file) and ends with
/// ``finish(size:)``, ``cancel()`` or the sink's release (a failed or cancelled transfer): none
/// outlives its sink.
public final class ContentSink: @unchecked Sendable {
    /// The most bytes held in memory that arrived ahead of a gap, when they cannot be read
    /// back from the file (32 MiB: four ranges of a ranged SFTP transfer).
    public static let pendingLimit = 32 << 20
    /// The most pieces ahead of a gap noted to be read back from the file.
    static let pendingPiecesLimit = 1 << 16
    /// The most bytes queued for the hashing thread (or being hashed) before a writer waits
    /// (4 MiB).
    public static let queueLimit = 4 << 20

    /// A piece that arrived ahead of a gap: its bytes, or only its length (in the file).
    private enum Pending {
        case bytes([UInt8])
        case inFile(Int)
    }

    private let hasher: HashingThread
    private let lock = NSLock()
    private var next: Int64 = 0
    private var pending: [Int64: Pending] = [:]
    private var pendingBytes = 0
    private var abandoned = false
    private var closed = false
    /// The file the pieces are the bytes of (``feeding(_:_:)`` sets it), and its descriptor
    /// for reading pieces back, opened with the first piece ahead of a gap (-1: not yet; -2:
    /// cannot).
    private var file: String?
    private var descriptor: Int32 = -1
    /// Told how many bytes from the first one the sink has taken without a gap, as that grows.
    private var contiguousObserver: (@Sendable (Int64) -> Void)?

    /// A sink hashing with the digest `makeDigest` makes (a new one when the file starts again).
    public init(_ makeDigest: @escaping @Sendable () -> any ContentDigest) {
        hasher = HashingThread(makeDigest, limit: Self.queueLimit)
    }

    deinit {
        hasher.stop()
        if descriptor >= 0 { close(descriptor) }
    }

    /// Names the file whose bytes the pieces are, so that pieces ahead of a gap are read back
    /// from it instead of held. Before the first piece.
    func readsBack(from path: String) {
        lock.withLock { if file == nil { file = path } }
    }

    /// The descriptor to read pieces back through, opened on first use; `nil` when there is
    /// no file or it cannot be opened (the lock held).
    private func readBackDescriptor() -> Int32? {
        if descriptor == -1 {
            descriptor = -2
            if let file {
                let fd = open(file, O_RDONLY | O_CLOEXEC)
                if fd >= 0 { descriptor = fd }
            }
        }
        return descriptor >= 0 ? descriptor : nil
    }

    /// Calls `observer` with the number of bytes from the file's first one the sink has taken
    /// without a gap each time it grows (a download's pieces are taken once written: so many
    /// bytes are in the file). It runs under the sink's lock, on the thread that hands the
    /// piece: it must be short and must not call the sink. Before the first piece.
    public func observeContiguous(_ observer: @escaping @Sendable (Int64) -> Void) {
        lock.withLock { contiguousObserver = observer }
    }

    /// Takes the bytes at `offset` of the file: a copy goes to the hashing thread's queue (this
    /// waits while it is full). Thread-safe.
    public func consume(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        if bytes.isEmpty { return }
        lock.lock()
        defer { lock.unlock() }
        if closed { return }
        // (Not when only pieces ahead of a gap came before: the first piece is late, not again.)
        if offset == 0 && (next > 0 || abandoned) {
            hasher.restart()
            next = 0
            pending = [:]
            pendingBytes = 0
            abandoned = false
        }
        if abandoned { return }
        if offset == next {
            hasher.append(bytes)
            next += Int64(bytes.count)
            while let piece = pending.removeValue(forKey: next) {
                switch piece {
                case .bytes(let held):
                    pendingBytes -= held.count
                    hasher.append(held)
                    next += Int64(held.count)
                case .inFile(let count):
                    hasher.append(file: descriptor, offset: next, count: count)
                    next += Int64(count)
                }
            }
            contiguousObserver?(next)
        } else if offset > next, pending[offset] == nil, pending.count < Self.pendingPiecesLimit, readBackDescriptor() != nil {
            pending[offset] = .inFile(bytes.count)
        } else if offset > next, pending[offset] == nil, pendingBytes + bytes.count <= Self.pendingLimit {
            pending[offset] = .bytes(Array(bytes.assumingMemoryBound(to: UInt8.self)))
            pendingBytes += bytes.count
        } else {
            // Bytes already hashed written again (they may differ), or too much ahead of a gap.
            abandoned = true
            pending = [:]
            pendingBytes = 0
            hasher.restart()
        }
    }

    /// The digest as lowercase hex when the sink took exactly the first `size` bytes of the
    /// file without a gap, else `nil`; waits (without holding a thread) for the hashing thread
    /// to hash what is queued. The sink is used up and its thread ends.
    public func finish(size: Int64) async -> String? {
        let complete = lock.withLock { () -> Bool in
            defer { closed = true }
            return !closed && !abandoned && pending.isEmpty && next == size
        }
        guard complete else {
            hasher.stop()
            return nil
        }
        let hasher = self.hasher
        return await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            hasher.finish { continuation.resume(returning: $0) }
        }
    }

    /// Stops the hashing (a failed or cancelled transfer): what is queued is dropped, the sink
    /// takes no more bytes, and this returns once its thread has ended. Safe to call more than
    /// once; the sink's release does the same.
    public func cancel() {
        // Stopped first, so that a writer waiting for room in the queue (holding the sink's
        // lock) is released.
        hasher.stop()
        lock.withLock {
            closed = true
            pending = [:]
            pendingBytes = 0
        }
    }

    /// The kernel's id of the sink's hashing thread while it runs (`/proc/self/task/<id>`),
    /// `nil` before its first byte and after the thread ended: for tests.
    public var hashingThreadID: Int32? { hasher.runningThreadID }

    /// The sinks the engine installed for the calling task, by file path.
    @TaskLocal private static var installed: [String: ContentSink] = [:]

    /// The sink installed for `file` (a download's destination, an upload's contents), or `nil`
    /// when the engine wants no hash of it. Call it in the backend's `async` method.
    public static func `for`(_ file: URL) -> ContentSink? {
        let sinks = installed
        return sinks.isEmpty ? nil : sinks[file.path]
    }

    /// The sink installed for the file at `path`; see ``for(_:)``.
    public static func `for`(path: String) -> ContentSink? {
        let sinks = installed
        return sinks.isEmpty ? nil : sinks[path]
    }

    /// Whether `FILEPROVIDER_NO_CONTENT_HASH=1` turns hashing off for this process: ``feeding(_:_:)``
    /// then installs no sink, so backends move bytes as they would without hashes and files get
    /// none. For benchmarks only: it measures what hashing costs, in the same build
    /// (Docs/Performance.md, "Content hashes").
    public static let hashingTurnedOff = ProcessInfo.processInfo.environment["FILEPROVIDER_NO_CONTENT_HASH"] == "1"

    /// Runs `operation` (a call of the backend) with `sinks` installed for its files, besides
    /// any installed already (none when ``hashingTurnedOff``).
    public static func feeding<T: Sendable, E: Error>(
        _ sinks: [URL: ContentSink], _ operation: () async throws(E) -> T
    ) async throws(E) -> T {
        if hashingTurnedOff { return try await operation() }
        var merged = installed
        for (file, sink) in sinks {
            let path = file.path
            sink.readsBack(from: path)
            merged[path] = sink
        }
        let result: Result<T, E> = await $installed.withValue(merged) { () async -> Result<T, E> in
            do throws(E) {
                return .success(try await operation())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
