import Foundation
import ProviderCore
import ProviderStore

/// Where the local scan reads the records it compares the replica with: one folder at a time,
/// so it never holds the whole domain. Blocking.
protocol ScanRecords {
    /// The record at `path` ("" is the root), or `nil`.
    /// - Throws: `localIOFailure` when the database fails.
    func record(at path: String) throws(FileProviderError) -> ItemRecord?
    /// The records whose path is directly inside the folder at `path`.
    /// - Throws: `localIOFailure` when the database fails.
    func children(of path: String) throws(FileProviderError) -> [ItemRecord]
    /// Calls `body` with every record below the folder at `path`, in path order, without
    /// holding them all.
    /// - Throws: `localIOFailure` when the database fails.
    func forEachDescendant(of path: String, _ body: (ItemRecord) -> Void) throws(FileProviderError)
    /// Calls `body` with the path of every folder record ("" is the root), without holding them.
    /// - Throws: `localIOFailure` when the database fails.
    func forEachFolderPath(_ body: (String) -> Void) throws(FileProviderError)
}

/// A domain's records in the metadata database, read folder by folder.
struct StoreScanRecords: ScanRecords {
    let store: MetadataStore
    let domainID: Int64
    /// Folders read as if the database did not know them nor anything below them (`""` is the
    /// whole domain): what ``ProviderManager/unsentChanges(inDomain:)`` does with folders that
    /// were never populated but hold something.
    var forgotten: [String] = []

    private func isForgotten(_ path: String) -> Bool { Self.isForgotten(path, forgotten: forgotten) }

    /// Whether `path` is one of the `forgotten` folders or below one (`""` forgets everything).
    static func isForgotten(_ path: String, forgotten: [String]) -> Bool {
        forgotten.contains { RelativePath(path).isAtOrBelow($0) }
    }

    func record(at path: String) throws(FileProviderError) -> ItemRecord? {
        if isForgotten(path) { return nil }
        return try store.item(domainID: domainID, path: path)
    }

    func children(of path: String) throws(FileProviderError) -> [ItemRecord] {
        let found = try store.children(domainID: domainID, inFolderAt: path)
        return forgotten.isEmpty ? found : found.filter { !isForgotten($0.path) }
    }

    func forEachDescendant(of path: String, _ body: (ItemRecord) -> Void) throws(FileProviderError) {
        try store.forEachDescendant(domainID: domainID, of: path) { record in
            if forgotten.isEmpty || !isForgotten(record.path) { body(record) }
        }
    }

    func forEachFolderPath(_ body: (String) -> Void) throws(FileProviderError) {
        try store.forEachFolderPath(domainID: domainID) { path in
            if forgotten.isEmpty || !isForgotten(path) { body(path) }
        }
    }
}

/// Records held in memory (for tests of the scan).
struct ListedScanRecords: ScanRecords {
    private var byPath: [String: ItemRecord] = [:]
    private var byFolder: [String: [ItemRecord]] = [:]

    init(_ records: [ItemRecord]) {
        for record in records where byPath[record.path] == nil {
            byPath[record.path] = record
            if !record.path.isEmpty { byFolder[RelativePath(record.path).parent, default: []].append(record) }
        }
    }

    func record(at path: String) -> ItemRecord? { byPath[path] }

    func children(of path: String) -> [ItemRecord] { byFolder[path] ?? [] }

    func forEachDescendant(of path: String, _ body: (ItemRecord) -> Void) {
        for record in byPath.values.sorted(by: { $0.path < $1.path })
        where !record.path.isEmpty && (path.isEmpty || record.path.hasPrefix(path + "/")) {
            body(record)
        }
    }

    func forEachFolderPath(_ body: (String) -> Void) {
        for record in byPath.values where record.kind == .folder { body(record.path) }
    }
}
