import Foundation
import ProviderCore
import ProviderStore
import Testing

/// A fresh folder under the system's temporary folder, removed by ``remove()``.
struct TemporaryFolder: Sendable {
    let url: URL

    init(_ label: String = "store") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("fpk-\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ relative: String) -> URL { url.appendingPathComponent(relative) }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Opens a store on a fresh database, runs `body`, removes the folder.
func withStore<T>(_ body: (MetadataStore, TemporaryFolder) throws -> T) throws -> T {
    let folder = try TemporaryFolder()
    defer { folder.remove() }
    let store = try MetadataStore(url: folder.path("metadata.sqlite"))
    return try body(store, folder)
}

/// Inserts a domain named `name` and returns its id.
func makeDomain(_ store: MetadataStore, _ name: String = "d") throws -> Int64 {
    let record = try store.insertDomain(
        DomainRecord(name: name, backendKind: "test", configuration: ["root": "/x"], replicaPath: "/replicas/\(name)"))
    return try #require(record.id)
}

/// A record for a path: a folder when `folder`, else a file of `size` bytes. The identifier is
/// the path (as path-addressed stores do), the root's is `.rootContainer`.
func record(_ domainID: Int64, _ path: String, folder: Bool = false, size: Int64 = 0, version: UInt8 = 1) -> ItemRecord {
    let name = path.split(separator: "/").last.map(String.init) ?? "root"
    let parentPath = path.split(separator: "/").dropLast().joined(separator: "/")
    let identifier: ItemIdentifier = path.isEmpty ? .rootContainer : ItemIdentifier(path)
    let parent: ItemIdentifier = parentPath.isEmpty ? .rootContainer : ItemIdentifier(parentPath)
    let item = Item(
        identifier: identifier, parentIdentifier: parent, filename: name, kind: folder || path.isEmpty ? .folder : .file,
        size: folder ? 0 : size, contentModificationDate: Date(timeIntervalSince1970: 1_700_000_000),
        version: ItemVersion(content: Data([version]), metadata: Data([version, 0xee])))
    return ItemRecord(domainID: domainID, item: item, path: path)
}

/// Fails the current test with `code` unless `body` throws a `FileProviderError` with it.
func expectCode<T>(
    _ code: FileProviderError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
) {
    do {
        _ = try body()
        Issue.record("expected \(code.name), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as FileProviderError {
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected FileProviderError \(code.name), got \(error)", sourceLocation: sourceLocation)
    }
}
