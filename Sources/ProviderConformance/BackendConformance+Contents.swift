import Foundation
import ProviderCore

/// Progress reports collected from a transfer.
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var reports: [(Int64, Int64?)] = []

    func add(_ completed: Int64, _ total: Int64?) { lock.withLock { reports.append((completed, total)) } }
    var all: [(Int64, Int64?)] { lock.withLock { reports } }
}

/// The task of a fetch, cancelled from its own progress handler at the first report of a part
/// of the file (which may come before the task is known here).
final class CancelOnProgress: @unchecked Sendable {
    private let lock = NSLock()
    private var task: Task<Item, any Error>?
    private var requestedAt: Int64?

    /// The bytes done when the cancellation was asked for, if it was.
    var requested: Int64? { lock.withLock { requestedAt } }

    func set(_ task: Task<Item, any Error>) {
        let cancelNow = lock.withLock {
            self.task = task
            return requestedAt != nil
        }
        if cancelNow { task.cancel() }
    }

    func progress(_ completed: Int64, _ total: Int64?) {
        guard let total, completed < total else { return }
        let task = lock.withLock { () -> Task<Item, any Error>? in
            if requestedAt != nil { return nil }
            requestedAt = completed
            return self.task
        }
        task?.cancel()
    }
}

extension BackendConformance {
    static func roundTrip(_ c: ConformanceContext, _ name: String, _ data: Data) async throws {
        let item = try await c.createFile(name, data)
        try c.expect(item.size == Int64(data.count), "\(name): size \(item.size), uploaded \(data.count) bytes")
        let fetched = try await c.fetch(item.identifier)
        try c.expect(fetched.count == data.count, "\(name): fetched \(fetched.count) bytes, uploaded \(data.count)")
        try c.expect(fetched == data, "\(name): fetched bytes differ from the uploaded ones")
    }

    /// The SHA-256 of `data` as lowercase hex.
    static func sha256(_ data: Data) -> String {
        var digest = SHA256Digest()
        data.withUnsafeBytes { digest.update($0) }
        return digest.finish()
    }

    /// A backend that hands its bytes to the engine's sinks (``ContentSink``) hands exactly the
    /// bytes of the file, each at its place, uploading and downloading: the hash is the file's.
    /// One that does not gives no hash, which is allowed; a wrong one never is.
    static func sinksGetTheBytesTransferred(_ c: ConformanceContext) async throws {
        let data = ConformanceContext.pattern(700_001, seed: 9)
        let contents = try c.file(data)
        let sent = ContentSink { SHA256Digest() }
        let result = try await ContentSink.feeding([contents: sent]) { () async throws -> ItemResult in
            try await c.backend.createItem(
                basedOn: c.template("sunk.bin", in: .rootContainer, kind: .file), fields: [.contents, .filename],
                contents: contents, options: [])
        }
        if let hash = await sent.finish(size: Int64(data.count)) {
            try c.expect(hash == sha256(data), "the upload's sink hashed \(hash), the file's SHA-256 is \(sha256(data))")
        }
        let url = try c.destination()
        let received = ContentSink { SHA256Digest() }
        _ = try await ContentSink.feeding([url: received]) { () async throws -> Item in
            try await c.backend.fetchContents(for: result.item.identifier, version: nil, to: url, offset: 0, progress: nil)
        }
        let written = try Data(contentsOf: url)
        try c.expect(written == data, "the download differs from the upload")
        if let hash = await received.finish(size: Int64(written.count)) {
            try c.expect(hash == sha256(written), "the download's sink hashed \(hash), the file's SHA-256 is \(sha256(written))")
        }
    }

    static let contentChecks: [Check] = [
        ("roundTripEmptyFile", { c in try await roundTrip(c, "empty", Data()) }),
        ("contentSinksGetTheBytesTransferred", { c in try await sinksGetTheBytesTransferred(c) }),
        ("roundTripOneByte", { c in try await roundTrip(c, "one-byte", Data([0x2a])) }),
        (
            "roundTripSeveralMiB",
            { c in
                try await roundTrip(c, "large.bin", ConformanceContext.pattern(5 * (1 << 20) + 7, seed: 1))
            }
        ),
        (
            "roundTripAllByteValues",
            { c in
                let bytes = (0..<4).flatMap { _ in (0...255).map { UInt8($0) } } + (0...255).reversed().map { UInt8($0) }
                try await roundTrip(c, "all-bytes.bin", Data(bytes))
            }
        ),
        (
            "sizeIsReported",
            { c in
                let item = try await c.createFile("sized", ConformanceContext.pattern(1234))
                let listed = try await c.child("sized")
                try c.expect(item.size == 1234, "createItem reports size \(item.size)")
                try c.expect(listed?.size == 1234, "the listing reports size \(String(describing: listed?.size))")
            }
        ),
        (
            "fetchWithOffsetResumes",
            { c in
                let data = ConformanceContext.pattern(3 * (1 << 20) + 11, seed: 2)
                let item = try await c.createFile("resume.bin", data)
                let offset = 1_500_001
                let url = try c.destination()
                // What an interrupted transfer left behind: the first `offset` bytes.
                try data.prefix(offset).write(to: url)
                _ = try await c.backend.fetchContents(
                    for: item.identifier, version: nil, to: url, offset: Int64(offset), progress: nil)
                let result = try Data(contentsOf: url)
                try c.expect(result.count == data.count, "after resuming the file has \(result.count) bytes, not \(data.count)")
                // With ranged reads the backend appends; without, it rewrites the whole file.
                // Either way the result is the whole file.
                try c.expect(result == data, "after resuming the bytes differ")
            }
        ),
        (
            "fetchWithOffsetReadsOnlyTheRest",
            { c in
                // With ranged reads a resumed fetch must not fetch (or write) what the destination
                // already holds: the bytes before `offset` stay as they were, whatever they are.
                let data = ConformanceContext.pattern(2 * (1 << 20) + 5, seed: 12)
                let item = try await c.createFile("rest.bin", data)
                let offset = 1_000_003
                let url = try c.destination()
                let kept = Data(repeating: 0xA5, count: offset)
                try kept.write(to: url)
                do {
                    _ = try await c.backend.fetchContents(for: item.identifier, version: nil, to: url, offset: Int64(offset), progress: nil)
                } catch let error as FileProviderError where error.code == .corruptData && c.capabilities.supportsRangedReads {
                    // A backend that checks a checksum of the whole file finds these bytes are not
                    // the item's: refusing is right, rewriting them is not.
                    let result = try Data(contentsOf: url)
                    try c.expect(
                        result.prefix(offset) == kept,
                        "a backend with supportsRangedReads rewrote the bytes before the offset (it fetched the whole file again)")
                    return
                }
                let result = try Data(contentsOf: url)
                guard c.capabilities.supportsRangedReads else {
                    try c.expect(result == data, "without ranged reads a resumed fetch rewrites the whole file")
                    return
                }
                try c.expect(result.count == data.count, "after resuming the file has \(result.count) bytes, not \(data.count)")
                try c.expect(
                    result.prefix(offset) == kept,
                    "a backend with supportsRangedReads rewrote the bytes before the offset (it fetched the whole file again)")
                try c.expect(result.dropFirst(offset) == data.dropFirst(offset), "the bytes after the offset differ")
            }
        ),
        (
            "fetchReportsProgress",
            { c in
                let data = ConformanceContext.pattern(2 * (1 << 20) + 3, seed: 3)
                let item = try await c.createFile("progress.bin", data)
                let log = ProgressLog()
                let url = try c.destination()
                _ = try await c.backend.fetchContents(
                    for: item.identifier, version: nil, to: url, offset: 0, progress: { log.add($0, $1) })
                let reports = log.all
                try c.expect(!reports.isEmpty, "no progress reported for a 2 MiB download")
                try c.expect(
                    reports.last?.0 == Int64(data.count),
                    "the last progress report is \(String(describing: reports.last?.0)), not \(data.count)")
                let completed = reports.map(\.0)
                try c.expect(completed == completed.sorted(), "progress went backwards: \(completed)")
            }
        ),
        (
            "cancellingAFetchEndsItWithCancelled",
            { c in
                // Cancelled at its first report of a part of the file, a fetch ends with `cancelled`
                // instead of going on to the end (a fetch that reports only its end is not cancelled).
                let data = ConformanceContext.pattern(24 << 20, seed: 13)
                let item = try await c.createFile("long.bin", data)
                let url = try c.destination()
                let cancel = CancelOnProgress()
                let backend = c.backend
                let task = Task { () async throws -> Item in
                    try await backend.fetchContents(
                        for: item.identifier, version: nil, to: url, offset: 0, progress: { cancel.progress($0, $1) })
                }
                cancel.set(task)
                switch await task.result {
                case .success:
                    if let at = cancel.requested {
                        throw c.failure("a fetch cancelled after \(at) of \(data.count) bytes went on to the end")
                    }
                case .failure(let error):
                    guard let error = error as? FileProviderError else { throw c.failure("a cancelled fetch threw \(error)") }
                    try c.expect(cancel.requested != nil, "a fetch nobody cancelled failed: \(error.code.name): \(error.message)")
                    try c.expect(
                        error.code == .cancelled, "a cancelled fetch ended with \(error.code.name), not cancelled: \(error.message)")
                }
            }
        ),
        (
            "fetchWithCurrentVersion",
            { c in
                let item = try await c.createFile("versioned", Data("v1".utf8))
                let url = try c.destination()
                let fetched = try await c.backend.fetchContents(
                    for: item.identifier, version: item.version, to: url, offset: 0, progress: nil)
                try c.expect(fetched.version.content == item.version.content, "fetch returned another content version")
                try c.expect(try Data(contentsOf: url) == Data("v1".utf8), "fetched bytes differ")
            }
        ),
        (
            "fetchWithStaleVersion",
            { c in
                let item = try await c.createFile("changing", Data("old".utf8))
                _ = try await c.setContents(item, Data("new contents".utf8))
                let url = try c.destination()
                do {
                    let fetched = try await c.backend.fetchContents(
                        for: item.identifier, version: item.version, to: url, offset: 0, progress: nil)
                    // A store that keeps old versions may serve the one asked for.
                    try c.expect(fetched.version.content == item.version.content, "asked for an old version, got another one")
                    try c.expect(try Data(contentsOf: url) == Data("old".utf8), "asked for an old version, got other bytes")
                } catch let error as FileProviderError {
                    try c.expect(
                        error.code == .versionNoLongerAvailable,
                        "fetching a replaced version threw \(error.code.name), not versionNoLongerAvailable")
                }
            }
        ),
        (
            "fetchMissingThrowsNoSuchItem",
            { c in
                let file = try await c.createFile("gone")
                try await c.backend.deleteItem(identifier: file.identifier, baseVersion: nil, options: [])
                try await c.expectError(.noSuchItem, "fetching a deleted file") { try await c.fetch(file.identifier) }
            }
        ),
        (
            "fetchFolderThrowsInvalidArgument",
            { c in
                let folder = try await c.createFolder("not-a-file")
                try await c.expectError(.invalidArgument, "fetching a folder") { try await c.fetch(folder.identifier) }
            }
        ),
        (
            "concurrentFetchesOfDifferentItems",
            { c in
                var items: [(Item, Data)] = []
                for index in 0..<8 {
                    let data = ConformanceContext.pattern(256 * 1024 + index, seed: 10 + index)
                    items.append((try await c.createFile("parallel-\(index)", data), data))
                }
                let destinations = try items.map { _ in try c.destination() }
                let backend = c.backend
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, (item, _)) in items.enumerated() {
                        let url = destinations[index]
                        let identifier = item.identifier
                        group.addTask {
                            _ = try await backend.fetchContents(for: identifier, version: nil, to: url, offset: 0, progress: nil)
                        }
                    }
                    try await group.waitForAll()
                }
                for (index, (_, data)) in items.enumerated() {
                    try c.expect(try Data(contentsOf: destinations[index]) == data, "concurrent fetch \(index) got other bytes")
                }
            }
        ),
        (
            "batchFetchGivesEachFileItsOutcome",
            { c in
                // Files of two folders, a deleted file and a folder in between: each outcome is
                // the one a single fetch gives, in order, and a failure stops no other file.
                var expected: [Data?] = []
                var identifiers: [ItemIdentifier] = []
                for index in 0..<3 {
                    let data = ConformanceContext.pattern(1000 * index + 5, seed: 40 + index)
                    identifiers.append(try await c.createFile("batch-\(index)", data).identifier)
                    expected.append(data)
                }
                let gone = try await c.createFile("batch-gone")
                try await c.backend.deleteItem(identifier: gone.identifier, baseVersion: nil, options: [])
                identifiers.append(gone.identifier)
                expected.append(nil)
                identifiers.append(try await c.createFolder("batch-folder").identifier)
                expected.append(nil)
                let inner = ConformanceContext.pattern(4096, seed: 50)
                identifiers.append(try await c.createFile("batch-last", inner).identifier)
                expected.append(inner)
                let destinations = try identifiers.map { _ in try c.destination() }
                let requests = zip(identifiers, destinations).map { ContentRequest(identifier: $0, destination: $1) }
                let log = ProgressLog()
                let results = await c.backend.fetchContents(requests) { index, completed, _ in log.add(Int64(index), completed) }
                try c.expect(results.count == requests.count, "a batch of \(requests.count) files gave \(results.count) outcomes")
                for (index, result) in results.enumerated() {
                    switch (result, expected[index]) {
                    case (.success(let item), let data?):
                        try c.expect(item.identifier == identifiers[index], "outcome \(index) is of another item")
                        try c.expect(try Data(contentsOf: destinations[index]) == data, "batch file \(index) got other bytes")
                    case (.failure(let error), nil):
                        let wanted: FileProviderError.Code = index == 3 ? .noSuchItem : .invalidArgument
                        try c.expect(error.code == wanted, "batch file \(index) threw \(error.code.name), not \(wanted.name)")
                    case (.success, nil):
                        try c.expect(false, "batch file \(index) cannot be fetched, yet its outcome is a success")
                    case (.failure(let error), _):
                        try c.expect(false, "batch file \(index) failed: \(error.message)")
                    }
                }
                let indices = log.all.map(\.0)
                try c.expect(
                    indices.allSatisfy { (0..<Int64(requests.count)).contains($0) }, "progress named files outside the batch: \(indices)")
            }
        ),
        (
            "fetchCreatesMissingDestinationsWhereItSaysSo",
            { c in
                // With `createsFetchDestinations` the engine no longer creates staging files first:
                // a fetch from offset 0 into a file that does not exist yet must create it.
                guard c.capabilities.createsFetchDestinations else { return }
                let data = ConformanceContext.pattern(3000, seed: 60)
                let item = try await c.createFile("created-by-fetch", data)
                let single = try c.destination()
                try FileManager.default.removeItem(at: single)
                _ = try await c.backend.fetchContents(for: item.identifier, version: nil, to: single, offset: 0, progress: nil)
                try c.expect(try Data(contentsOf: single) == data, "a fetch into a missing destination did not write the file")
                let batch = try [c.destination(), c.destination()]
                for url in batch { try FileManager.default.removeItem(at: url) }
                let results = await c.backend.fetchContents(
                    batch.map { ContentRequest(identifier: item.identifier, destination: $0) }, progress: nil)
                for (index, result) in results.enumerated() {
                    if case .failure(let error) = result {
                        try c.expect(false, "batch fetch \(index) into a missing destination failed: \(error.message)")
                    }
                    try c.expect(
                        try Data(contentsOf: batch[index]) == data, "batch fetch \(index) into a missing destination got other bytes")
                }
            }
        ),
        (
            "contentHashIsWellFormed",
            { c in
                let item = try await c.createFile("hashed", Data("hash me".utf8))
                let found = try await c.backend.item(for: item.identifier)
                guard let algorithm = c.capabilities.contentHashAlgorithm else {
                    try c.expect(found.contentHash == nil, "no hash algorithm declared, yet items carry \(found.contentHash ?? "")")
                    return
                }
                guard let hash = found.contentHash else { return }  // a store may not know every hash
                let parts = hash.split(separator: ":", maxSplits: 1)
                try c.expect(parts.count == 2 && parts[0] == algorithm, "hash \(hash) is not '\(algorithm):hex'")
                try c.expect(parts[1].allSatisfy { $0.isHexDigit && !$0.isUppercase }, "hash \(hash) is not lowercase hex")
            }
        ),
    ]

    static let versionChecks: [Check] = [
        (
            "versionIsStableWithoutChanges",
            { c in
                let item = try await c.createFile("steady", Data("same".utf8))
                let first = try await c.backend.item(for: item.identifier)
                _ = try await c.fetch(item.identifier)
                let second = try await c.backend.item(for: item.identifier)
                let listed = try await c.child("steady")
                try c.expect(first.version == item.version, "version changed between createItem and item(for:)")
                try c.expect(second.version == first.version, "version changed after a fetch")
                try c.expect(listed?.version == first.version, "the listing reports another version")
            }
        ),
        (
            "contentVersionChangesWithContents",
            { c in
                let item = try await c.createFile("edited", Data("first".utf8))
                let modified = try await c.setContents(item, Data("second".utf8))
                try c.expect(modified.version.content != item.version.content, "content version did not change with the contents")
                let again = try await c.setContents(modified, Data("third!".utf8))
                try c.expect(again.version.content != modified.version.content, "content version did not change on a same-size edit")
                let found = try await c.backend.item(for: again.identifier)
                try c.expect(found.version == again.version, "item(for:) reports another version than modifyItem returned")
            }
        ),
        (
            "contentVersionSurvivesRename",
            { c in
                guard try await movesOrDeclined(c) else { return }
                let item = try await c.createFile("before", Data("contents".utf8))
                let renamed = try await c.rename(item, to: "after")
                try c.expect(renamed.version.content == item.version.content, "a rename changed the content version")
            }
        ),
    ]
}
