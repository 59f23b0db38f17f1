import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The thread of its own a ``ContentSink`` hashes on, behind a bounded queue of pieces, so that
/// the thread that moves a file's bytes (a copy, a connection) never waits for the hash while
/// there is room, and the transfer costs the longer of the copy and the hash, not their sum.
///
/// Pieces are hashed in the order they are queued (the sink queues them in file order). Memory
/// is bounded: at most ``limit`` bytes are queued or being hashed; a writer past that waits
/// until the thread has hashed enough (a piece larger than the limit waits for an empty queue).
/// Small pieces are gathered into blocks of ``blockSize`` and the thread is woken once a block's
/// worth is queued (or the hash is wanted), not for every piece.
///
/// The thread starts once more than ``inlineLimit`` bytes were queued (a smaller file is hashed
/// by ``finish(_:)``, without a thread) and ends when the hash is finished (``finish(_:)``)
/// or the hashing is stopped (``stop()``, also when the sink goes away): ``stop()`` returns once
/// the thread has ended (`pthread_join`), whatever it was doing.
///
/// Lock order: the sink's lock, then this one's (`mutex`); the thread itself takes only this one,
/// and never holds it while it hashes.
final class HashingThread: @unchecked Sendable {
    /// The size of the blocks small pieces are gathered into, and how much must be queued before
    /// an idle thread is woken (1 MiB).
    static let blockSize = 1 << 20
    /// The most bytes hashed without a thread: a file no larger (most files of a tree of
    /// small files) is queued until ``finish(_:)``, which hashes it on the caller's thread, in
    /// about 30 µs at this size, instead of starting and joining a thread for it.
    static let inlineLimit = 64 << 10

    /// The most bytes queued or being hashed before a writer waits.
    let limit: Int

    private struct Piece {
        var bytes: [UInt8]
        /// The ``generation`` it belongs to: pieces of an earlier one were queued before the file
        /// started over, and their digest is dropped.
        var generation: Int
        /// Bytes to read from a file instead (``append(file:offset:count:)``); `bytes` is empty.
        var file: (descriptor: Int32, offset: Int64, count: Int)?
    }

    private let makeDigest: @Sendable () -> any ContentDigest
    private var mutex = pthread_mutex_t()
    /// Signalled when work is queued for the thread, the hash is wanted, or it must stop.
    private var work = pthread_cond_t()
    /// Broadcast when queued bytes were hashed (room for writers) and when the thread ends.
    private var room = pthread_cond_t()
    private var queue: [Piece] = []
    /// Blocks the thread has hashed, kept for the next pieces: no allocation (and no page
    /// faults on fresh memory) per block once the queue has been full once.
    private var spare: [[UInt8]] = []
    private var queueHead = 0
    /// Bytes queued and being hashed.
    private var held = 0
    /// Bytes queued to be read from a file (not in memory, not counted in ``held``).
    private var inFiles = 0
    /// A generation whose read of a file failed: its digest is not the file's.
    private var failedGeneration: Int?
    private var generation = 0
    private var writersWaiting = 0
    private var threadWaiting = false
    private var finishing: (@Sendable (String?) -> Void)?
    private var stopped = false
    private var thread: pthread_t?
    private var joined = false
    /// Set when the thread has no more work (it returns right after).
    private var ended = false
    /// The kernel's id of the thread while it runs (`/proc/self/task/<id>`), for tests.
    private(set) var threadID: Int32?

    init(_ makeDigest: @escaping @Sendable () -> any ContentDigest, limit: Int) {
        self.makeDigest = makeDigest
        self.limit = limit
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&work, nil)
        pthread_cond_init(&room, nil)
    }

    deinit {
        pthread_cond_destroy(&room)
        pthread_cond_destroy(&work)
        pthread_mutex_destroy(&mutex)
    }

    /// The kernel id of the hashing thread, `nil` before it started and once it has no more
    /// work (it returns at once, and is joined by ``stop()``; waits for a thread just started
    /// to tell its id).
    var runningThreadID: Int32? {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while thread != nil && threadID == nil && !joined { pthread_cond_wait(&room, &mutex) }
        return joined || ended ? nil : threadID
    }

    /// Queues a copy of `bytes` for the hash, after the pieces queued before; waits while the
    /// queue is full. Does nothing once stopped or finishing.
    func append(_ bytes: UnsafeRawBufferPointer) {
        if bytes.isEmpty { return }
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        guard waitForRoom(bytes.count) else { return }
        // Typed, so that the append is one memcpy (a raw buffer is copied byte by byte).
        let typed = bytes.assumingMemoryBound(to: UInt8.self)
        if queue.count > queueHead, queue[queue.count - 1].generation == generation, queue[queue.count - 1].file == nil,
            queue[queue.count - 1].bytes.count + bytes.count <= Self.blockSize
        {
            queue[queue.count - 1].bytes.append(contentsOf: typed)
        } else {
            var block = spare.popLast() ?? []
            // While the file may still be hashed inline, a new block is only as large as the
            // inline limit: a 1 MiB allocation per small file was an mmap and a munmap per
            // download (perf of s3-download-10k). Past it, blocks are whole (no growing copies).
            let small = thread == nil && held + bytes.count <= Self.inlineLimit
            block.reserveCapacity(max(small ? Self.inlineLimit : Self.blockSize, bytes.count))
            block.append(contentsOf: typed)
            queue.append(Piece(bytes: block, generation: generation))
        }
        queued(bytes.count)
    }

    /// Queues `bytes` (taken as they are, not copied) for the hash; see ``append(_:)-(UnsafeRawBufferPointer)``.
    func append(_ bytes: [UInt8]) {
        if bytes.isEmpty { return }
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        guard waitForRoom(bytes.count) else { return }
        queue.append(Piece(bytes: bytes, generation: generation))
        queued(bytes.count)
    }

    /// Queues bytes `offset..<offset + count` of the open file `descriptor` for the hash, after
    /// the pieces queued before: the thread reads them (`pread`, in blocks) when their turn
    /// comes. The bytes must be in the file already; the descriptor must stay open until the
    /// thread ended. Never waits: nothing is held in memory for them. A read that fails or
    /// comes back short gives the digest up (``finish(_:)`` gets `nil`).
    func append(file descriptor: Int32, offset: Int64, count: Int) {
        if count <= 0 { return }
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        if stopped || finishing != nil { return }
        if thread == nil && !start() { return }
        if queue.count > queueHead, let last = queue[queue.count - 1].file, queue[queue.count - 1].generation == generation,
            last.descriptor == descriptor, last.offset + Int64(last.count) == offset
        {
            queue[queue.count - 1].file = (descriptor, last.offset, last.count + count)
        } else {
            queue.append(Piece(bytes: [], generation: generation, file: (descriptor, offset, count)))
        }
        inFiles += count
        if threadWaiting && held + inFiles >= Self.blockSize { pthread_cond_signal(&work) }
    }

    /// Drops what is queued and starts a new digest with the next piece (the file starts over,
    /// or its hash was given up).
    func restart() {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        dropQueue()
        generation += 1
    }

    /// Calls `done` with the digest (lowercase hex) of every piece queued since the last
    /// ``restart()``, once they are hashed, on the hashing thread (at once on this one when
    /// none was ever queued); the thread then ends. `done` gets `nil` when the hashing was
    /// stopped, or finishing was asked already.
    func finish(_ done: @escaping @Sendable (String?) -> Void) {
        pthread_mutex_lock(&mutex)
        if stopped || finishing != nil {
            pthread_mutex_unlock(&mutex)
            done(nil)
            return
        }
        guard thread != nil else {
            // At most ``inlineLimit`` bytes, all in memory (pieces to read from a file start
            // the thread), all of this generation (a restart drops the queue).
            stopped = true
            let pieces = queue[queueHead...].map(\.bytes)
            dropQueue()
            pthread_mutex_unlock(&mutex)
            var digest = makeDigest()
            for bytes in pieces { bytes.withUnsafeBytes { digest.update($0) } }
            done(digest.finish())
            return
        }
        finishing = done
        pthread_cond_signal(&work)
        pthread_mutex_unlock(&mutex)
    }

    /// Stops the hashing: drops what is queued, wakes the writers waiting for room (their pieces
    /// are dropped), and returns once the thread has ended. A ``finish(_:)`` waiting for its
    /// digest gets `nil`. Safe to call more than once, from any thread but the hashing one.
    func stop() {
        pthread_mutex_lock(&mutex)
        stopped = true
        dropQueue()
        pthread_cond_signal(&work)
        pthread_cond_broadcast(&room)
        let running = joined ? nil : thread
        joined = true
        pthread_mutex_unlock(&mutex)
        if let running { pthread_join(running, nil) }
    }

    /// Waits (the lock held) until `count` more bytes fit; starts the thread once more than
    /// ``inlineLimit`` bytes were queued. Returns `false` when the pieces are to be dropped
    /// (stopped, or finishing).
    private func waitForRoom(_ count: Int) -> Bool {
        if stopped || finishing != nil { return false }
        if thread == nil && held + count > Self.inlineLimit && !start() { return false }
        while held > 0 && held + count > limit && !stopped {
            writersWaiting += 1
            // The thread may be waiting for a block's worth: it is wanted now.
            if threadWaiting { pthread_cond_signal(&work) }
            pthread_cond_wait(&room, &mutex)
            writersWaiting -= 1
        }
        return !stopped && finishing == nil
    }

    /// Counts `count` bytes just queued, and wakes the thread when a block's worth waits.
    private func queued(_ count: Int) {
        held += count
        if threadWaiting && (held + inFiles >= Self.blockSize || writersWaiting > 0) { pthread_cond_signal(&work) }
    }

    /// Empties the queue (the lock held); the piece being hashed stays counted until it is done.
    private func dropQueue() {
        for index in queueHead..<queue.count {
            held -= queue[index].bytes.count
            inFiles -= queue[index].file?.count ?? 0
        }
        queue.removeAll(keepingCapacity: true)
        queueHead = 0
    }

    /// Starts the thread (the lock held); `false` when the system refuses one.
    private func start() -> Bool {
        var created = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let result = pthread_create(
            &created, nil,
            { context in
                let owner = Unmanaged<HashingThread>.fromOpaque(context!).takeRetainedValue()
                owner.run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<HashingThread>.fromOpaque(context).release()
            stopped = true
            return false
        }
        thread = created
        return true
    }

    /// The thread's loop: hashes the queued pieces in order, without the lock, until it is
    /// stopped or the digest is wanted and every piece is hashed.
    private func run() {
        ThreadName.setCurrent("sha256")
        let id = Self.currentThreadID()
        var digest = makeDigest()
        var digestGeneration = 0
        // Where pieces to read from a file are read into, made with the first one.
        var readBuffer: UnsafeMutableRawBufferPointer?
        defer { readBuffer?.deallocate() }
        pthread_mutex_lock(&mutex)
        threadID = id
        pthread_cond_broadcast(&room)
        while true {
            while !stopped && finishing == nil
                && (queueHead == queue.count || (held + inFiles < Self.blockSize && writersWaiting == 0))
            {
                threadWaiting = true
                pthread_cond_wait(&work, &mutex)
                threadWaiting = false
            }
            if stopped { break }
            if queueHead == queue.count, let done = finishing {
                let wanted = generation
                stopped = true
                ended = true
                finishing = nil
                pthread_mutex_unlock(&mutex)
                if digestGeneration != wanted { digest = makeDigest() }
                done(failedGeneration == wanted ? nil : digest.finish())
                pthread_mutex_lock(&mutex)
                break
            }
            var piece = queue[queueHead]
            queue[queueHead].bytes = []
            queueHead += 1
            if queueHead == queue.count {
                queue.removeAll(keepingCapacity: true)
                queueHead = 0
            }
            pthread_mutex_unlock(&mutex)
            if piece.generation != digestGeneration {
                digest = makeDigest()
                digestGeneration = piece.generation
            }
            if let file = piece.file {
                let buffer = readBuffer ?? UnsafeMutableRawBufferPointer.allocate(byteCount: Self.blockSize, alignment: 64)
                readBuffer = buffer
                let complete = Self.hash(file, into: buffer, with: &digest)
                pthread_mutex_lock(&mutex)
                inFiles -= file.count
                if !complete { failedGeneration = piece.generation }
                continue
            }
            piece.bytes.withUnsafeBytes { digest.update($0) }
            // Taken out of the piece, so that the block is this thread's only reference and
            // keeps its memory when emptied.
            var used: [UInt8] = []
            swap(&used, &piece.bytes)
            let count = used.count
            used.removeAll(keepingCapacity: true)
            pthread_mutex_lock(&mutex)
            held -= count
            if used.capacity >= Self.blockSize && spare.count <= limit / Self.blockSize { spare.append(used) }
            if writersWaiting > 0 { pthread_cond_broadcast(&room) }
        }
        let abandoned = finishing
        finishing = nil
        ended = true
        pthread_cond_broadcast(&room)
        pthread_mutex_unlock(&mutex)
        // Stopped while a digest was wanted: it will never come.
        abandoned?(nil)
    }

    /// Reads bytes of a file in blocks through `buffer` and hashes them; `false` when a read
    /// fails or the file ends first.
    private static func hash(
        _ file: (descriptor: Int32, offset: Int64, count: Int), into buffer: UnsafeMutableRawBufferPointer,
        with digest: inout any ContentDigest
    ) -> Bool {
        var done = 0
        while done < file.count {
            let wanted = min(buffer.count, file.count - done)
            let count = pread(file.descriptor, buffer.baseAddress, wanted, off_t(file.offset) + off_t(done))
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            done += count
        }
        return true
    }

    /// The kernel's id of the calling thread, from `/proc/thread-self` (`PID/task/TID`).
    private static func currentThreadID() -> Int32? {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.split(separator: "/").last.flatMap { Int32($0) }
    }
}
