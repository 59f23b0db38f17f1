import AdapterKit
import Foundation
import ProviderCore

/// Turns the raw entries of a folder listing into safe, sorted names. A name from a server is
/// never trusted: invalid UTF-8, `.`, `..`, names with `/` or NUL, names over 255 bytes, the
/// backend's own staging files and special files are left out.
enum SFTPListing {
    struct Entry: Sendable {
        var name: String
        var attributes: RemoteAttributes
    }

    /// The entries that may become items of `folder`, sorted by the bytes of their names.
    static func decode(_ raw: [(name: [UInt8], attributes: RemoteAttributes)], in folder: SFTPPath) -> [Entry] {
        // Sorted as raw bytes (one memcmp a comparison): the order of the decoded names, which
        // are UTF-8, is the same.
        let order = raw.indices.sorted { ByteOrder.precedes(raw[$0].name, raw[$1].name) }
        var entries: [Entry] = []
        entries.reserveCapacity(raw.count)
        for index in order {
            let (bytes, attributes) = raw[index]
            guard let name = Filename.decode(bytes), folder.allowsChild(named: name), attributes.kind != nil else {
                continue
            }
            entries.append(Entry(name: name, attributes: attributes))
        }
        return entries
    }

    /// The names in a folder's raw listing that are abandoned staging files of this backend
    /// (see ``StagingName/isAbandoned(_:modified:accessed:now:)``): files or symlinks (a
    /// staged symlink) only, never a folder (a recursive deletion renames the folder it
    /// deletes to a staging name), and only when the server gave both times.
    static func abandonedStagingFiles(
        in raw: [(name: [UInt8], attributes: RemoteAttributes)], now: Date = Date()
    ) -> [String] {
        var names: [String] = []
        for (bytes, attributes) in raw where bytes.starts(with: StagingName.prefix.utf8) {
            guard let name = Filename.decode(bytes), attributes.kind == .file || attributes.kind == .symlink,
                attributes.hasTimes,
                StagingName.isAbandoned(
                    name, modified: attributes.modificationTime, accessed: attributes.accessTime, now: now)
            else { continue }
            names.append(name)
        }
        return names
    }

    /// The index of the first entry sorted after `name`.
    static func firstIndex(in entries: [Entry], after name: [UInt8]) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if name.lexicographicallyPrecedes(entries[middle].name.utf8) {
                high = middle
            } else {
                low = middle + 1
            }
        }
        return low
    }
}

extension RemoteAttributes {
    /// Whether both times are known: a server that leaves them out gives 0, which would make
    /// any file look decades old.
    var hasTimes: Bool { modificationTime > 0 && accessTime > 0 }
}

/// Sorted listings of large folders for a short while, so that paging through a folder reads it
/// once instead of once per page. A listing is used only for pages after the first, for at most
/// ``lifetime`` seconds; the first page always reads the folder again.
final class ListingCache: @unchecked Sendable {
    static let capacity = 4
    static let lifetime: TimeInterval = 30

    private let lock = NSLock()
    private var entries: [String: (listing: [SFTPListing.Entry], time: Date)] = [:]
    private var order: [String] = []

    func listing(for folder: String) -> [SFTPListing.Entry]? {
        lock.withLock {
            guard let entry = entries[folder], Date().timeIntervalSince(entry.time) < Self.lifetime else { return nil }
            return entry.listing
        }
    }

    func store(_ listing: [SFTPListing.Entry], for folder: String) {
        lock.withLock {
            if entries[folder] == nil { order.append(folder) }
            entries[folder] = (listing, Date())
            while order.count > Self.capacity { entries[order.removeFirst()] = nil }
        }
    }

    func remove(_ folder: String) { _ = lock.withLock { entries.removeValue(forKey: folder) } }
}
