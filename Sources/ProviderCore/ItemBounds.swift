import Foundation

/// The values an item's numbers may take. A store that sends a size or a date outside them is
/// broken or lying: the item is refused (see ``RefusedItem``), never recorded, and nothing
/// computes with the value.
///
/// Adapters check every number where they decode it (a wire field, a JSON number, a header);
/// the engine checks every ``Item`` it takes from a backend once more.
public enum ItemBounds {
    /// The largest size a file may have: 2^53 bytes (8 PiB), far above any real file, exact
    /// in a `Double` (JSON numbers, progress) and small enough that sizes add up without
    /// overflow in any real listing.
    public static let maximumSize: Int64 = 1 << 53

    /// The earliest date an item may have: 1700-01-01T00:00:00Z. The replica records file
    /// times in nanoseconds in an `Int64`, which holds 1678 to 2262.
    public static let earliestDate = Date(timeIntervalSince1970: -8_520_336_000)
    /// The latest date an item may have: 2200-01-01T00:00:00Z.
    public static let latestDate = Date(timeIntervalSince1970: 7_258_118_400)

    /// The most entries one folder's listing may have: 2,000,000. A real folder that large is
    /// rare; a store that keeps sending names (a loop, a lie) would otherwise fill the memory.
    /// A listing past it fails (``tooManyEntries(in:)``): the folder is reported as not
    /// listed and its stored items are kept.
    public static let maximumEntriesPerFolder = 2_000_000

    /// The error for a listing of `folder` past ``maximumEntriesPerFolder``.
    public static func tooManyEntries(in folder: String) -> FileProviderError {
        FileProviderError(
            .corruptData,
            "\(folder) lists more than \(maximumEntriesPerFolder) entries (a store that keeps listing?); it was not listed")
    }

    /// Why `size` cannot be the size of an item's contents, or `nil`.
    @inlinable public static func problem(withSize size: some BinaryInteger) -> String? {
        if size < 0 { return "its size \(size) is negative" }
        if size > maximumSize { return "its size \(size) is over the limit of \(maximumSize) bytes" }
        return nil
    }

    /// Why `date` cannot be one of an item's dates (`what` says which), or `nil`.
    public static func problem(withDate date: Date, _ what: String) -> String? {
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite else { return "its \(what) is not a number (\(seconds))" }
        guard date >= earliestDate, date < latestDate else {
            return "its \(what) (\(seconds) s since 1970) is outside 1700–2200"
        }
        return nil
    }

    /// Why a date in seconds since 1970 (as a store sends it) cannot be an item's date, or `nil`.
    @inlinable public static func problem(withSeconds seconds: some BinaryInteger, _ what: String) -> String? {
        guard let value = Int64(exactly: seconds), value >= Int64(earliestDate.timeIntervalSince1970),
            value < Int64(latestDate.timeIntervalSince1970)
        else {
            return "its \(what) (\(seconds) s since 1970) is outside 1700–2200"
        }
        return nil
    }

    /// Why a date in nanoseconds since 1970 (as a store sends it) cannot be an item's date, or
    /// `nil`.
    public static func problem(withNanoseconds nanoseconds: Int64, _ what: String) -> String? {
        problem(withSeconds: nanoseconds / 1_000_000_000, what).map { _ in
            "its \(what) (\(nanoseconds) ns since 1970) is outside 1700–2200"
        }
    }

    /// Why an item's values are impossible, or `nil`: a size that is negative or over
    /// ``maximumSize`` (a folder's size is not looked at), a date that is not finite or
    /// outside ``earliestDate``..<``latestDate``.
    public static func problem(with item: Item) -> String? {
        problem(
            kind: item.kind, size: item.size, contentModificationDate: item.contentModificationDate,
            creationDate: item.creationDate)
    }

    /// ``problem(with:)`` from an item's values, for callers that read them in place (passing
    /// an item held in an array copies it).
    public static func problem(kind: ItemKind, size: Int64, contentModificationDate: Date?, creationDate: Date?) -> String? {
        if kind != .folder, let problem = problem(withSize: size) { return problem }
        if let date = contentModificationDate, let problem = problem(withDate: date, "modification date") {
            return problem
        }
        if let date = creationDate, let problem = problem(withDate: date, "creation date") { return problem }
        return nil
    }

    /// Returns `item` when its values are possible.
    ///
    /// - Throws: `corruptData` naming the item and the value when they are not (see
    ///   ``problem(with:)``).
    public static func check(_ item: Item) throws(FileProviderError) -> Item {
        if let problem = problem(with: item) {
            throw FileProviderError(.corruptData, RefusedItem(item, problem).message)
        }
        return item
    }
}

/// An entry of a store's listing that was left out because one of its values is impossible:
/// what the engine reports as `DOMAIN:/folder: skipped an item: …`.
public struct RefusedItem: Hashable, Sendable {
    /// The item's identifier when it is known; the engine keeps a stored item of that
    /// identifier as it was.
    public var identifier: ItemIdentifier?
    /// The name in the listing, as far as it could be read.
    public var filename: String
    /// What is impossible, such as `its size -1 is negative`.
    public var reason: String

    public init(identifier: ItemIdentifier?, filename: String, reason: String) {
        self.identifier = identifier
        self.filename = filename
        self.reason = reason
    }

    /// A refusal of `item` for `reason`.
    public init(_ item: Item, _ reason: String) {
        self.init(identifier: item.identifier, filename: item.filename, reason: reason)
    }

    /// `"name": reason; the store sent an impossible value`.
    public var message: String {
        "\(filename.debugDescription): \(reason); the store sent an impossible value, so the item was left out"
    }
}
