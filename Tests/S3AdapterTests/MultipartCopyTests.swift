import AdapterKit
import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import S3Adapter

/// Moves of objects larger than one `CopyObject` may copy (5 GiB on S3; lowered here to 6 MiB)
/// go in parts with `UploadPartCopy`, against the SeaweedFS cluster and moto: a renamed file and
/// a file in a moved folder read back whole, the old keys are gone, no upload is left, and a
/// source that changed under the copy is refused.
@Suite("S3 multipart copies")
struct MultipartCopyTests {
    static let settings = MultipartSettings(threshold: 64 << 20, minimumPartSize: 5 << 20, copyThreshold: 6 << 20)

    @Test(arguments: MultipartTests.Server.allCases)
    func aLargeObjectIsRenamedAndMovedInPartsAndReadsBackWhole(_ server: MultipartTests.Server) async throws {
        let backend = try await MultipartTests.backend(server, multipart: Self.settings)
        let scratch = try MultipartTests.Scratch()
        let size = 13 << 20 + 7
        let (file, data) = try scratch.file("big", size: size, seed: 9)
        let created = try await backend.createItem(
            basedOn: MultipartTests.template("big.bin", size: size), fields: [.contents], contents: file, options: [])
        #expect(!String(decoding: created.item.version.content, as: UTF8.self).contains("-"), "one PutObject below the threshold")

        var renamed = created.item
        renamed.filename = "renamed.bin"
        let moved = try await backend.modifyItem(
            renamed, baseVersion: created.item.version, changedFields: [.filename], contents: nil, options: [])
        #expect(moved.item.filename == "renamed.bin")
        #expect(moved.item.size == Int64(size))
        let etag = String(decoding: moved.item.version.content, as: UTF8.self)
        #expect(etag.hasSuffix("-3"), "copied in three parts: \(etag)")
        #expect(try await scratch.download(backend, moved.item.identifier, version: moved.item.version) == data)
        #expect(try await backend.item(at: ItemPath(created.item.identifier)) == nil, "the old key is gone")

        // A folder holding a large object, moved: every key copied (the large one in parts).
        let folder = try await backend.createItem(
            basedOn: Item.template(identifier: ItemIdentifier("tmp-dir"), parent: .rootContainer, filename: "dir", kind: .folder),
            fields: [], contents: nil, options: [])
        var inside = MultipartTests.template("inside.bin", size: size)
        inside.parentIdentifier = folder.item.identifier
        _ = try await backend.createItem(basedOn: inside, fields: [.contents], contents: file, options: [])
        var renamedFolder = folder.item
        renamedFolder.filename = "elsewhere"
        let movedFolder = try await backend.modifyItem(
            renamedFolder, baseVersion: folder.item.version, changedFields: [.filename], contents: nil, options: [])
        let newPath = try ItemPath(movedFolder.item.identifier).appending("inside.bin")
        #expect(try await scratch.download(backend, newPath.identifier, version: nil) == data)
        #expect(try await backend.item(at: ItemPath(folder.item.identifier).appending("inside.bin")) == nil)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)
        await backend.close()
    }

    @Test(arguments: MultipartTests.Server.allCases)
    func aPartOfASourceThatChangedIsRefused(_ server: MultipartTests.Server) async throws {
        let backend = try await MultipartTests.backend(server, multipart: Self.settings)
        let scratch = try MultipartTests.Scratch()
        let (file, _) = try scratch.file("source", size: 7 << 20, seed: 10)
        let created = try await backend.createItem(
            basedOn: MultipartTests.template("source.bin", size: 7 << 20), fields: [.contents], contents: file, options: [])
        let source = backend.key(try ItemPath(created.item.identifier))
        let target = backend.key(ItemPath(components: ["target.bin"]))
        let id = try await backend.createUpload(key: target, display: "target.bin")
        var refused: FileProviderError?
        do {
            _ = try await backend.copyPart(
                source, range: 0..<(5 << 20), sourceTag: "0123456789abcdef0123456789abcdef", number: 1, to: target, uploadID: id)
        } catch {
            refused = error
        }
        switch server {
        case .seaweedfs: #expect(refused?.code == .versionOutOfDate, "\(String(describing: refused))")
        // moto 5 ignores the condition (Docs/Adapters/S3.md): copyInParts looks at the source
        // again after the copy. If this fails, moto honours it now: update the page.
        case .moto: #expect(refused == nil)
        }
        try await backend.abortUpload(key: target, uploadID: id)
        #expect(try await backend.pendingUploads(prefix: backend.prefix).isEmpty)
        await backend.close()
    }
}
