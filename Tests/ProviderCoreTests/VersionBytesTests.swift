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
}
