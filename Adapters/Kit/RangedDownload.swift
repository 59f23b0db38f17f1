import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A `GET` of a whole file into the engine's file that goes on in ranges over several
/// connections once the file turns out to be large, as rclone's multi-thread streams do: one
/// TCP stream is received and written by one core, several by several.
///
/// With one stream (``streams`` 1) it is a plain `GET`, resumed with `Range` after a break.
/// Otherwise the size is not known before the first reply, so the first request asks for the first
/// ``firstRange`` bytes only (``ReplySink/firstRange(path:range:)``): a file no larger comes
/// whole in that one reply (a `206` up to its end), and so does any file from a server that
/// ignores `Range` (a `200`), as with a plain `GET`. When more than ``threshold`` bytes are left
/// after the first range, the rest goes in ranges of ``rangeSize`` bytes handed out in order
/// (``RangeSchedule``) to up to ``streams`` requests at once, each written at its place as it
/// arrives; less goes in one more request. Every reply's head goes through the request's
/// `validate` (for the adapters: the version asked for, and the first reply's version and size,
/// ``FirstItem``); the client retries a range that breaks off from where it stopped.
///
/// Ranges finish out of order, so the file may hold bytes past a gap. What counts is the prefix
/// written without a gap: progress reports it, it is recorded on the file (``PrefixRecord``,
/// each time whole ranges complete; removed at the end) so that a resume after a kill starts
/// there, and after a failure the file is cut back to it. On a file system without extended
/// attributes the rest goes in one request. Memory does not depend on the file's size (a block
/// of each request in flight).
public struct RangedDownload: Sendable {
    /// How a request is sent (the adapter's own `send`, which ends it when the task is
    /// cancelled).
    public typealias Send = @Sendable (HTTPRequest) async throws(FileProviderError) -> HTTPReply

    /// The bytes the first request asks for (16 MiB).
    public var firstRange: Int64 = 16 << 20
    /// The rest of a file goes in ranges when more than this is left after the first range
    /// (32 MiB); less goes in one request.
    public var threshold: Int64 = 32 << 20
    /// The size of every range but the last (16 MiB).
    public var rangeSize: Int64 = 16 << 20
    /// The most requests of one download at once (the client's connections).
    public var streams: Int
    /// Runs the steps on the file that block (reading, writing and removing the prefix record,
    /// cutting the file back), never on Swift's cooperative pool.
    public let files: BlockingExecutor

    public init(streams: Int, files: BlockingExecutor) {
        self.streams = max(1, streams)
        self.files = files
    }

    /// How many requests at once suit a download from the server at `url` on a machine with
    /// `processors` cores: one per core for a server elsewhere (at least two), one per two
    /// cores for a server on this machine (a loopback address: its sending runs on the same
    /// cores); never more than `connections`.
    ///
    /// Receiving and writing one stream keeps about a core busy, and the engine hashes every
    /// download on a thread of its own (about half a core per GiB a second) from the bytes
    /// written without a gap, reading the pieces that came ahead of a gap back from the file:
    /// a ranged download costs more CPU than one stream. A local Apache on two cores, 1 GiB,
    /// the engine's hash on: one stream 0.75 s, two ranged streams 0.9 s, four or eight 1.0 s
    /// (without the hash: 0.59 s, 0.53 s, 0.58 s). Over a network, where one TCP stream is
    /// held back by the round trip rather than by a core, more streams are what helps.
    public static func streams(
        connections: Int, url: String, processors: Int = ProcessInfo.processInfo.activeProcessorCount
    ) -> Int {
        let wanted = isLoopback(url) ? processors / 2 : max(2, processors)
        return max(1, min(connections, wanted))
    }

    /// Whether the host of `url` (`http://host:port/…`) is this machine: `localhost`, an
    /// address in `127.0.0.0/8` or `::1`. Names are not resolved.
    public static func isLoopback(_ url: String) -> Bool {
        guard let host = URL(string: url)?.host(percentEncoded: false)?.lowercased() else { return false }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let parts = bare.split(separator: ".", omittingEmptySubsequences: false)
        let inLoopbackNet = parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
        return bare == "localhost" || bare.hasSuffix(".localhost") || bare == "::1" || inLoopbackNet
    }

    /// Downloads the resource of `request` (a `GET`, whose sink is set here; its `validate`,
    /// `progress` and headers go with every request) into the file at `path`, sending each
    /// request with `send`. With `offset` > 0 the first `offset` bytes are in the file already
    /// and the download resumes after them, or after the prefix recorded on the file when that
    /// is smaller (a ranged download was killed).
    ///
    /// Returns a reply for the caller's checks: a reply that is not a success, as it came (the
    /// first request's; after a `416`, that of a plain `GET` of the whole file: an empty file,
    /// or one shorter now than what was downloaded); else the first reply's head with
    /// `fileLength` the length written without a gap, the whole file.
    /// - Throws: what `send` throws (`validate`'s errors among them); for a range after the
    ///   first, `versionNoLongerAvailable` when the server has no such bytes any more (`404`,
    ///   `410`, `412`, `416`: the file changed or went), what ``HTTPReply/check()`` throws for
    ///   another status that is not a success, and `corruptData` when a reply gives no size or
    ///   another length than the range; `cancelled`. After a failure the file holds exactly the
    ///   prefix written without a gap.
    public func fetch(
        _ request: HTTPRequest, into path: String, from offset: Int64, send: @escaping Send
    ) async throws(FileProviderError) -> HTTPReply {
        var start = max(0, offset)
        var recorded = false
        if start > 0 {
            // A ranged download that was killed may have written past the prefix it recorded.
            let prefix = try await files.run { PrefixRecord.recorded(atPath: path) }
            if let prefix {
                recorded = true
                start = min(start, max(0, prefix))
            }
        }
        if streams == 1 {
            // One stream: a plain `GET`, resumed with `Range` after `start`. Asking every file
            // for a first range instead (a `Range` header, a `206`) cost 12% more CPU on both
            // sides of 10,000 small downloads from Apache, for nothing when no range follows.
            var whole = request
            whole.sink = .file(path: path, offset: start)
            let reply = try await whole.sendResuming(with: send)
            if recorded, reply.isSuccess { await forgetRecord(at: path) }
            return reply
        }
        var first = request
        first.sink = .firstRange(path: path, range: start..<(start + firstRange))
        let reply = try await send(first)
        if reply.status == 416 {
            // Nothing at `start`: an empty file, or one shorter now than what was downloaded.
            var whole = request
            whole.sink = .file(path: path, offset: 0)
            let wholeReply = try await send(whole)
            if recorded { await forgetRecord(at: path) }
            return wholeReply
        }
        guard reply.status == 206 else {
            // A `200` wrote the whole file from its first byte (and removed any record); any
            // other status is the caller's to read.
            return reply
        }
        guard let size = try reply.head.resourceSize(of: reply.what) else {
            throw FileProviderError(.corruptData, "\(reply.what): the reply to a ranged request gave no size")
        }
        if reply.fileLength < size {
            try await fetchRest(request, into: path, from: reply.fileLength, to: size, recorded: recorded, send: send)
        } else if recorded {
            await forgetRecord(at: path)
        }
        var whole = reply
        whole.fileLength = size
        return whole
    }

    /// Downloads bytes `done..<size` after the first range: in ranges over several requests
    /// when more than ``threshold`` is left and the file keeps a prefix record, else in one.
    ///
    /// - Throws: the first error of a range (the others stop); `corruptData` when the ranges
    ///   did not add up to the file. The file is then cut back to its prefix.
    private func fetchRest(
        _ request: HTTPRequest, into path: String, from done: Int64, to size: Int64, recorded: Bool, send: @escaping Send
    ) async throws(FileProviderError) {
        let rest = size - done
        var streams = rest > threshold ? min(self.streams, Int((rest + rangeSize - 1) / rangeSize)) : 1
        if streams > 1 {
            let kept = try await files.run { PrefixRecord.record(done, atPath: path) }
            if !kept { streams = 1 }
        }
        let ranged = streams > 1
        let progress = request.progress
        let schedule = RangeSchedule(from: done, to: size, rangeSize: ranged ? rangeSize : rest) { prefix, rangesCompleted in
            // On the connection thread that wrote the bytes.
            if ranged && rangesCompleted { PrefixRecord.record(prefix, atPath: path) }
            progress?(prefix, size)
        }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<streams {
                group.addTask {
                    while let range = schedule.take() {
                        var part = request
                        part.sink = .range(path: path, range: range)
                        part.progress = { stored, _ in schedule.wrote(upTo: stored, in: range) }
                        do throws(FileProviderError) {
                            try Self.check(try await send(part), of: range)
                        } catch {
                            schedule.fail(error)
                            return
                        }
                    }
                }
            }
            // The first failure stops the other ranges (a cancelled task ends its request).
            for await _ in group where schedule.error != nil { group.cancelAll() }
        }
        let prefix = schedule.writtenPrefix
        let failure =
            schedule.error
            ?? (prefix == size
                ? nil : FileProviderError(.corruptData, "the ranges of \(request.endpoint) held \(prefix) of its \(size) bytes"))
        if ranged || recorded {
            _ = try? await files.runEvenIfCancelled { () -> Void in
                // Keep exactly the prefix: what is past it may have gaps. A file that cannot be
                // cut keeps its record, so a resume starts there.
                if ranged, failure != nil, truncate(path, off_t(prefix)) != 0 {
                    PrefixRecord.record(prefix, atPath: path)
                } else {
                    PrefixRecord.forget(atPath: path)
                }
            }
        }
        if let failure { throw failure }
    }

    /// Removes the prefix record from the file at `path`, off the cooperative pool.
    private func forgetRecord(at path: String) async {
        _ = try? await files.runEvenIfCancelled { PrefixRecord.forget(atPath: path) }
    }

    /// Checks the reply to the range `range`: a success that wrote all of it.
    ///
    /// - Throws: `versionNoLongerAvailable` for `404`, `410`, `412` and `416`; what
    ///   ``HTTPReply/check()`` throws for another status; `corruptData` for a success that
    ///   ended elsewhere.
    private static func check(_ reply: HTTPReply, of range: Range<Int64>) throws(FileProviderError) {
        switch reply.status {
        case 404, 410, 412, 416:
            throw FileProviderError(
                .versionNoLongerAvailable,
                "\(reply.what): the server has no bytes \(range.lowerBound)-\(range.upperBound - 1) of the file any more (\(reply.status)); it changed during the download"
            )
        default: try reply.check()
        }
        guard reply.fileLength == range.upperBound else {
            throw FileProviderError(
                .corruptData,
                "\(reply.what): the reply to bytes \(range.lowerBound)-\(range.upperBound - 1) ended at \(reply.fileLength)")
        }
    }
}
