import Foundation
import ProviderCore

/// When an upload goes in parts (S3's multipart upload) and how big the parts are.
public struct MultipartSettings: Sendable {
    /// Files larger than this go in parts; smaller ones in one `PutObject` (at most 5 GiB).
    public var threshold: Int64
    /// The smallest part (S3 refuses parts under 5 MiB but the last); larger files get larger
    /// parts, so that none has more than 10,000.
    public var minimumPartSize: Int64
    /// Uploads under the domain's prefix started this many seconds ago and not finished are
    /// taken as abandoned by an earlier run and aborted.
    public var abandonedAfter: TimeInterval
    /// Objects larger than this are copied (a move, a rename) in parts with `UploadPartCopy`;
    /// smaller ones with one `CopyObject`, which takes at most 5 GiB (the default).
    public var copyThreshold: Int64

    /// The most parts one upload may have (S3's limit).
    public static let maximumParts: Int64 = 10_000
    /// The largest object a multipart upload may make (S3's limit, 5 TiB).
    public static let maximumObjectSize: Int64 = 5 << 40

    public init(
        threshold: Int64 = 64 << 20, minimumPartSize: Int64 = 8 << 20, abandonedAfter: TimeInterval = 86_400,
        copyThreshold: Int64 = 5 << 30
    ) {
        self.threshold = threshold
        self.minimumPartSize = minimumPartSize
        self.abandonedAfter = abandonedAfter
        self.copyThreshold = copyThreshold
    }

    /// - Throws: `invalidArgument` for a threshold or copy threshold over 5 GiB or below 1 byte, or a minimum
    ///   part size outside 5 MiB to 5 GiB.
    func check() throws(FileProviderError) {
        guard (1...(5 << 30)).contains(threshold) else {
            throw FileProviderError(.invalidArgument, "the multipart threshold must be between 1 byte and 5 GiB, not \(threshold)")
        }
        guard (1...(5 << 30)).contains(copyThreshold) else {
            throw FileProviderError(.invalidArgument, "the copy threshold must be between 1 byte and 5 GiB, not \(copyThreshold)")
        }
        guard ((5 << 20)...(5 << 30)).contains(minimumPartSize) else {
            throw FileProviderError(.invalidArgument, "the part size must be between 5 MiB and 5 GiB, not \(minimumPartSize)")
        }
    }

    /// The part size for a file of `size` bytes: the minimum, or the smallest whole number of
    /// MiB that keeps the parts at 10,000 or fewer.
    func partSize(for size: Int64) -> Int64 {
        let needed = (size + Self.maximumParts - 1) / Self.maximumParts
        let mebibyte: Int64 = 1 << 20
        return max(minimumPartSize, (needed + mebibyte - 1) / mebibyte * mebibyte)
    }

    /// The byte ranges of a file's parts, in order (part 1 first).
    func parts(for size: Int64) -> [Range<Int64>] {
        let part = partSize(for: size)
        return stride(from: Int64(0), to: size, by: Int(part)).map { $0..<min(size, $0 + part) }
    }
}
