import Foundation
import ProviderCore

/// What one conformance check works with: the backend, a scratch folder and helpers that turn
/// a difference from the contract into a ``ConformanceFailure``.
final class ConformanceContext: @unchecked Sendable {
    let backend: any Backend
    let check: String
    let scratch: URL
    private let lock = NSLock()
    private var counter = 0

    init(backend: any Backend, check: String) throws {
        self.backend = backend
        self.check = check
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "conformance-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    var capabilities: BackendCapabilities { backend.capabilities }
    /// Opens a second backend over this check's store (``BackendConformance/SameStore``), when
    /// the suite was given one; set before the check runs.
    var openSecond: (@Sendable () async throws -> any Backend)?

    func removeScratch() { try? FileManager.default.removeItem(at: scratch) }

    private func next() -> Int {
        lock.withLock {
            counter += 1
            return counter
        }
    }

    // MARK: Expectations

    func failure(_ message: String) -> ConformanceFailure {
        ConformanceFailure(check: check, message: message)
    }

    func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw failure(message()) }
    }

    /// Runs `body` and checks it throws a `FileProviderError` with `code`.
    func expectError<T>(
        _ code: FileProviderError.Code, _ what: String, _ body: () async throws -> T
    ) async throws {
        do {
            _ = try await body()
        } catch let error as FileProviderError {
            try expect(error.code == code, "\(what): expected \(code.name), got \(error.code.name) (\(error.message))")
            return
        }
        throw failure("\(what): expected \(code.name), but it succeeded")
    }

    /// Runs `body` and checks it throws some `FileProviderError`.
    func expectFailure<T>(_ what: String, _ body: () async throws -> T) async throws {
        do {
            _ = try await body()
        } catch is FileProviderError {
            return
        }
        throw failure("\(what): expected an error, but it succeeded")
    }

    // MARK: Data

    /// Bytes following a pattern, different for each `seed`.
    static func pattern(_ count: Int, seed: Int = 0) -> Data {
        var bytes = [UInt8](repeating: 0, count: count)
        var state = UInt32(truncatingIfNeeded: seed &* 2_654_435_761 &+ 12345)
        for index in 0..<count {
            state = state &* 1_664_525 &+ 1_013_904_223
            bytes[index] = UInt8(truncatingIfNeeded: state >> 24)
        }
        return Data(bytes)
    }

    /// A scratch file holding `data`.
    func file(_ data: Data) throws -> URL {
        let url = scratch.appendingPathComponent("upload-\(next())")
        try data.write(to: url)
        return url
    }

    /// An empty scratch file to download into.
    func destination() throws -> URL {
        let url = scratch.appendingPathComponent("download-\(next())")
        try Data().write(to: url)
        return url
    }

    // MARK: Operations

    func template(_ name: String, in parent: ItemIdentifier, kind: ItemKind, target: String? = nil) -> Item {
        Item.template(
            identifier: ItemIdentifier("conformance-template-\(next())"), parent: parent, filename: name, kind: kind,
            symlinkTargetPath: target)
    }

    @discardableResult
    func createFile(
        _ name: String, in parent: ItemIdentifier = .rootContainer, _ data: Data = Data("hello".utf8),
        options: CreateOptions = []
    ) async throws -> Item {
        let contents = try file(data)
        let result = try await backend.createItem(
            basedOn: template(name, in: parent, kind: .file), fields: [.contents, .filename], contents: contents,
            options: options)
        try expect(result.item.kind == .file, "created file \(name.debugDescription) is reported as \(result.item.kind)")
        try expect(
            result.item.filename.utf8.elementsEqual(name.utf8),
            "created file \(name.debugDescription) is named \(result.item.filename.debugDescription)")
        return result.item
    }

    @discardableResult
    func createFolder(_ name: String, in parent: ItemIdentifier = .rootContainer, options: CreateOptions = [])
        async throws -> Item
    {
        let result = try await backend.createItem(
            basedOn: template(name, in: parent, kind: .folder), fields: [.filename], contents: nil, options: options)
        try expect(result.item.kind == .folder, "created folder \(name.debugDescription) is reported as \(result.item.kind)")
        return result.item
    }

    /// Downloads an item's contents.
    func fetch(_ identifier: ItemIdentifier, version: ItemVersion? = nil) async throws -> Data {
        let url = try destination()
        _ = try await backend.fetchContents(for: identifier, version: version, to: url, offset: 0, progress: nil)
        return try Data(contentsOf: url)
    }

    func list(_ folder: ItemIdentifier = .rootContainer) async throws -> [Item] {
        try await backend.enumerateAllItems(in: folder)
    }

    /// The child of a folder with exactly this name (compared byte for byte).
    func child(_ name: String, in folder: ItemIdentifier = .rootContainer) async throws -> Item? {
        try await list(folder).first { $0.filename.utf8.elementsEqual(name.utf8) }
    }

    func rename(_ item: Item, to name: String) async throws -> Item {
        var changed = item
        changed.filename = name
        return try await backend.modifyItem(
            changed, baseVersion: item.version, changedFields: [.filename], contents: nil, options: []
        ).item
    }

    func move(_ item: Item, to parent: ItemIdentifier) async throws -> Item {
        var changed = item
        changed.parentIdentifier = parent
        return try await backend.modifyItem(
            changed, baseVersion: item.version, changedFields: [.parentItemIdentifier], contents: nil, options: []
        ).item
    }

    func setContents(_ item: Item, _ data: Data, base: ItemVersion? = nil, options: ModifyOptions = []) async throws -> Item {
        try await backend.modifyItem(
            item, baseVersion: base ?? item.version, changedFields: [.contents], contents: try file(data), options: options
        ).item
    }

    /// Fails unless two items describe the same thing (identifier, parent, name, kind, size, version).
    func expectSame(_ lhs: Item, _ rhs: Item, _ what: String) throws {
        try expect(
            lhs.identifier.rawValue.utf8.elementsEqual(rhs.identifier.rawValue.utf8),
            "\(what): identifier \(lhs.identifier) vs \(rhs.identifier)")
        try expect(
            lhs.parentIdentifier.rawValue.utf8.elementsEqual(rhs.parentIdentifier.rawValue.utf8),
            "\(what): parent \(lhs.parentIdentifier) vs \(rhs.parentIdentifier)")
        try expect(
            lhs.filename.utf8.elementsEqual(rhs.filename.utf8),
            "\(what): name \(lhs.filename.debugDescription) vs \(rhs.filename.debugDescription)")
        try expect(lhs.kind == rhs.kind, "\(what): kind \(lhs.kind) vs \(rhs.kind)")
        try expect(lhs.size == rhs.size, "\(what): size \(lhs.size) vs \(rhs.size)")
        try expect(lhs.version == rhs.version, "\(what): version \(lhs.version) vs \(rhs.version)")
    }
}

extension ItemIdentifier {
    /// Byte-for-byte equality (String's `==` treats NFC and NFD spellings as equal).
    func isExactly(_ other: ItemIdentifier) -> Bool { rawValue.utf8.elementsEqual(other.rawValue.utf8) }
}
