import Foundation
import ProviderCore
import Testing

@testable import WebDAVAdapter

/// A listing's items in the order of their names' bytes, moved in place.
@Suite struct ListingOrderTests {
    /// Any order in, byte order out, each item once: a name with a capital before lowercase
    /// ones, a longer name after its prefix, non-ASCII names after ASCII ones.
    @Test func itemsComeInTheOrderOfTheirNamesBytes() {
        let names = ["b", "a", "é", "B", "ab", "z", "ä", "a b", "Z", "_", "0"]
        let expected = names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var items = names.shuffled(using: &generator).map { name in
                Item.template(identifier: ItemIdentifier(name), parent: .rootContainer, filename: name, kind: .file)
            }
            WebDAVBackend.sortByName(&items)
            #expect(items.map { $0.filename } == expected)
            #expect(items.map { $0.identifier.rawValue } == expected)
        }
        var none: [Item] = []
        WebDAVBackend.sortByName(&none)
        #expect(none.isEmpty)
    }
}
