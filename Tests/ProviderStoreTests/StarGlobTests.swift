import Foundation
import Testing

@testable import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// `find -name`'s fast path (`SearchFunctions.starGlobMatch`, globs of literals and `*` only,
/// compared byte by byte) gives `fnmatch(3)`'s answer under `C.UTF-8`, the matcher it stands in
/// for: on awkward names and on every pattern and text a seeded generator makes.
@Suite("find's byte-wise glob")
struct StarGlobTests {
    static func fnmatchAnswer(_ pattern: [UInt8], _ text: [UInt8]) -> Bool {
        SearchFunctions.inUTF8 {
            (pattern + [0]).withUnsafeBufferPointer { p in
                (text + [0]).withUnsafeBufferPointer { t in
                    fnmatch(
                        UnsafeRawPointer(p.baseAddress!).assumingMemoryBound(to: CChar.self),
                        UnsafeRawPointer(t.baseAddress!).assumingMemoryBound(to: CChar.self), 0) == 0
                }
            }
        }
    }

    static func fastAnswer(_ pattern: [UInt8], _ text: [UInt8]) -> Bool? {
        pattern.withUnsafeBytes { p in text.withUnsafeBytes { t in SearchFunctions.starGlobMatch(p, t) } }
    }

    @Test func awkwardNamesMatchAsFnmatchMatchesThem() {
        let patterns = ["*.pdf", "*", "**", "", "a*", "*a", "*é*", "IMG_*.jpg", "*aa*a", "a*a*a", ".*", "*/*", "*.PDF", "-*", "*\n*"]
        let texts = [
            "report.pdf", ".pdf", "pdf", "a.pdf.txt", "", "a", "aa", "aaa", "café.pdf", "é", "IMG_0042.jpg", ".hidden", "/x/y.pdf",
            "-rf", "line\nbreak.pdf", "x.PDF", "caf\u{301}e", "a b.pdf",
        ]
        for pattern in patterns {
            for text in texts {
                let fast = Self.fastAnswer(Array(pattern.utf8), Array(text.utf8))
                #expect(
                    fast == Self.fnmatchAnswer(Array(pattern.utf8), Array(text.utf8)),
                    "\(pattern.debugDescription) \(text.debugDescription)")
            }
        }
        // Bytes that are no UTF-8 at all, in the text or the pattern: fnmatch compares bytes then.
        let invalid: [([UInt8], [UInt8])] = [
            (Array("*.pdf".utf8), [0x61, 0xFF] + Array(".pdf".utf8)), ([0x2A, 0xA9], [0x78, 0xC3, 0xA9]), ([0x61, 0x2A], [0xFF]),
        ]
        for (pattern, text) in invalid {
            #expect(Self.fastAnswer(pattern, text) == Self.fnmatchAnswer(pattern, text), "\(pattern) \(text)")
        }
    }

    @Test func globsWithOtherSpecialCharactersAreLeftToFnmatch() {
        for pattern in ["?.pdf", "[ab]*", "\\*x", "*[!.]"] {
            #expect(Self.fastAnswer(Array(pattern.utf8), Array("a.pdf".utf8)) == nil, "\(pattern)")
        }
    }

    @Test func everyGeneratedPatternAndTextAgreeWithFnmatch() {
        // Pieces: ASCII, a two-byte and a three-byte character, a dot, a slash, and stars.
        let pieces: [[UInt8]] = [[0x61], [0x62], Array("é".utf8), Array("€".utf8), [0x2E], [0x2F]]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        var checked = 0
        for _ in 0..<20_000 {
            var pattern: [UInt8] = []
            for _ in 0..<next(7) { pattern += next(3) == 0 ? [0x2A] : pieces[next(pieces.count)] }
            var text: [UInt8] = []
            for _ in 0..<next(9) { text += pieces[next(pieces.count)] }
            let fast = Self.fastAnswer(pattern, text)
            let slow = Self.fnmatchAnswer(pattern, text)
            if fast != slow {
                Issue.record(
                    "\(String(decoding: pattern, as: UTF8.self).debugDescription) on \(String(decoding: text, as: UTF8.self).debugDescription): \(String(describing: fast)), fnmatch \(slow)"
                )
                return
            }
            checked += 1
        }
        #expect(checked == 20_000)
    }
}
