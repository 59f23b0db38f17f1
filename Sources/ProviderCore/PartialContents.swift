/// What a ranged read wrote: ``Backend/fetchPartialContents(for:version:range:into:)``.
public struct PartialContents: Hashable, Sendable {
    /// The item whose bytes were written; its content version is the one asked for.
    public var item: Item
    /// The bytes written: the range asked for, clamped to `0..<item.size` (empty, `size..<size`,
    /// when it started at or past the end).
    public var range: Range<Int64>

    public init(item: Item, range: Range<Int64>) {
        self.item = item
        self.range = range
    }

    /// The range a read of `requested` writes in a file of `size` bytes:
    /// `requested.clamped(to: 0..<size)`.
    public static func clamp(_ requested: Range<Int64>, toSize size: Int64) -> Range<Int64> {
        requested.clamped(to: 0..<max(0, size))
    }

    /// What a ranged read of `version` answered with 416 (Range Not Satisfiable) returns, given
    /// the item as the store describes it now: the empty range at its end, when it is still
    /// that version and the range starts at or past its end.
    /// - Throws: `versionNoLongerAvailable` when the item is another version now; `corruptData`
    ///   when the store refused bytes the item has (`path` names it in the message).
    public static func refused(
        _ range: Range<Int64>, of item: Item, version: ItemVersion, path: String
    ) throws(FileProviderError) -> PartialContents {
        if item.version.content != version.content {
            throw FileProviderError(.versionNoLongerAvailable, "\(path): the requested version is gone")
        }
        guard range.lowerBound >= item.size else {
            throw FileProviderError(.corruptData, "the server refused bytes \(range) of \(path), which has \(item.size) bytes")
        }
        return PartialContents(item: item, range: item.size..<item.size)
    }

    /// Throws `invalidArgument` for a range no read can ask for: empty, or starting below 0.
    public static func validate(_ range: Range<Int64>) throws(FileProviderError) {
        guard range.lowerBound >= 0, !range.isEmpty else {
            throw FileProviderError(
                .invalidArgument, "a ranged read needs a non-empty range from 0 on, not \(range.lowerBound)..<\(range.upperBound)")
        }
    }
}
