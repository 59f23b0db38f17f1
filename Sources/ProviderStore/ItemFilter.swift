import Foundation
import ProviderCore

/// What ``MetadataStore/searchPage(domainID:filter:after:limit:)`` matches, every test at once
/// (a `nil` or empty test matches everything). Names and paths are matched as GNU `find`
/// matches them: globs by `fnmatch(3)`, regular expressions by POSIX `regexec(3)` (extended
/// syntax), both in UTF-8.
public struct ItemFilter: Sendable, Hashable {
    /// A glob (`*`, `?`, `[...]`, `\` escapes) and whether case is ignored (`-iname`).
    public struct Pattern: Sendable, Hashable {
        public var text: String
        public var ignoresCase: Bool
        public init(_ text: String, ignoresCase: Bool = false) {
            self.text = text
            self.ignoresCase = ignoresCase
        }
    }

    /// How a value compares with a bound.
    public enum Comparison: String, Sendable, Hashable {
        case less, equal, greater
    }

    /// GNU `find`'s `-size`: the size in `unit`-byte units, rounded up, compared with `count`.
    public struct SizeTest: Sendable, Hashable {
        public var comparison: Comparison
        public var count: Int64
        public var unit: Int64
        public init(_ comparison: Comparison, _ count: Int64, unit: Int64) {
            self.comparison = comparison
            self.count = count
            self.unit = max(1, unit)
        }
    }

    /// A bound on the modification date: before (`less`) or after (`greater`) `date`, the date
    /// itself included when `inclusive`.
    public struct DateBound: Sendable, Hashable {
        public var comparison: Comparison
        public var date: Date
        public var inclusive: Bool
        public init(_ comparison: Comparison, _ date: Date, inclusive: Bool) {
            self.comparison = comparison
            self.date = date
            self.inclusive = inclusive
        }
    }

    /// A glob every item's name matches (GNU `find -name`, `-iname`).
    public var names: [Pattern] = []
    /// A glob the item's path, starting with `/`, matches; `*` matches `/` too (`-path`).
    public var paths: [Pattern] = []
    /// Extended regular expressions the whole path, starting with `/`, matches (`-regex`).
    public var regexes: [Pattern] = []
    /// The kinds matched; empty for all.
    public var kinds: Set<ItemKind> = []
    public var sizes: [SizeTest] = []
    /// Items without a modification date never match a date bound.
    public var modified: [DateBound] = []
    /// Only files whose contents are in the replica (`state = 'materialized'`).
    public var downloaded = false
    /// Only files whose contents are not in the replica and folders not populated yet.
    public var dataless = false
    /// Only items whose recorded content hash is this one: `algorithm:hex`, or the hex digits
    /// alone for any algorithm (case ignored).
    public var contentHash: String?
    /// Only the item at this path and what is below it ("" for the whole domain, the root left
    /// out).
    public var below: String = ""

    public init() {}
}
