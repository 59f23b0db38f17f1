import Foundation
import ProviderCore
import Testing

/// Versions stored by earlier releases must compare equal to the ones made now: the bytes are
/// a tag, then each integer little-endian, nothing else.
@Suite struct VersionBytesTests {
    @Test func bytesAreTheTagThenLittleEndianIntegers() {
        #expect(VersionBytes(tag: 0x64).data == Data([0x64]))
        let version = VersionBytes(tag: 0x66).appending(UInt64(0x0102_0304_0506_0708)).appending(UInt32(0xAABB_CCDD))
            .appending(Int64(-1))
        #expect(
            version.data
                == Data([0x66, 8, 7, 6, 5, 4, 3, 2, 1, 0xDD, 0xCC, 0xBB, 0xAA] + [UInt8](repeating: 0xFF, count: 8)))
    }

    @Test func thirtyTwoBytesFit() {
        let full = VersionBytes(tag: 1).appending(UInt64.max).appending(UInt64.max).appending(UInt64.max)
            .appending(UInt32.max).appending(UInt16.max).appending(UInt8.max)
        #expect(full.data.count == 32)
        #expect(full.data.first == 1 && full.data.dropFirst().allSatisfy { $0 == 0xFF })
    }

    /// ETag and date versions made with `Data(utf8:tag:limit:)` are the bytes the earlier
    /// `Data("e".utf8) + Data(text.utf8)` and `Data(text.utf8.prefix(n))` made.
    @Test(arguments: ["", "\"5f3a-1\"", "Sun, 06 Nov 1994 08:49:37 GMT", "é日本\u{1F600}", String(repeating: "x", count: 200)])
    func versionsOfTextAreItsUTF8Bytes(_ text: String) {
        #expect(Data(utf8: text) == Data(text.utf8))
        #expect(Data(utf8: text, tag: UInt8(ascii: "e")) == Data("e".utf8) + Data(text.utf8))
        for limit in [0, 1, 64] {
            #expect(Data(utf8: text, limit: limit) == Data(text.utf8.prefix(limit)))
            #expect(Data(utf8: text, tag: 1, limit: limit) == Data([1]) + Data(text.utf8.prefix(limit)))
        }
    }

    @Test func hexIsTwoLowercaseDigitsAByte() {
        #expect(Data().hexString == "")
        #expect(Data([0x00, 0x0f, 0xa5, 0xff, 0x10]).hexString == "000fa5ff10")
        let all = Data((0...255).map { UInt8($0) })
        #expect(all.hexString == all.map { String(format: "%02x", $0) }.joined())
        #expect(all.dropFirst(7).hexString == all.dropFirst(7).map { String(format: "%02x", $0) }.joined())
    }
}
