import Foundation
import ProviderCore
import ProviderStore

extension RecordReader {
    /// ``DomainController/list(at:recursive:)``.
    /// - Throws: `noSuchItem` when no item is at `path`; `localIOFailure` when the database fails.
    func list(at path: String, recursive: Bool) throws(FileProviderError) -> [ItemRecord] {
        let (store, domainID) = (context.store, context.domainID)
        let target = try record(at: path)
        guard target.kind == .folder else { return [target] }
        if recursive { return try store.descendants(domainID: domainID, of: path) }
        return try store.children(domainID: domainID, parent: target.identifier)
    }

    /// ``DomainController/persistentIdentifierForItem(at:)``.
    /// - Throws: `localIOFailure` when the database fails.
    func identifier(ofItemAt url: URL) throws(FileProviderError) -> ItemIdentifier? {
        let (store, domainID, replica) = (context.store, context.domainID, context.replica)
        let root = replica.root.standardizedFileURL.path
        var path = url.standardizedFileURL.path
        guard path == root || path.hasPrefix(root + "/") else { return nil }
        path = path == root ? "" : String(path.dropFirst(root.count + 1))
        if let record = try store.item(domainID: domainID, path: path) { return record.identifier }
        let (folder, name) = RelativePath(path).split
        guard let item = replica.itemName(ofPlaceholderFile: name, in: folder) else { return nil }
        return try store.item(domainID: domainID, path: folder.isEmpty ? item : folder + "/" + item)?.identifier
    }
}
