import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// How much of a file system downloads leave free, so that the rest of the system (and the
/// engine itself: its database, placeholders, the journal) keeps working when a domain holds
/// more than fits.
///
/// The reserve is 1 % of the file system, at least ``minimum`` and at most ``maximum``, but
/// never more than a tenth of the file system:
/// - 64 MiB at least: SQLite's write-ahead log grows by a batch of records before it is folded
///   back, placeholders take a block each (10,000 of them are 40 MiB on ext4), and the
///   programs the user runs (an editor saving, a browser's cache) need room too;
/// - 1 % on larger disks, since file systems slow down and fragment when nearly full; capped
///   at 2 GiB, so a 4 TB disk is not held back by 40 GB;
/// - a tenth at most, so a small file system (a memory file system, a USB stick) can still be
///   used: on 8 MiB, 819 KiB stays free.
public struct SpaceReserve: Sendable, Hashable {
    /// The share of the file system kept free, before ``minimum`` and ``maximum`` apply.
    public var fraction: Double
    /// The least kept free on file systems of at least ten times this size.
    public var minimum: Int64
    /// The most kept free.
    public var maximum: Int64
    /// The largest share of the file system ever kept free (for small file systems).
    public var largestShare: Double

    public init(fraction: Double = 0.01, minimum: Int64 = 64 << 20, maximum: Int64 = 2 << 30, largestShare: Double = 0.1) {
        self.fraction = max(0, min(1, fraction))
        self.minimum = max(0, minimum)
        self.maximum = max(self.minimum, maximum)
        self.largestShare = max(0, min(1, largestShare))
    }

    /// 1 % of the file system, between 64 MiB and 2 GiB, at most a tenth of it.
    public static let standard = SpaceReserve()

    /// Exactly `bytes` kept free, whatever the size of the file system (for tests).
    public static func fixed(_ bytes: Int64) -> SpaceReserve {
        SpaceReserve(fraction: 0, minimum: bytes, maximum: bytes, largestShare: 1)
    }

    /// The bytes kept free on a file system of `size` bytes.
    public func bytes(ofFileSystemSize size: Int64) -> Int64 {
        let size = Double(max(0, size))
        let wanted = min(Double(maximum), max(Double(minimum), size * fraction))
        return Int64(min(wanted, size * largestShare))
    }
}

/// The free space of a file system, as `statvfs` gives it.
struct FileSystemSpace: Sendable {
    /// The file system's device number (`st_dev`): downloads on one device share its space.
    var device: UInt64
    /// Bytes an unprivileged program may still write (`f_bavail`).
    var available: Int64
    /// The size of the file system.
    var size: Int64
    /// The unit of allocation: a file takes whole blocks.
    var blockSize: Int64

    /// Measures the file system holding `path`, or `nil` when `path` cannot be examined.
    static func measure(_ path: String) -> FileSystemSpace? {
        var info = statvfs()
        var status = stat()
        guard statvfs(path, &info) == 0, stat(path, &status) == 0 else { return nil }
        let unit = Int64(clamping: UInt64(info.f_frsize != 0 ? info.f_frsize : info.f_bsize))
        return FileSystemSpace(
            device: UInt64(status.st_dev),
            available: Int64(clamping: UInt64(info.f_bavail)).multipliedClamped(by: unit),
            size: Int64(clamping: UInt64(info.f_blocks)).multipliedClamped(by: unit),
            blockSize: max(1, unit))
    }

    /// `bytes` rounded up to whole blocks (saturating).
    func rounded(_ bytes: Int64) -> Int64 {
        let bytes = max(0, bytes)
        let (blocks, remainder) = bytes.quotientAndRemainder(dividingBy: blockSize)
        return (blocks + (remainder > 0 ? 1 : 0)).multipliedClamped(by: blockSize)
    }

    /// The bytes the file at `path` takes on disk (its blocks, so a sparse file counts what it
    /// holds), 0 when there is none.
    static func allocated(atPath path: String) -> Int64 {
        var status = stat()
        guard lstat(path, &status) == 0 else { return 0 }
        return Int64(status.st_blocks).multipliedClamped(by: 512)
    }

    /// The folder the file system holding `path` is mounted on (for messages): the highest
    /// folder above `path` on the same device.
    static func mountPoint(of path: String) -> String {
        var status = stat()
        guard stat(path, &status) == 0 else { return path }
        let device = status.st_dev
        var current = URL(fileURLWithPath: path).standardizedFileURL.path
        while current != "/" {
            let parent = (current as NSString).deletingLastPathComponent
            var above = stat()
            guard stat(parent, &above) == 0, above.st_dev == device else { break }
            current = parent
        }
        return current
    }

    /// `1.2 GiB`, `300 MiB`, `512 KiB`, `100 bytes`; rounded up with `roundingUp` (for amounts
    /// to free, so freeing what it says is enough).
    static func format(_ bytes: Int64, roundingUp: Bool = false) -> String {
        if bytes < 1024 { return "\(max(0, bytes)) bytes" }
        var value = Double(bytes)
        var unit = "bytes"
        for next in ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"] {
            guard value >= 1024 else { break }
            value /= 1024
            unit = next
        }
        let tenths = roundingUp ? (value * 10).rounded(.up) : (value * 10).rounded()
        let whole = tenths >= 1000 || tenths.truncatingRemainder(dividingBy: 10) == 0
        let shown = whole ? String(Int64(roundingUp ? value.rounded(.up) : value.rounded())) : String(format: "%.1f", tenths / 10)
        return "\(shown) \(unit)"
    }
}

/// The space promised to the downloads running now, per file system, and the check that a new
/// download fits: the file system's free space minus what the running downloads still have to
/// write, minus the reserve (see ``SpaceReserve``), must hold the new file.
///
/// One ledger serves every domain of a ``ProviderManager``, so eight downloads starting at once
/// (or two domains on one disk) do not each see the same free space. What a download still has
/// to write is its size minus what its staging file already takes, measured at each check, so
/// a download's promise shrinks as its file grows and free space shrinks with it. Downloads in
/// other processes are not counted until they have written their bytes.
///
/// All methods block (they call `statvfs` and `stat`): run them on the engine's executor.
final class SpaceReservations: Sendable {
    /// What is kept free on each file system.
    let reserve: SpaceReserve
    private let promises = Mutex<(next: Int, byDevice: [UInt64: [Int: Promise]])>((0, [:]))

    /// A download's promise: its staging file and the size it will reach.
    private struct Promise {
        var stagingFile: String
        var size: Int64
    }

    /// A reservation to give back with ``release(_:)`` when the download ends.
    struct Ticket: Sendable {
        fileprivate var id: Int
        fileprivate var device: UInt64
    }

    init(reserve: SpaceReserve) {
        self.reserve = reserve
    }

    /// Checks that a file of `size` bytes fits on the file system of `folder` (the staging
    /// folder) beside the running downloads and the reserve, and promises it the space.
    ///
    /// What `stagingFile` already takes counts as written: the bytes of a download to resume
    /// (`canResume`), or space the download gets back when it empties a leftover file. When the
    /// file does not fit, a leftover staging file is deleted: always when it cannot be
    /// resumed, and a resumable one when it holds space of the reserve (see
    /// ``outOfSpace(_:size:stagingFile:folder:ticket:canResume:)``).
    /// - Throws: `fileWriteOutOfSpace` saying how much is needed, free, kept free, promised to
    ///   other downloads and to be freed; nothing is promised then.
    func reserve(size: Int64, stagingFile: String, folder: String, canResume: Bool) throws(FileProviderError) -> Ticket {
        try promises.withLock { state -> Result<Ticket, FileProviderError> in
            var space = FileSystemSpace.measure(folder)
            var total: Int64?
            return promise(
                size: size, stagingFile: stagingFile, folder: folder, canResume: canResume, space: &space, state: &state, total: &total)
        }.get()
    }

    /// ``reserve(size:stagingFile:folder:canResume:)`` for several downloads that cannot
    /// resume (a batch of small files), measuring the file system once: each file's ticket, or
    /// the error that method would throw for it.
    func reserve(_ files: [(size: Int64, stagingFile: String)], folder: String) -> [Result<Ticket, FileProviderError>] {
        promises.withLock { state in
            var space = FileSystemSpace.measure(folder)
            // The promises' total is summed once for the batch and kept up to date, not summed
            // again for each file (hundreds of promises while `depth` batches run).
            var total: Int64?
            return files.map { file in
                promise(
                    size: file.size, stagingFile: file.stagingFile, folder: folder, canResume: false, space: &space, state: &state,
                    total: &total)
            }
        }
    }

    /// The promise of one download against `space`, measured under the lock (`nil`: nothing
    /// to measure with), which is measured again when a leftover staging file is deleted.
    /// `total` is the sum of the rounded sizes of the promises on `space`'s device (`nil`: not
    /// summed yet); it is kept true for the next call under the same lock, or set to `nil`.
    private func promise(
        size: Int64, stagingFile: String, folder: String, canResume: Bool, space measured: inout FileSystemSpace?,
        state: inout (next: Int, byDevice: [UInt64: [Int: Promise]]), total: inout Int64?
    ) -> Result<Ticket, FileProviderError> {
        guard var space = measured else {
            // Nothing to measure with: do not stand in the way (a full disk still shows
            // when the file is written).
            state.next += 1
            return .success(Ticket(id: state.next, device: .max))
        }
        let kept = reserve.bytes(ofFileSystemSize: space.size)
        let device = space.device
        let summed =
            total ?? (state.byDevice[device] ?? [:]).values.reduce(Int64(0)) { $0.addingClamped(space.rounded($1.size)) }
        let most = summed.addingClamped(space.rounded(size))
        func promise() -> Result<Ticket, FileProviderError> {
            state.next += 1
            state.byDevice[device, default: [:]][state.next] = Promise(stagingFile: stagingFile, size: size)
            return .success(Ticket(id: state.next, device: device))
        }
        // Plenty of room even if no byte were written yet: no file needs a look.
        if most <= space.available.subtractingClamped(kept) {
            total = most
            return promise()
        }
        // From here on the space may be measured again: the next call sums afresh.
        total = nil
        let promised = Self.outstanding(state.byDevice[device] ?? [:], on: space)
        var written = FileSystemSpace.allocated(atPath: stagingFile)
        let needed = max(0, space.rounded(size) - written)
        if needed <= space.available.subtractingClamped(promised.bytes).subtractingClamped(kept) { return promise() }
        var partial: Partial?
        if written > 0 {
            let keep = canResume && space.available.subtractingClamped(promised.bytes) >= kept
            if !keep {
                unlink(stagingFile)
                space = FileSystemSpace.measure(folder) ?? space
                measured = space
            }
            partial = Partial(written: written, kept: keep, failure: nil)
            if !keep { written = 0 }
        }
        return .failure(
            Self.notEnoughSpace(
                needed: max(0, space.rounded(size) - written), space: space, kept: kept, promised: promised,
                folder: folder, partial: partial))
    }

    /// Gives back the space promised with `ticket`.
    func release(_ ticket: Ticket) {
        promises.withLock { state in
            state.byDevice[ticket.device]?[ticket.id] = nil
            if state.byDevice[ticket.device]?.isEmpty == true { state.byDevice[ticket.device] = nil }
        }
    }

    /// What a download that failed with `error` does about space: `nil` when `error` is not
    /// about a full disk; else the error to report (`fileWriteOutOfSpace`, saying how much
    /// space is needed) and whether the partial file in `stagingFile` stayed for a resume.
    ///
    /// A full disk is `fileWriteOutOfSpace`, `insufficientQuota` (a download never uses the
    /// store's space, so an adapter saying so means the local disk) or a `localIOFailure` while
    /// less than 1 MiB is left. The partial file stays only when `canResume` and the free
    /// space, after what the other running downloads still need, is at least the reserve;
    /// otherwise it is deleted, since it would hold the disk full for every other download.
    func outOfSpace(
        _ error: FileProviderError, size: Int64, stagingFile: String, folder: String, ticket: Ticket, canResume: Bool
    ) -> (error: FileProviderError, keptPartial: Bool)? {
        promises.withLock { (state) -> (error: FileProviderError, keptPartial: Bool)? in
            guard var space = FileSystemSpace.measure(folder) else { return nil }
            let full: Bool
            switch error.code {
            case .fileWriteOutOfSpace, .insufficientQuota: full = true
            case .localIOFailure: full = space.available < 1 << 20
            default: full = false
            }
            guard full else { return nil }
            var others = state.byDevice[space.device] ?? [:]
            others[ticket.id] = nil
            let promised = Self.outstanding(others, on: space)
            let kept = reserve.bytes(ofFileSystemSize: space.size)
            let written = FileSystemSpace.allocated(atPath: stagingFile)
            let keep = canResume && written > 0 && space.available.subtractingClamped(promised.bytes) >= kept
            if !keep {
                unlink(stagingFile)
                space = FileSystemSpace.measure(folder) ?? space
            }
            let message = Self.notEnoughSpace(
                needed: max(0, space.rounded(size) - (keep ? written : 0)), space: space, kept: kept, promised: promised,
                folder: folder, partial: Partial(written: written, kept: keep, failure: error.message))
            return (message, keep)
        }
    }

    /// What the downloads in `promises` still have to write, and how many they are.
    private static func outstanding(_ promises: [Int: Promise], on space: FileSystemSpace) -> (bytes: Int64, count: Int) {
        var total: Int64 = 0
        for promise in promises.values {
            let left = max(0, space.rounded(promise.size) - FileSystemSpace.allocated(atPath: promise.stagingFile))
            total = total.addingClamped(left)
        }
        return (total, promises.count)
    }

    /// The partial file of a download that does not fit: how much it holds, whether it stays
    /// for a resume, and the adapter's error when the disk filled up during the download.
    private struct Partial {
        var written: Int64
        var kept: Bool
        var failure: String?
    }

    /// The message of a download that does not fit.
    private static func notEnoughSpace(
        needed: Int64, space: FileSystemSpace, kept: Int64, promised: (bytes: Int64, count: Int), folder: String,
        partial: Partial?
    ) -> FileProviderError {
        let mount = FileSystemSpace.mountPoint(of: folder)
        let room = space.available.subtractingClamped(promised.bytes).subtractingClamped(kept)
        let shortfall = needed.subtractingClamped(room)
        var text = "not enough space"
        if let failure = partial?.failure {
            text += ": the download ran out of space on \(mount) (\(failure))"
        }
        text += ": the file needs \(FileSystemSpace.format(needed))"
        if let partial {
            let size = FileSystemSpace.format(partial.written)
            text +=
                partial.kept
                ? " more (its partial download of \(size) stays to be resumed)"
                : " (its partial download of \(size) was deleted to give the space back)"
        }
        text += "; \(mount) has \(FileSystemSpace.format(space.available)) free, \(FileSystemSpace.format(kept)) of it kept in reserve"
        if promised.count > 0 {
            let downloads = promised.count == 1 ? "another download" : "\(promised.count) other downloads"
            text += " and \(FileSystemSpace.format(promised.bytes)) promised to \(downloads) in progress"
        }
        if shortfall > 0 {
            text += "; free \(FileSystemSpace.format(max(space.blockSize, shortfall), roundingUp: true)) on \(mount) and try again"
        } else {
            // The file system has room: the adapter's write hit a limit of its own.
            text += ", which is enough: a disk quota or another limit stopped the write; raise or free it and try again"
        }
        return FileProviderError(.fileWriteOutOfSpace, text)
    }
}

extension Int64 {
    /// `self * other`, or `Int64.max` when that overflows (both are never negative here).
    fileprivate func multipliedClamped(by other: Int64) -> Int64 {
        let (value, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? .max : value
    }

    /// `self + other`, or `Int64.max` when that overflows.
    fileprivate func addingClamped(_ other: Int64) -> Int64 {
        let (value, overflow) = addingReportingOverflow(other)
        return overflow ? .max : value
    }

    /// `self - other`, or the nearest end of the range when that overflows.
    fileprivate func subtractingClamped(_ other: Int64) -> Int64 {
        let (value, overflow) = subtractingReportingOverflow(other)
        return overflow ? (other > 0 ? .min : .max) : value
    }
}
