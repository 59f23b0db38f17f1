import Foundation
import ProviderCore
import ProviderStore

/// A 128-bit digest of one folder's listing as sync down's walk sees it: every entry in the
/// order listed (identifier, name, kind and file system flags, size, both version parts,
/// symlink target), each value framed by its length, and how many entries the store sent with impossible values (a listing
/// with any is never kept); sealed with the folder's state (its identifier, path, whether it is
/// dataless, the folders above it, the replica root's length). Two listings with the same
/// digest make the walk do the same thing (``StoreWalk``): its checks and comparisons depend on
/// nothing else.
///
/// Not cryptographic: a store that wanted to hide a change could as well not report it. Two
/// lanes of a multiply-rotate mix (xxHash's round and avalanche) with different constants.
/// ``format`` changes whenever the walk's handling of a listing changes, so digests kept by an
/// older version never match.
struct ListingDigest {
    /// 2: the items' file system flags (the executable bit) are in the digest, so the first
    /// sync after the upgrade compares every folder once and records them.
    static let format: UInt64 = 2

    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63

    private var first: UInt64 = 0x2545_F491_4F6C_DD1D
    private var second: UInt64 = 0x6C8E_9CF5_7093_2BD5
    private var words: UInt64 = 0

    /// The digest of a listing's entries alone: computed once per listing (the costly part),
    /// then sealed with the folder's state when it is compared and again when it is kept.
    struct Entries: Sendable, Equatable {
        var first: UInt64
        var second: UInt64
    }

    /// The digest of `listing`'s entries, in the order listed.
    static func entries(of listing: ItemListing) -> Entries {
        var digest = ListingDigest()
        digest.add(format)
        digest.add(UInt64(listing.refused.count))
        digest.add(UInt64(listing.items.count))
        // By index: `for item in` would copy every item (a retain and release of each string).
        let items = listing.items
        for index in items.indices {
            digest.add(items[index].identifier.rawValue)
            digest.add(items[index].filename)
            let kind = items[index].kind
            // The flags ride in the kind's word: no work more per item.
            digest.add(
                UInt64(kind == .file ? 1 : kind == .folder ? 2 : 3) | UInt64(truncatingIfNeeded: items[index].fileSystemFlags.rawValue) << 8
            )
            digest.add(UInt64(bitPattern: items[index].size))
            digest.add(items[index].version.content)
            digest.add(items[index].version.metadata)
            if let target = items[index].symlinkTargetPath {
                digest.add(1)
                digest.add(target)
            } else {
                digest.add(0)
            }
        }
        return Entries(first: avalanche(digest.first ^ digest.words), second: avalanche(digest.second &+ digest.words &* prime1))
    }

    /// The digest kept for the folder `folder` (as it is now: its path, whether it is dataless)
    /// reached below `ancestors` (from the root down), in a replica whose root path is
    /// `rootLength` bytes long, whose listing's entries have the digest `entries`.
    static func seal(_ entries: Entries, folder: ItemRecord, ancestors: [ItemIdentifier], rootLength: Int) -> Data {
        var digest = ListingDigest()
        digest.add(format)
        digest.add(entries.first)
        digest.add(entries.second)
        digest.add(folder.identifier.rawValue)
        digest.add(folder.path)
        digest.add(folder.isDataless ? 1 : 0)
        digest.add(UInt64(ancestors.count))
        for ancestor in ancestors { digest.add(ancestor.rawValue) }
        digest.add(UInt64(truncatingIfNeeded: rootLength))
        var parts = (
            avalanche(digest.first ^ digest.words).littleEndian,
            avalanche(digest.second &+ digest.words &* prime1).littleEndian
        )
        return withUnsafeBytes(of: &parts) { Data($0) }
    }

    private mutating func add(_ word: UInt64) {
        first = Self.round(first, word)
        second = Self.round(second ^ Self.prime4, word &* Self.prime3 ^ (word >> 29))
        words &+= 1
    }

    private mutating func add(_ bytes: UnsafeRawBufferPointer) {
        add(UInt64(bytes.count))
        var offset = 0
        while bytes.count - offset >= 8 {
            add(bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            offset += 8
        }
        if offset < bytes.count {
            var tail: UInt64 = 0
            for index in offset..<bytes.count { tail = tail << 8 | UInt64(bytes[index]) }
            add(tail)
        }
    }

    private mutating func add(_ string: String) {
        var string = string
        string.withUTF8 { add(UnsafeRawBufferPointer($0)) }
    }

    private mutating func add(_ data: Data) {
        data.withUnsafeBytes { add($0) }
    }

    private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
        var accumulator = accumulator &+ input &* prime2
        accumulator = accumulator << 31 | accumulator >> 33
        return accumulator &* prime1
    }

    private static func avalanche(_ value: UInt64) -> UInt64 {
        var value = value
        value ^= value >> 33
        value &*= prime2
        value ^= value >> 29
        value &*= prime3
        value ^= value >> 32
        return value
    }
}
