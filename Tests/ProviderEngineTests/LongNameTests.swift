import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore
import ProviderTesting
import Testing

/// A legal name of 244 to 255 bytes has no room for `.placeholder` after it: its placeholder
/// file has a shortened name (``Replica/placeholderPath(_:)``), which everything that reads the
/// replica maps back to the item through the placeholder's metadata.
@Suite struct LongNameTests {
    /// 255 bytes: 127 two-byte letters and one more.
    static let longest = String(repeating: "é", count: 127) + "x"
    /// 250 bytes, ending as a shortened name could not (a name whose tail is a dot).
    static let long = String(repeating: "a", count: 249) + "."

    @Test func aNameOf255BytesIsAPlaceholderMaterializedAndEvictedWithoutNotices() async throws {
        try await Fixture.with { f in
            #expect(Self.longest.utf8.count == 255)
            try f.memory.write(path: "docs/" + Self.longest, data: Data("longest".utf8))
            try f.memory.write(path: "docs/" + Self.long, data: Data("long".utf8))
            try f.memory.write(path: "docs/short.txt", data: Data("short".utf8))
            let controller = try await f.addDomain()
            let first = try await controller.sync()
            #expect(first.notices.isEmpty, "\(first.notices)")
            let files = try FileManager.default.contentsOfDirectory(atPath: controller.replica.path("docs"))
            #expect(files.count == 3 && files.allSatisfy { $0.hasSuffix(".placeholder") && $0.utf8.count <= 255 }, "\(files)")
            for name in [Self.longest, Self.long] {
                let path = "docs/" + name
                #expect(controller.replica.placeholderExists(path), "\(name.utf8.count) bytes")
                #expect(try controller.replica.readPlaceholder(path).filename == name)
                let placeholder = URL(fileURLWithPath: controller.replica.placeholderPath(path))
                #expect(try controller.persistentIdentifierForItem(at: placeholder)?.rawValue == path)
                #expect(controller.placeholderURL(for: controller.replica.url(path)) == placeholder)
            }
            // Nothing looks changed to the next scan: no placeholder is taken for a stray one,
            // no item for deleted.
            let again = try await controller.sync()
            #expect(again.notices.isEmpty && again.uploaded == 0 && again.deleted == 0, "\(again)")
            #expect(f.memory.callCount(.deleteItem) == 0)

            let path = "docs/" + Self.longest
            #expect(codes(await controller.materialize(paths: [path], recursive: false)) == [nil])
            #expect(try Data(contentsOf: controller.replica.url(path)) == Data("longest".utf8))
            #expect(!controller.replica.placeholderExists(path))
            #expect(codes(await controller.evict(paths: [path], recursive: false)) == [nil])
            #expect(controller.replica.placeholderExists(path))
            #expect(!FileManager.default.fileExists(atPath: controller.replica.path(path)))
            let last = try await controller.sync()
            #expect(last.notices.isEmpty && last.uploaded == 0, "\(last)")
            #expect(f.memory.contents(of: path) == Data("longest".utf8))
        }
    }

    /// A user who deletes the shortened placeholder deletes the item, as with any placeholder.
    @Test func deletingTheShortenedPlaceholderDeletesTheItem() async throws {
        try await Fixture.with { f in
            try f.memory.write(path: Self.longest, data: Data("longest".utf8))
            let controller = try await f.addDomain()
            try await controller.sync()
            try FileManager.default.removeItem(atPath: controller.replica.placeholderPath(Self.longest))
            let report = try await controller.sync()
            #expect(report.uploaded == 1, "\(report)")
            #expect(f.memory.contents(of: Self.longest) == nil)
        }
    }
}
