import Foundation
import ProviderCore

/// The state of a ``MemoryBackend``: a tree of items keyed by the exact bytes of their paths
/// (so NFC and NFD spellings of a name stay two names), with a change log.
struct MemoryTree {
    typealias Key = [UInt8]

    struct Node {
        var kind: ItemKind
        var data = Data()
        var symlinkTarget: String?
        var creationDate: Date
        var modificationDate: Date
        var contentGeneration: UInt64
        var metadataGeneration: UInt64
    }

    struct Change {
        var sequence: UInt64
        var key: Key
        var parent: Key
    }

    static let rootKey: Key = []
    static let slash = UInt8(ascii: "/")

    private(set) var nodes: [Key: Node]
    private(set) var children: [Key: Set<Key>] = [rootKey: []]
    /// The last change number handed out; every mutation takes a new one.
    private(set) var sequence: UInt64 = 1
    private(set) var log: [Change] = []
    /// Anchors before this change number are too old.
    private(set) var oldestKnownSequence: UInt64 = 1
    let logLimit: Int

    init(logLimit: Int) {
        self.logLimit = logLimit
        let now = Date()
        nodes = [
            Self.rootKey: Node(
                kind: .folder, creationDate: now, modificationDate: now, contentGeneration: 1,
                metadataGeneration: 1)
        ]
    }

    // MARK: Keys and identifiers

    /// The key an identifier names.
    ///
    /// - Throws: `noSuchItem` when the identifier cannot name an item of this store.
    static func key(for identifier: ItemIdentifier) throws(FileProviderError) -> Key {
        if identifier.rawValue.utf8.elementsEqual(ItemIdentifier.rootContainer.rawValue.utf8) {
            return rootKey
        }
        let bytes = Array(identifier.rawValue.utf8)
        for part in bytes.split(separator: slash, omittingEmptySubsequences: false) {
            guard let name = Filename.decode(part), Filename.isValid(name) else { throw .noSuchItem(identifier) }
        }
        if isReserved(bytes) { throw .noSuchItem(identifier) }
        return bytes
    }

    static func identifier(for key: Key) -> ItemIdentifier {
        key.isEmpty ? .rootContainer : ItemIdentifier(String(decoding: key, as: UTF8.self))
    }

    static func isReserved(_ key: Key) -> Bool {
        [ItemIdentifier.rootContainer, .trashContainer, .workingSet].contains { $0.rawValue.utf8.elementsEqual(key) }
    }

    static func parent(of key: Key) -> Key {
        guard let slashIndex = key.lastIndex(of: slash) else { return rootKey }
        return Array(key[..<slashIndex])
    }

    static func name(of key: Key) -> Key {
        guard let slashIndex = key.lastIndex(of: slash) else { return key }
        return Array(key[(slashIndex + 1)...])
    }

    static func child(_ name: Key, of parent: Key) -> Key {
        parent.isEmpty ? name : parent + [slash] + name
    }

    /// The key of a new child, after checking its name.
    ///
    /// - Throws: `invalidFilename` for an unsafe or reserved name.
    static func childKey(named name: String, in parent: Key) throws(FileProviderError) -> Key {
        try Filename.validate(name)
        let key = child(Array(name.utf8), of: parent)
        if isReserved(key) {
            throw FileProviderError(.invalidFilename, "the name \(name.debugDescription) is reserved")
        }
        return key
    }

    // MARK: Reading

    func item(at key: Key) -> Item? {
        guard let node = nodes[key] else { return nil }
        var content = Data([0x6d])
        var metadata = Data([0x6d])
        Swift.withUnsafeBytes(of: node.contentGeneration.littleEndian) { content.append(contentsOf: $0) }
        Swift.withUnsafeBytes(of: node.metadataGeneration.littleEndian) { metadata.append(contentsOf: $0) }
        let size: Int64 =
            switch node.kind {
            case .file: Int64(node.data.count)
            case .folder: 0
            case .symlink: Int64(node.symlinkTarget?.utf8.count ?? 0)
            }
        return Item(
            identifier: Self.identifier(for: key), parentIdentifier: Self.identifier(for: Self.parent(of: key)),
            filename: key.isEmpty ? "Memory" : String(decoding: Self.name(of: key), as: UTF8.self),
            kind: node.kind, size: size, creationDate: node.creationDate,
            contentModificationDate: node.modificationDate,
            version: ItemVersion(content: content, metadata: metadata), symlinkTargetPath: node.symlinkTarget)
    }

    /// The item at `key`.
    /// - Throws: `noSuchItem` when there is none.
    func existingItem(at key: Key) throws(FileProviderError) -> Item {
        guard let item = item(at: key) else { throw .noSuchItem(Self.identifier(for: key)) }
        return item
    }

    /// The key of an existing folder.
    /// - Throws: `noSuchItem` when nothing is there; `invalidArgument` when it is not a folder.
    func folderKey(_ identifier: ItemIdentifier) throws(FileProviderError) -> Key {
        let key = try Self.key(for: identifier)
        guard let node = nodes[key] else { throw .noSuchItem(identifier) }
        guard node.kind == .folder else {
            throw FileProviderError(.invalidArgument, "'\(identifier.rawValue)' is not a folder")
        }
        return key
    }

    /// The names of a folder's children, sorted by bytes.
    func sortedChildNames(of key: Key) -> [Key] {
        (children[key] ?? []).sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// A folder and everything in it, the folder first.
    func subtree(of key: Key) -> [Key] {
        var result = [key]
        var index = 0
        while index < result.count {
            let current = result[index]
            for name in children[current] ?? [] { result.append(Self.child(name, of: current)) }
            index += 1
        }
        return result
    }

    // MARK: Writing

    private mutating func nextGeneration() -> UInt64 {
        sequence += 1
        return sequence
    }

    private mutating func record(_ key: Key) {
        log.append(Change(sequence: sequence, key: key, parent: Self.parent(of: key)))
        if log.count > logLimit {
            let dropped = log.count - logLimit
            oldestKnownSequence = log[dropped - 1].sequence
            log.removeFirst(dropped)
        }
    }

    /// Makes every anchor handed out so far too old.
    mutating func forgetLog() {
        log.removeAll()
        oldestKnownSequence = sequence
    }

    /// Inserts a new item; the parent must exist and be a folder, the key must be free.
    mutating func insert(_ key: Key, kind: ItemKind, data: Data = Data(), target: String? = nil, date: Date? = nil) {
        let generation = nextGeneration()
        let now = Date()
        nodes[key] = Node(
            kind: kind, data: data, symlinkTarget: target, creationDate: now, modificationDate: date ?? now,
            contentGeneration: generation, metadataGeneration: generation)
        if kind == .folder { children[key] = [] }
        children[Self.parent(of: key), default: []].insert(Self.name(of: key))
        record(key)
    }

    /// Replaces a file's bytes (or a symlink's target): a new content version.
    mutating func setContents(_ key: Key, data: Data, target: String? = nil, date: Date?) {
        let generation = nextGeneration()
        nodes[key]?.data = data
        if target != nil { nodes[key]?.symlinkTarget = target }
        nodes[key]?.modificationDate = date ?? Date()
        nodes[key]?.contentGeneration = generation
        nodes[key]?.metadataGeneration = generation
        record(key)
    }

    /// Changes a file's date: a new metadata version.
    mutating func setModificationDate(_ key: Key, _ date: Date) {
        let generation = nextGeneration()
        nodes[key]?.modificationDate = date
        nodes[key]?.metadataGeneration = generation
        record(key)
    }

    /// Removes an item and everything in it.
    mutating func remove(_ key: Key) {
        _ = nextGeneration()
        for descendant in subtree(of: key).reversed() {
            nodes[descendant] = nil
            children[descendant] = nil
            record(descendant)
        }
        children[Self.parent(of: key)]?.remove(Self.name(of: key))
    }

    /// Moves an item and everything in it to a free key; the moved item gets a new metadata
    /// version, contents versions stay.
    mutating func move(_ key: Key, to newKey: Key) {
        let generation = nextGeneration()
        let keys = subtree(of: key)
        var moved: [(Key, Node, Set<Key>?)] = []
        for old in keys {
            let suffix = old[key.count...]
            moved.append((newKey + suffix, nodes[old]!, children[old]))
            nodes[old] = nil
            children[old] = nil
            record(old)
        }
        children[Self.parent(of: key)]?.remove(Self.name(of: key))
        children[Self.parent(of: newKey), default: []].insert(Self.name(of: newKey))
        for (new, node, childNames) in moved {
            nodes[new] = node
            if let childNames { children[new] = childNames }
            record(new)
        }
        nodes[newKey]?.metadataGeneration = generation
    }

    // MARK: Change feed

    /// The changes after `sequence` in a folder (or everywhere for `nil`), at most `limit` log
    /// entries at a time.
    func changes(after start: UInt64, in folder: Key?, limit: Int) -> (updated: [Item], deleted: [ItemIdentifier], end: UInt64, more: Bool) {
        let first = log.firstIndex { $0.sequence > start } ?? log.count
        var last = min(log.count, first + limit)
        // One mutation may log several entries under one number; never split them.
        while last > first && last < log.count && log[last].sequence == log[last - 1].sequence { last += 1 }
        var seen: Set<Key> = []
        var order: [Key] = []
        for change in log[first..<last] where folder == nil || change.parent == folder! {
            if seen.insert(change.key).inserted { order.append(change.key) }
        }
        var updated: [Item] = []
        var deleted: [ItemIdentifier] = []
        for key in order {
            if let item = item(at: key) { updated.append(item) } else { deleted.append(Self.identifier(for: key)) }
        }
        updated.sort { $0.identifier.rawValue.utf8.count < $1.identifier.rawValue.utf8.count }
        let end = last < log.count ? log[last - 1].sequence : sequence
        return (updated, deleted, end, last < log.count)
    }
}
