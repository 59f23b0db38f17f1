import Foundation
import ProviderCore
import Testing

/// ``Swift/Array/sortMovingOnce(by:_:)`` and the byte order of identifiers.
@Suite struct MovingOnceSortTests {
    /// Whatever the order in, the array ends as `sorted(by:)` gives it, every element once (with
    /// repeated keys, long cycles, an already sorted array, one element, none).
    @Test func theArrayEndsAsASortGivesIt() {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 3, 10, 257] {
            for _ in 0..<20 {
                let values = (0..<count).map { index in (key: Int.random(in: 0..<(count / 2 + 1), using: &generator), tag: index) }
                var moved = values
                moved.sortMovingOnce(by: \.key, <)
                #expect(moved.map(\.key) == values.map(\.key).sorted())
                #expect(Set(moved.map(\.tag)) == Set(values.map(\.tag)))
                var sorted = moved
                sorted.sortMovingOnce(by: \.key, <)
                #expect(sorted.map(\.tag) == moved.map(\.tag), "a sorted array keeps its order")
            }
        }
    }

    /// Elements holding references are moved, never copied or lost: each object is in the
    /// sorted array once, and none is left alive once the array is gone.
    @Test func referencesAreMovedNeitherCopiedNorLost() {
        final class Tag {}
        var watched: [() -> Tag?] = []
        do {
            var elements = (0..<200).map { index in
                (key: (index * 7919) % 200, tag: Tag(), name: "element \(index) " + String(repeating: "x", count: 40))
            }
            for element in elements {
                weak let tag = element.tag
                watched.append { tag }
            }
            elements.sortMovingOnce(by: \.key, <)
            #expect(elements.map(\.key) == Array(0..<200))
            #expect(Set(elements.map { ObjectIdentifier($0.tag) }).count == 200)
            #expect(elements.allSatisfy { $0.name.hasPrefix("element ") && $0.name.hasSuffix("xx") })
        }
        #expect(watched.allSatisfy { $0() == nil }, "an element was copied and kept alive")
    }

    /// Identifiers compare by their UTF-8 bytes, as SQLite's `BINARY` collation: a capital
    /// before a lowercase letter, a prefix first, NFC and NFD spellings apart.
    @Test func identifiersCompareByTheirBytes() {
        let names = ["b", "a", "B", "ab", "a/b", "é", "e\u{301}", "", "z"]
        let expected = names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        let sorted: [String] = names.map { ItemIdentifier($0) }.sorted().map { $0.rawValue }
        #expect(sorted == expected)
        #expect(!(ItemIdentifier("a") < ItemIdentifier("a")))
    }
}
