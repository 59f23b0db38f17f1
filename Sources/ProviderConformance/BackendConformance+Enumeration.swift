import Foundation
import ProviderCore

extension BackendConformance {
    static let enumerationChecks: [Check] = [
        ("enumerateEmptyRoot", { c in
            let items = try await c.list()
            try c.expect(items.isEmpty, "a fresh store lists \(items.count) items: \(items.map(\.filename))")
        }),
        ("rootItemIsAFolder", { c in
            let root = try await c.backend.item(for: .rootContainer)
            try c.expect(root.kind == .folder, "the root is a \(root.kind)")
            try c.expect(root.identifier == .rootContainer, "the root's identifier is \(root.identifier)")
        }),
        ("enumerateListsCreatedItems", { c in
            try await c.createFile("b.txt", Data("b".utf8))
            try await c.createFolder("a-folder")
            try await c.createFile("c.bin", Data([0, 1, 2]))
            let items = try await c.list()
            let names = Set(items.map(\.filename))
            try c.expect(names == ["a-folder", "b.txt", "c.bin"], "listed \(names.sorted())")
            for item in items {
                let expected: ItemKind = item.filename == "a-folder" ? .folder : .file
                try c.expect(item.kind == expected, "\(item.filename) is listed as \(item.kind)")
                try c.expect(item.parentIdentifier == .rootContainer, "\(item.filename) has parent \(item.parentIdentifier)")
            }
        }),
        ("enumerateIsSortedByName", { c in
            for name in ["delta", "Alpha", "charlie", "bravo", "échelle", "1-one", "_under"] {
                try await c.createFile(name, Data(name.utf8))
            }
            let names = try await c.list().map(\.filename)
            let sorted = names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            try c.expect(names == sorted, "listing is not sorted by name: \(names)")
        }),
        ("enumerateEmptyFolder", { c in
            let folder = try await c.createFolder("empty")
            let items = try await c.list(folder.identifier)
            try c.expect(items.isEmpty, "a new folder lists \(items.count) items")
        }),
        ("pagingCoversEveryItemOnce", { c in
            let folder = try await c.createFolder("many")
            var expected: Set<String> = []
            for index in 0..<260 {
                let name = String(format: "item-%04d", index)
                if index % 10 == 0 {
                    try await c.createFolder(name, in: folder.identifier)
                } else {
                    try await c.createFile(name, in: folder.identifier, Data())
                }
                expected.insert(name)
            }
            var seen: [String] = []
            var page: Page? = .initialPageSortedByName
            var pages = 0
            while let current = page {
                let result = try await c.backend.enumerateItems(in: folder.identifier, startingAt: current)
                seen += result.items.map(\.filename)
                page = result.nextPage
                pages += 1
                try c.expect(pages <= 261, "paging does not end")
                try c.expect(!result.items.isEmpty || page == nil, "an empty page that is not the last")
            }
            try c.expect(seen.count == 260, "paging returned \(seen.count) items for 260 (\(pages) pages)")
            try c.expect(Set(seen) == expected, "paging missed \(expected.subtracting(seen).sorted().prefix(5))")
            let sorted = seen.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            try c.expect(seen == sorted, "pages are not in name order")
        }),
        ("pagingIsStableWhileFolderChanges", { c in
            let folder = try await c.createFolder("paged")
            var expected: Set<String> = []
            for index in 0..<260 {
                let name = String(format: "entry-%04d", index)
                try await c.createFile(name, in: folder.identifier, Data())
                expected.insert(name)
            }
            let first = try await c.backend.enumerateItems(in: folder.identifier, startingAt: .initialPageSortedByName)
            var seen = first.items.map(\.filename)
            // Changes before the current position must not shift the rest of the listing.
            try await c.createFile("aaa-added-during-paging", in: folder.identifier, Data())
            if let victim = first.items.first {
                try await c.backend.deleteItem(identifier: victim.identifier, baseVersion: nil, options: [])
            }
            var page = first.nextPage
            while let current = page {
                let result = try await c.backend.enumerateItems(in: folder.identifier, startingAt: current)
                seen += result.items.map(\.filename)
                page = result.nextPage
            }
            let counted = Dictionary(seen.map { ($0, 1) }, uniquingKeysWith: +)
            let duplicates = counted.filter { $0.value > 1 }.keys.sorted()
            try c.expect(duplicates.isEmpty, "listed twice while paging: \(duplicates.prefix(5))")
            let missed = expected.subtracting(seen)
            try c.expect(missed.isEmpty, "missed while paging: \(missed.sorted().prefix(5))")
        }),
        ("enumerateMissingFolderThrowsNoSuchItem", { c in
            try await c.expectError(.noSuchItem, "listing a folder that does not exist") {
                try await c.backend.enumerateItems(
                    in: ItemIdentifier("no-such-folder-\(UUID().uuidString)"), startingAt: .initialPageSortedByName)
            }
        }),
        ("enumerateFileThrowsInvalidArgument", { c in
            let file = try await c.createFile("plain.txt")
            try await c.expectError(.invalidArgument, "listing a file") {
                try await c.backend.enumerateItems(in: file.identifier, startingAt: .initialPageSortedByName)
            }
        }),
        ("enumerateGarbagePageThrowsPageExpired", { c in
            try await c.createFile("x")
            try await c.expectError(.pageExpired, "listing from a page token the backend never made") {
                try await c.backend.enumerateItems(in: .rootContainer, startingAt: Page(Data("garbage".utf8)))
            }
        }),
    ]

    static let lookupChecks: [Check] = [
        ("itemLookupMatchesCreation", { c in
            let created = try await c.createFile("lookup.txt", Data("12345".utf8))
            let found = try await c.backend.item(for: created.identifier)
            try c.expectSame(found, created, "item(for:) after createItem")
            try c.expect(found.size == 5, "size is \(found.size), not 5")
        }),
        ("itemLookupMatchesEnumeration", { c in
            try await c.createFile("one", Data("1".utf8))
            try await c.createFolder("two")
            for listed in try await c.list() {
                let found = try await c.backend.item(for: listed.identifier)
                try c.expectSame(found, listed, "item(for:) vs listing of \(listed.filename)")
            }
        }),
        ("parentIdentifiersAreReported", { c in
            let outer = try await c.createFolder("outer")
            let inner = try await c.createFolder("inner", in: outer.identifier)
            let file = try await c.createFile("leaf.txt", in: inner.identifier)
            try c.expect(outer.parentIdentifier == .rootContainer, "outer's parent is \(outer.parentIdentifier)")
            try c.expect(inner.parentIdentifier.isExactly(outer.identifier), "inner's parent is \(inner.parentIdentifier)")
            try c.expect(file.parentIdentifier.isExactly(inner.identifier), "leaf's parent is \(file.parentIdentifier)")
            let listed = try await c.list(inner.identifier)
            try c.expect(listed.count == 1 && listed[0].parentIdentifier.isExactly(inner.identifier), "listing of inner: \(listed)")
        }),
        ("lookupMissingThrowsNoSuchItem", { c in
            try await c.expectError(.noSuchItem, "item(for:) of an unknown identifier") {
                try await c.backend.item(for: ItemIdentifier("never-existed-\(UUID().uuidString)"))
            }
        }),
        ("lookupDeletedThrowsNoSuchItem", { c in
            let file = try await c.createFile("short-lived")
            try await c.backend.deleteItem(identifier: file.identifier, baseVersion: file.version, options: [])
            try await c.expectError(.noSuchItem, "item(for:) of a deleted item") {
                try await c.backend.item(for: file.identifier)
            }
        }),
    ]
}
