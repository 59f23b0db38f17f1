import Foundation
import ProviderCore

// The wire types of the external backend protocol (Docs/ExternalBackends.md), version 1.
// Everything decoded here comes from a program the engine does not trust: each value is
// checked where it is turned into a core type, and a value out of bounds is `corruptData`.

/// Encoding and decoding of protocol lines.
enum WireCoding {
    /// The protocol versions this side speaks.
    static let versions = [1]

    static let decoder = JSONDecoder()

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    private struct Request<Params: Encodable>: Encodable {
        var id: Int
        var method: String
        var params: Params
    }

    private struct Notification<Params: Encodable>: Encodable {
        var method: String
        var params: Params
    }

    /// One request line, with its newline.
    static func request(id: Int, method: String, params: some Encodable) throws -> Data {
        var data = try encoder.encode(Request(id: id, method: method, params: params))
        data.append(UInt8(ascii: "\n"))
        return data
    }

    /// One notification line (no id, no reply), with its newline.
    static func notification(method: String, params: some Encodable) throws -> Data {
        var data = try encoder.encode(Notification(method: method, params: params))
        data.append(UInt8(ascii: "\n"))
        return data
    }

    private struct Reply<Result: Decodable>: Decodable {
        var result: Result
    }

    /// Decodes the `result` of a reply line.
    /// - Throws: `corruptData` naming the program and the method when it does not decode.
    static func result<T: Decodable>(_ type: T.Type, from line: Data, program: String, method: String) throws(FileProviderError) -> T {
        do {
            return try decoder.decode(Reply<T>.self, from: line).result
        } catch {
            throw FileProviderError(
                .corruptData, "\(program) sent a malformed \(method) reply (\(describe(error))): \(BackendProgram.excerpt(line))")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "missing \(path(context.codingPath + [key]))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type at \(path(context.codingPath))"
        case DecodingError.dataCorrupted(let context):
            return "bad value at \(path(context.codingPath))"
        default:
            return "not JSON"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "the top" : keys.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}

/// Base64 of opaque bytes (versions, pages, anchors).
struct WireBytes: Codable, Hashable {
    var data: Data

    init(_ data: Data) { self.data = data }

    init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard text.utf8.count <= 4096, let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not base64"))
        }
        self.data = data
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data.base64EncodedString())
    }
}

/// The first fields of every line from the program.
struct WireEnvelope: Decodable {
    var id: Int
    var error: WireError?
    var progress: WireProgress?
    var hasResult: Bool

    private enum CodingKeys: String, CodingKey { case id, error, progress, result }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(Int.self, forKey: .id)
        error = try container.decodeIfPresent(WireError.self, forKey: .error)
        progress = try container.decodeIfPresent(WireProgress.self, forKey: .progress)
        hasResult = container.contains(.result)
    }
}

struct WireProgress: Decodable {
    var completed: Int64?
    var total: Int64?
}

/// An error from the program: a `FileProviderError.Code` name and a message.
struct WireError: Codable {
    var code: String
    var message: String?

    private static let codes: [String: FileProviderError.Code] = {
        let all: [FileProviderError.Code] = [
            .notAuthenticated, .filenameCollision, .syncAnchorExpired, .pageExpired, .insufficientQuota,
            .serverUnreachable, .noSuchItem, .deletionRejected, .directoryNotEmpty, .cannotSynchronize,
            .versionNoLongerAvailable, .versionOutOfDate, .invalidFilename, .notSupported, .permissionDenied,
            .invalidArgument, .localIOFailure, .corruptData, .cancelled, .fileWriteOutOfSpace,
        ]
        var table = Dictionary(all.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        table["pageExpired"] = .pageExpired
        return table
    }()

    /// The error, with the program's message; an unknown code becomes `corruptData`.
    func fileProviderError(program: String) -> FileProviderError {
        let text = TerminalText.escaped(String((message ?? code).prefix(1000)))
        guard let known = Self.codes[code] else {
            return FileProviderError(
                .corruptData, "\(program) answered with an unknown error code '\(TerminalText.escaped(String(code.prefix(64))))': \(text)")
        }
        return FileProviderError(known, text)
    }
}

struct WireVersion: Codable {
    var content: WireBytes
    var metadata: WireBytes

    init(_ version: ItemVersion) {
        content = WireBytes(version.content)
        metadata = WireBytes(version.metadata)
    }

    func version(program: String) throws(FileProviderError) -> ItemVersion {
        guard content.data.count <= ItemVersion.maximumLength, metadata.data.count <= ItemVersion.maximumLength else {
            throw FileProviderError(.corruptData, "\(program) sent a version part over \(ItemVersion.maximumLength) bytes")
        }
        return ItemVersion(content: content.data, metadata: metadata.data)
    }
}

/// The longest identifier accepted from a program, in bytes.
let maximumIdentifierLength = 1024
/// The longest symlink target accepted from a program, in bytes.
let maximumSymlinkTargetLength = 4096

func checkedIdentifier(_ raw: String, program: String) throws(FileProviderError) -> ItemIdentifier {
    let count = raw.utf8.count
    guard count > 0, count <= maximumIdentifierLength, !raw.utf8.contains(0) else {
        throw FileProviderError(
            .corruptData, "\(program) sent an identifier that is empty, over \(maximumIdentifierLength) bytes or holds NUL")
    }
    return ItemIdentifier(raw)
}

struct WireItem: Codable {
    var identifier: String
    var parent: String
    var filename: String
    var kind: String
    var size: Int64?
    var contentType: String?
    var created: Double?
    var modified: Double?
    var version: WireVersion
    var capabilities: [String]?
    var symlinkTarget: String?
    var contentHash: String?
    /// The owner's x bit of a file (`FileSystemFlags.userExecutable`); missing: not executable.
    var executable: Bool?

    init(_ item: Item) {
        identifier = item.identifier.rawValue
        parent = item.parentIdentifier.rawValue
        filename = item.filename
        kind = item.kind.rawValue
        size = item.size
        contentType = item.contentType
        created = item.creationDate?.timeIntervalSince1970
        modified = item.contentModificationDate?.timeIntervalSince1970
        version = WireVersion(item.version)
        capabilities = nil
        symlinkTarget = item.symlinkTargetPath
        contentHash = item.contentHash
        executable = item.kind == .file ? item.fileSystemFlags.contains(.userExecutable) : nil
    }

    private static let capabilityNames: [String: ItemCapabilities] = [
        "reading": .allowsReading, "writing": .allowsWriting, "reparenting": .allowsReparenting,
        "renaming": .allowsRenaming, "trashing": .allowsTrashing, "deleting": .allowsDeleting,
        "addingSubItems": .allowsAddingSubItems, "contentEnumerating": .allowsContentEnumerating,
        "evicting": .allowsEvicting, "excludingFromSync": .allowsExcludingFromSync,
    ]

    /// The item, every value checked. An unsafe name or an impossible number is a refusal
    /// (`.refused` with the item as far as it could be read) in a listing; a broken identifier,
    /// kind or version is `corruptData` for the whole reply.
    func item(program: String) throws(FileProviderError) -> CheckedItem {
        let identifier = try checkedIdentifier(identifier, program: program)
        let parent = try checkedIdentifier(parent, program: program)
        guard let kind = ItemKind(rawValue: kind) else {
            throw FileProviderError(
                .corruptData, "\(program) sent an item of unknown kind '\(TerminalText.escaped(String(kind.prefix(32))))'")
        }
        let version = try version.version(program: program)
        var capabilitySet: ItemCapabilities?
        if let capabilities {
            var set: ItemCapabilities = []
            for name in capabilities.prefix(32) {
                guard let known = Self.capabilityNames[name] else {
                    throw FileProviderError(
                        .corruptData, "\(program) sent an unknown item capability '\(TerminalText.escaped(String(name.prefix(32))))'")
                }
                set.insert(known)
            }
            capabilitySet = set
        }
        if let contentType, contentType.utf8.count > 255 || contentType.utf8.contains(0) {
            throw FileProviderError(.corruptData, "\(program) sent a content type over 255 bytes")
        }
        if let contentHash, contentHash.utf8.count > 200 || contentHash.utf8.contains(0) {
            throw FileProviderError(.corruptData, "\(program) sent a content hash over 200 bytes")
        }
        let shownName = String(filename.prefix(300))
        if let problem = Self.problem(withName: filename) {
            return .refused(RefusedItem(identifier: identifier, filename: shownName, reason: problem))
        }
        if kind == .symlink {
            guard let target = symlinkTarget, !target.isEmpty, target.utf8.count <= maximumSymlinkTargetLength, !target.utf8.contains(0)
            else {
                return .refused(
                    RefusedItem(
                        identifier: identifier, filename: shownName, reason: "its symlink target is missing, empty, too long or holds NUL"))
            }
        }
        for (value, what) in [(created, "creation date"), (modified, "modification date")] {
            if let value, let problem = ItemBounds.problem(withDate: Date(timeIntervalSince1970: value), what) {
                return .refused(RefusedItem(identifier: identifier, filename: shownName, reason: problem))
            }
        }
        let size = kind == .folder ? 0 : (size ?? 0)
        if let problem = ItemBounds.problem(withSize: size) {
            return .refused(RefusedItem(identifier: identifier, filename: shownName, reason: problem))
        }
        let item = Item(
            identifier: identifier, parentIdentifier: parent, filename: filename, kind: kind, contentType: contentType,
            size: size, creationDate: created.map { Date(timeIntervalSince1970: $0) },
            contentModificationDate: modified.map { Date(timeIntervalSince1970: $0) }, version: version,
            capabilities: capabilitySet, symlinkTargetPath: kind == .symlink ? symlinkTarget : nil, contentHash: contentHash,
            fileSystemFlags: kind == .file && executable == true ? FileSystemFlags.plainFile.union(.userExecutable) : .plainFile)
        return .item(item)
    }

    /// The item, or `corruptData` when it would be a refusal (a single item, not a listing).
    func checkedItem(program: String) throws(FileProviderError) -> Item {
        switch try item(program: program) {
        case .item(let item): return item
        case .refused(let refused): throw FileProviderError(.corruptData, "\(program): \(refused.message)")
        }
    }

    private static func problem(withName name: String) -> String? {
        do {
            try Filename.validate(name)
            return nil
        } catch {
            return error.message
        }
    }
}

/// An item from a program, or why it was left out.
enum CheckedItem {
    case item(Item)
    case refused(RefusedItem)
}

/// One item of a listing or a change feed, decoded on its own, so that one item with a value
/// that cannot be read (a size of 2^63 or a fraction, a date of 1e400, a name with a lone
/// surrogate, a wrong type) is left out with a refusal naming it and the others are kept.
struct ListedWireItem: Decodable {
    enum Decoded {
        case wire(WireItem)
        /// What could be read of it (each may be `nil`) and why it could not be decoded.
        case unreadable(identifier: String?, filename: String?, problem: String)
    }

    var decoded: Decoded

    /// What can be read of an item that does not decode, and which of its values cannot be.
    private struct Probe: Decodable {
        var identifier: String?
        var filename: String?
        var problem: String?

        private enum CodingKeys: String, CodingKey {
            case identifier, parent, filename, kind, size, created, modified, version, capabilities, symlinkTarget, contentHash
            case contentType, executable
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            identifier = try? container.decodeIfPresent(String.self, forKey: .identifier)
            filename = try? container.decodeIfPresent(String.self, forKey: .filename)
            func fails(_ body: () throws -> Void) -> Bool { (try? body()) == nil }
            let checks: [(String, () throws -> Void)] = [
                ("its identifier is missing or not text", { _ = try container.decode(String.self, forKey: .identifier) }),
                ("its parent is missing or not text", { _ = try container.decode(String.self, forKey: .parent) }),
                ("its name is missing or not valid Unicode text", { _ = try container.decode(String.self, forKey: .filename) }),
                ("its kind is missing or not text", { _ = try container.decode(String.self, forKey: .kind) }),
                (
                    "its size is not a whole number of bytes below 2^63",
                    { _ = try container.decodeIfPresent(Int64.self, forKey: .size) }
                ),
                ("its creation date is not a finite number", { _ = try container.decodeIfPresent(Double.self, forKey: .created) }),
                (
                    "its modification date is not a finite number",
                    { _ = try container.decodeIfPresent(Double.self, forKey: .modified) }
                ),
                ("its version is missing or not base64", { _ = try container.decode(WireVersion.self, forKey: .version) }),
                ("its capabilities are not a list of names", { _ = try container.decodeIfPresent([String].self, forKey: .capabilities) }),
                ("its content type is not text", { _ = try container.decodeIfPresent(String.self, forKey: .contentType) }),
                ("its symlink target is not text", { _ = try container.decodeIfPresent(String.self, forKey: .symlinkTarget) }),
                ("its content hash is not text", { _ = try container.decodeIfPresent(String.self, forKey: .contentHash) }),
                ("its executable flag is not true or false", { _ = try container.decodeIfPresent(Bool.self, forKey: .executable) }),
            ]
            problem = checks.first { fails($0.1) }?.0
        }
    }

    /// Never throws: an element that throws would stop the array's decoding at it.
    init(from decoder: any Decoder) {
        do {
            decoded = .wire(try WireItem(from: decoder))
        } catch {
            let probe = try? Probe(from: decoder)
            decoded = .unreadable(
                identifier: probe?.identifier, filename: probe?.filename,
                problem: probe?.problem ?? "it is not an object of the protocol's item (\(WireCoding.describe(error)))")
        }
    }

    /// The item, every value checked (``WireItem/item(program:)``), or why it is left out:
    /// in a listing every problem of one item is a refusal of that item.
    func item(program: String) -> CheckedItem {
        switch decoded {
        case .wire(let wire):
            do {
                return try wire.item(program: program)
            } catch {
                let identifier = try? checkedIdentifier(wire.identifier, program: program)
                return .refused(RefusedItem(identifier: identifier, filename: String(wire.filename.prefix(300)), reason: error.message))
            }
        case .unreadable(let identifier, let filename, let problem):
            let checked = identifier.flatMap { try? checkedIdentifier($0, program: program) }
            let named = checked.map { " (identifier \(TerminalText.escaped(String($0.rawValue.prefix(200)))))" } ?? ""
            return .refused(
                RefusedItem(
                    identifier: checked, filename: filename.map { String($0.prefix(300)) } ?? "?",
                    reason: "\(problem)\(named)"))
        }
    }
}

/// Sorts a page's items into those kept and those left out: an item refused by its checks, and
/// in a listing an item whose identifier came earlier in the same page (the first one is kept;
/// a change feed may name an item twice).
struct ListingSorter {
    var items: [Item] = []
    var refused: [RefusedItem] = []
    private var seen: Set<ItemIdentifier> = []
    private let refusesRepeats: Bool

    init(capacity: Int, refusesRepeats: Bool = true) {
        items.reserveCapacity(capacity)
        self.refusesRepeats = refusesRepeats
    }

    /// Adds `checked`; `refusal` says why an item that was read is left out anyway (another
    /// parent), or `nil`.
    mutating func add(_ checked: CheckedItem, refusal: (Item) -> String? = { _ in nil }) {
        switch checked {
        case .item(let item):
            if let reason = refusal(item) {
                refused.append(RefusedItem(item, reason))
            } else if refusesRepeats, !seen.insert(item.identifier).inserted {
                // No identifier: the one kept must not be taken for a refused item.
                refused.append(
                    RefusedItem(
                        identifier: nil, filename: item.filename,
                        reason:
                            "its identifier \(TerminalText.escaped(String(item.identifier.rawValue.prefix(200)))) came earlier in the same listing (the first was kept)"
                    ))
            } else {
                items.append(item)
            }
        case .refused(let refusal):
            refused.append(refusal)
        }
    }
}

struct WireCapabilities: Codable {
    var changeFeed: Bool?
    var thumbnails: Bool?
    var rangedReads: Bool?
    var serverSideMove: Bool?
    var conditionalWrites: Bool?
    var symlinks: Bool?
    var creatableKinds: [String]?
    var contentHashAlgorithm: String?
    var maximumUploadSize: Int64?
    var pathDerivedIdentifiers: Bool?
    var listsOnlySomeFiles: Bool?
    /// `modify` applies `fileSystemFlags` (the item's `executable`).
    var fileSystemFlags: Bool?

    func capabilities(program: String) throws(FileProviderError) -> BackendCapabilities {
        var kinds: Set<ItemKind> = [.file, .folder]
        if let creatableKinds {
            kinds = []
            for name in creatableKinds.prefix(8) {
                guard let kind = ItemKind(rawValue: name) else {
                    throw FileProviderError(
                        .corruptData, "\(program) declares an unknown creatable kind '\(TerminalText.escaped(String(name.prefix(32))))'")
                }
                kinds.insert(kind)
            }
        }
        if let algorithm = contentHashAlgorithm,
            algorithm.isEmpty || algorithm.utf8.count > 32
                || !algorithm.utf8.allSatisfy({ $0 >= 0x21 && $0 < 0x7f && $0 != UInt8(ascii: ":") })
        {
            throw FileProviderError(.corruptData, "\(program) declares a malformed hash algorithm name")
        }
        if let maximumUploadSize, maximumUploadSize <= 0 {
            throw FileProviderError(.corruptData, "\(program) declares a maximum upload size of \(maximumUploadSize)")
        }
        return BackendCapabilities(
            hasChangeFeed: changeFeed ?? false, supportsThumbnails: thumbnails ?? false,
            supportsRangedReads: rangedReads ?? false, supportsServerSideMove: serverSideMove ?? false,
            supportsConditionalWrites: conditionalWrites ?? false, supportsSymlinks: symlinks ?? false,
            creatableKinds: kinds, contentHashAlgorithm: contentHashAlgorithm, maximumUploadSize: maximumUploadSize,
            identifiersArePathDerived: pathDerivedIdentifiers ?? true, listsOnlySomeFiles: listsOnlySomeFiles ?? false,
            supportsFileSystemFlags: fileSystemFlags ?? false)
    }
}

// MARK: Messages

struct HelloParams: Encodable { var versions: [Int] }

struct HelloResult: Decodable {
    var version: Int
    var name: String
    var capabilities: WireCapabilities?
}

struct WireOption: Codable {
    var name: String
    var help: String?
    var type: String?
    var `default`: String?
    var required: Bool?
    var secret: Bool?
}

struct DescribeResult: Codable {
    var summary: String?
    var options: [WireOption]?
}

struct OpenParams: Encodable { var options: [String: String] }

struct OpenResult: Decodable { var capabilities: WireCapabilities? }

struct IdentifierParams: Encodable { var identifier: String }

struct ItemReply: Decodable { var item: WireItem }

struct EnumerateParams: Encodable {
    var container: String
    var page: WireBytes
}

struct EnumerateResult: Decodable {
    var items: [ListedWireItem]
    var nextPage: WireBytes?
}

struct ContainerParams: Encodable { var container: String }

struct AnchorResult: Decodable { var anchor: WireBytes }

struct ChangesParams: Encodable {
    var container: String
    var anchor: WireBytes
}

struct ChangesResult: Decodable {
    var updated: [ListedWireItem]
    var deleted: [String]
    var anchor: WireBytes
    var moreComing: Bool?
}

struct FetchParams: Encodable {
    var identifier: String
    var version: WireVersion?
    var path: String
    var offset: Int64
    var length: Int64?
}

struct FetchResult: Decodable {
    var item: WireItem
    var offset: Int64?
    var length: Int64?
}

struct CreateParams: Encodable {
    var template: WireItem
    var fields: [String]
    var contents: String?
    var options: [String]
}

struct ModifyParams: Encodable {
    var item: WireItem
    var baseVersion: WireVersion
    var changedFields: [String]
    var contents: String?
    var options: [String]
}

struct ItemResultReply: Decodable {
    var item: WireItem
    var stillPendingFields: [String]?
    var shouldFetchContent: Bool?
}

struct DeleteParams: Encodable {
    var identifier: String
    var baseVersion: WireVersion?
    var options: [String]
}

struct ThumbnailParams: Encodable {
    var identifier: String
    var size: Int
    var path: String
}

struct EmptyResult: Decodable {}

enum WireFields {
    static let names: [(String, ItemFields)] = [
        ("contents", .contents), ("filename", .filename), ("parentItemIdentifier", .parentItemIdentifier),
        ("lastUsedDate", .lastUsedDate), ("tagData", .tagData), ("favoriteRank", .favoriteRank),
        ("creationDate", .creationDate), ("contentModificationDate", .contentModificationDate),
        ("fileSystemFlags", .fileSystemFlags), ("extendedAttributes", .extendedAttributes),
        ("typeAndCreator", .typeAndCreator),
    ]

    static func encode(_ fields: ItemFields) -> [String] { names.filter { fields.contains($0.1) }.map(\.0) }

    /// Fields from names; unknown names are `corruptData`.
    static func decode(_ list: [String], program: String) throws(FileProviderError) -> ItemFields {
        var fields: ItemFields = []
        for name in list.prefix(32) {
            guard let field = names.first(where: { $0.0 == name })?.1 else {
                throw FileProviderError(
                    .corruptData, "\(program) named an unknown field '\(TerminalText.escaped(String(name.prefix(32))))'")
            }
            fields.insert(field)
        }
        return fields
    }
}
