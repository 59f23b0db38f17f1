import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine

/// The sink's hashing thread: pieces from several threads and out of order are hashed in file
/// order on a thread of its own, a writer waits while the queue is full, and the thread ends
/// with the sink (finished, cancelled, released) — never later.
@Suite struct ContentSinkTests {
    /// `count` bytes of a seeded generator.
    static func bytes(_ count: Int, seed: UInt32) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }

    /// SHA-256 of `bytes` in one call.
    static func sha256(_ bytes: [UInt8]) -> String {
        var digest = FastSHA256()
        bytes.withUnsafeBytes { digest.update($0) }
        return digest.finish()
    }

    /// Whether the kernel still has the thread `id` in this process.
    static func threadExists(_ id: Int32) -> Bool { FileManager.default.fileExists(atPath: "/proc/self/task/\(id)") }

    /// Whether the thread `id` is gone: at once after the join, but the kernel removes the task
    /// from /proc a moment after the join returns (the join waits for the thread to release its
    /// memory; the task is reaped right after), so the last look polls.
    static func threadEnds(_ id: Int32) async -> Bool { await eventually(timeout: 5, every: 0.001) { !threadExists(id) } }

    /// 24 MiB in pieces of 300,007 bytes, every third one from each of three threads (so pieces
    /// arrive ahead of gaps), hash as the whole file in one call.
    @Test func piecesFromSeveralThreadsAreHashedInFileOrder() async throws {
        let data = Self.bytes((24 << 20) + 5, seed: 7)
        let sink = FastSHA256.sink()
        let piece = 300_007
        let starts = Array(stride(from: 0, to: data.count, by: piece))
        try await offThePool {
            DispatchQueue.concurrentPerform(iterations: 3) { lane in
                for (index, start) in starts.enumerated() where index % 3 == lane {
                    data.withUnsafeBytes { all in
                        sink.consume(UnsafeRawBufferPointer(rebasing: all[start..<min(start + piece, data.count)]), at: Int64(start))
                    }
                }
            }
        }
        let thread = try #require(sink.hashingThreadID)
        #expect(await sink.finish(size: Int64(data.count)) == Self.sha256(data))
        #expect(sink.hashingThreadID == nil)
        #expect(await Self.threadEnds(thread))
    }

    /// A file of at most 64 KiB is hashed without a thread of its own (a tree of small files
    /// starts and joins none); one piece more and the thread starts; both hashes are right.
    @Test func aSmallFileIsHashedWithoutAThread() async throws {
        let data = Self.bytes(64 << 10, seed: 5)
        let small = FastSHA256.sink()
        try await offThePool {
            data.withUnsafeBytes { all in
                for start in stride(from: 0, to: all.count, by: 4096) {
                    small.consume(UnsafeRawBufferPointer(rebasing: all[start..<start + 4096]), at: Int64(start))
                }
            }
        }
        #expect(small.hashingThreadID == nil)
        #expect(await small.finish(size: Int64(data.count)) == Self.sha256(data))

        let larger = Self.bytes((64 << 10) + 1, seed: 6)
        let sink = FastSHA256.sink()
        try await offThePool {
            larger.withUnsafeBytes { all in
                sink.consume(UnsafeRawBufferPointer(rebasing: all[..<(64 << 10)]), at: 0)
                sink.consume(UnsafeRawBufferPointer(rebasing: all[(64 << 10)...]), at: 64 << 10)
            }
        }
        let thread = try #require(sink.hashingThreadID)
        #expect(await sink.finish(size: Int64(larger.count)) == Self.sha256(larger))
        #expect(await Self.threadEnds(thread))
    }

    /// Pieces ahead of a gap of a sink that knows its file (``ContentSink/feeding(_:_:)`` names
    /// it) are read back from the file when the gap is filled, not held: 24 MiB from three
    /// threads, as above, with in-order pieces after read-back ones, hash as the whole file's.
    /// A file cut short before the gap is filled gets no hash, never a wrong one.
    @Test func piecesAheadOfAGapAreReadBackFromTheFile() async throws {
        let data = Self.bytes((24 << 20) + 5, seed: 11)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-sink-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data(data).write(to: url)
        let sink = FastSHA256.sink()
        let piece = 300_007
        let starts = Array(stride(from: 0, to: data.count, by: piece))
        try await ContentSink.feeding([url: sink]) {
            try await offThePool {
                DispatchQueue.concurrentPerform(iterations: 3) { lane in
                    for (index, start) in starts.enumerated() where index % 3 == lane {
                        data.withUnsafeBytes { all in
                            sink.consume(UnsafeRawBufferPointer(rebasing: all[start..<min(start + piece, data.count)]), at: Int64(start))
                        }
                    }
                }
            }
        }
        #expect(await sink.finish(size: Int64(data.count)) == Self.sha256(data))

        // The second half first (noted, not held), then the first half; the file loses its
        // second half before the gap is filled.
        let short = FastSHA256.sink()
        let half = data.count / 2
        try await ContentSink.feeding([url: short]) {
            try await offThePool {
                data.withUnsafeBytes { all in
                    short.consume(UnsafeRawBufferPointer(rebasing: all[half...]), at: Int64(half))
                    truncate(url.path, off_t(half + 10))
                    short.consume(UnsafeRawBufferPointer(rebasing: all[..<half]), at: 0)
                }
            }
        }
        #expect(await short.finish(size: Int64(data.count)) == nil)
    }

    /// The file written again from its first byte: the hash is the second writing's; a file
    /// that ends early or has a gap gets none; an empty file gets the hash of nothing.
    @Test func restartsGapsAndEmptyFiles() async throws {
        let first = Self.bytes(3 << 20, seed: 1)
        let second = Self.bytes(2 << 20, seed: 2)
        let sink = FastSHA256.sink()
        try await offThePool {
            first.withUnsafeBytes { sink.consume($0, at: 0) }
            second.withUnsafeBytes { sink.consume($0, at: 0) }
        }
        #expect(await sink.finish(size: Int64(second.count)) == Self.sha256(second))

        let short = FastSHA256.sink()
        try await offThePool { first.withUnsafeBytes { short.consume($0, at: 0) } }
        let thread = try #require(short.hashingThreadID)
        #expect(await short.finish(size: Int64(first.count) + 1) == nil)
        #expect(short.hashingThreadID == nil)
        #expect(await Self.threadEnds(thread))

        let gap = FastSHA256.sink()
        try await offThePool { first.withUnsafeBytes { gap.consume(UnsafeRawBufferPointer(rebasing: $0[10...]), at: 10) } }
        #expect(await gap.finish(size: Int64(first.count)) == nil)

        #expect(await FastSHA256.sink().finish(size: 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// A writer ahead of the hash waits once ``ContentSink/queueLimit`` bytes are queued;
    /// cancelling releases it (its pieces are dropped) and returns once the thread has ended.
    @Test func aFullQueueHoldsTheWriterAndCancelEndsTheThread() async throws {
        let gate = HashGate()
        let sink = ContentSink { GatedDigest(gate) }
        let piece = [UInt8](repeating: 0x5a, count: 1 << 20)
        let pieces = ContentSink.queueLimit / piece.count + 4
        let written = Mutex(0)
        let writer = Task.detached {
            try await offThePool {
                for index in 0..<pieces {
                    piece.withUnsafeBytes { sink.consume($0, at: Int64(index * piece.count)) }
                    written.withLock { $0 += 1 }
                }
            }
        }
        // The thread took the first piece and waits at the gate; the writer queued what fits.
        #expect(await eventually { gate.entered && written.withLock { $0 } >= ContentSink.queueLimit / piece.count - 1 })
        let thread = try #require(sink.hashingThreadID)
        #expect(written.withLock { $0 } < pieces, "the writer waits for room")
        // cancel() waits for the thread, which is in the middle of a piece: the gate opens once
        // the writer was let go (its last pieces dropped), which only the cancel does.
        let cancelled = Task.detached { try await offThePool { sink.cancel() } }
        #expect(await eventually { written.withLock { $0 } == pieces })
        gate.open()
        try await cancelled.value
        try await writer.value
        #expect(sink.hashingThreadID == nil)
        #expect(await Self.threadEnds(thread))
        #expect(gate.updates == 1, "the piece being hashed was finished; the queued ones were dropped")
        #expect(await sink.finish(size: Int64(pieces * piece.count)) == nil)
    }

    /// A sink dropped without being finished (a transfer that failed) takes its thread with it.
    @Test func aReleasedSinkEndsItsThread() async throws {
        let data = Self.bytes(3 << 20, seed: 3)
        // The sink lives in this closure only, off the pool (its release joins the thread).
        let (thread, ranWhileHeld) = try await offThePool { () -> (Int32?, Bool) in
            let sink = FastSHA256.sink()
            data.withUnsafeBytes { sink.consume($0, at: 0) }
            let thread = sink.hashingThreadID
            return (thread, thread.map(Self.threadExists) ?? false)
        }
        let id = try #require(thread)
        #expect(ranWhileHeld)
        #expect(await Self.threadEnds(id))
    }
}

/// Where ``GatedDigest`` waits until the test opens it.
private final class HashGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false
    private var entries = 0
    private var count = 0

    /// Whether the digest was given a piece.
    var entered: Bool { condition.withLock { entries > 0 } }
    /// How many pieces were hashed.
    var updates: Int { condition.withLock { count } }

    func open() {
        condition.withLock {
            isOpen = true
            condition.broadcast()
        }
    }

    func pass() {
        condition.withLock {
            entries += 1
            while !isOpen { condition.wait() }
            count += 1
        }
    }
}

/// A digest whose every update waits at its gate: a hash far slower than the writer.
private struct GatedDigest: ContentDigest {
    let gate: HashGate
    init() { gate = HashGate() }
    init(_ gate: HashGate) { self.gate = gate }
    mutating func update(_ bytes: UnsafeRawBufferPointer) { gate.pass() }
    mutating func finishBytes() -> [UInt8] { [] }
}
