import ExternalAdapter
import Foundation
import ProviderCore
import ProviderTesting
import Testing

/// Paths of the reference backends and the hostile fixtures, from this file's place in the tree.
enum ExternalFixtures {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let pyfolder = direct("Backends/python/fileprovider-backend-pyfolder")
    /// The C reference backend, as `swift build` made it: beside `$FILEPROVIDERCTL` when that
    /// is set (as the CLI tests find the binary), else in `.build/debug`.
    static let cfolder: String = {
        if let binary = ProcessInfo.processInfo.environment["FILEPROVIDERCTL"], !binary.isEmpty {
            return URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent("fileprovider-backend-cfolder").path
        }
        return repository.appendingPathComponent(".build/debug/fileprovider-backend-cfolder").path
    }()
    static let hostile = direct("Tests/Fixtures/ExternalBackends/fileprovider-backend-hostile")

    /// A folder of this test process for the copies ``direct(_:)`` makes.
    private static let directFolder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "external-tests-programs-\(UUID().uuidString)")

    /// The Python script at `relative` (from the repository), run by `/usr/bin/python3`
    /// directly: a copy whose `#!/usr/bin/env python3` line names `/usr/bin/python3`. Through
    /// `env`, a version manager's shim first on PATH (pyenv's) is what runs, at ~0.2 s a start,
    /// and the conformance suites start the programs ~80 times. The script itself where there is
    /// no `/usr/bin/python3` or it cannot be copied.
    static func direct(_ relative: String) -> String {
        let original = repository.appendingPathComponent(relative)
        let python = "/usr/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python), let text = try? String(contentsOf: original, encoding: .utf8),
            text.hasPrefix("#!/usr/bin/env python3\n")
        else { return original.path }
        let copy = directFolder.appendingPathComponent(original.lastPathComponent)
        do {
            try FileManager.default.createDirectory(at: directFolder, withIntermediateDirectories: true)
            try Data(("#!" + python + text.dropFirst("#!/usr/bin/env python3".count)).utf8).write(to: copy, options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy.path)
        } catch {
            return original.path
        }
        return copy.path
    }

    static func temporaryFolder() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("external-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    static func pyfolderBackend(root: String) async throws -> ExternalBackend {
        try await ExternalBackend.start(kind: "pyfolder", programPath: pyfolder, options: ["root": root])
    }

    /// The hostile backend, told what to do wrong by its `behaviour` option.
    static func hostileBackend(_ mode: String) async throws -> ExternalBackend {
        try await ExternalBackend.start(kind: "hostile", programPath: hostile, options: ["behaviour": mode])
    }
}

@Suite("External backend: pyfolder conformance")
struct PyfolderConformanceTests {
    static let conformance = BackendConformance(
        makeBackend: { try await ExternalFixtures.pyfolderBackend(root: try ExternalFixtures.temporaryFolder()) },
        tearDown: { _ in })

    @Test("pyfolder", arguments: BackendConformance.checkNames)
    func pyfolder(_ name: String) async throws {
        try await Self.conformance.run(name)
    }
}

@Suite("External backend: cfolder conformance")
struct CfolderConformanceTests {
    static let conformance = BackendConformance(
        makeBackend: {
            try await ExternalBackend.start(
                kind: "cfolder", programPath: ExternalFixtures.cfolder, options: ["root": try ExternalFixtures.temporaryFolder()])
        },
        tearDown: { _ in })

    @Test("cfolder", arguments: BackendConformance.checkNames)
    func cfolder(_ name: String) async throws {
        try await Self.conformance.run(name)
    }
}

@Suite("External backend: protocol")
struct ExternalProtocolTests {
    @Test func describeGivesTheProgramsOptions() async throws {
        // describe waits for the program on the calling thread: never a cooperative one.
        let descriptor = try await offThePool { try ExternalBackends.describe(.init(kind: "pyfolder", path: ExternalFixtures.pyfolder)) }
        #expect(descriptor.kind == "pyfolder")
        #expect(descriptor.options.map(\.name) == ["root"])
        #expect(descriptor.options.first?.isRequired == true)
        #expect(descriptor.options.first?.type == .path)
    }

    @Test func findsProgramsOnTheSearchPath() {
        let folder = URL(fileURLWithPath: ExternalFixtures.pyfolder).deletingLastPathComponent().path
        let environment = ["PATH": "/nonexistent:\(folder)", "HOME": "/nonexistent"]
        #expect(ExternalBackends.find("pyfolder", environment: environment)?.path == ExternalFixtures.pyfolder)
        #expect(ExternalBackends.find("../pyfolder", environment: environment) == nil)
        #expect(ExternalBackends.all(environment: environment).map(\.kind).contains("pyfolder"))
    }

    @Test func openRefusesBadOptions() async throws {
        await #expect(throws: FileProviderError.self) {
            try await ExternalFixtures.pyfolderBackend(root: "/nonexistent/\(UUID().uuidString)")
        }
    }

    @Test func crashMidRequestFailsPendingRequestsAndRestarts() async throws {
        let backend = try await ExternalFixtures.hostileBackend("crash")
        defer { Task { await backend.close() } }
        // The program dies (exit status 3, after a line on stderr) when asked for this item.
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.item(for: ItemIdentifier("/crash"))
        }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("fileprovider-backend-hostile") == true)
        #expect(error?.message.contains("exit status 3") == true)
        #expect(error?.message.contains("about to crash") == true)
        // The next call starts the program again.
        let root = try await backend.item(for: .rootContainer)
        #expect(root.kind == .folder)
    }

    /// A program that stays alive but never answers is stopped once it has been silent for the
    /// silence limit while a request waited: the request fails clearly, the next call restarts it.
    @Test(.timeLimit(.minutes(5))) func aSilentProgramIsStoppedNotWaitedForForEver() async throws {
        let backend = try await ExternalBackend.start(
            kind: "hostile", programPath: ExternalFixtures.hostile, options: ["behaviour": "crash"], silenceLimit: 1)
        defer { Task { await backend.close() } }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.item(for: ItemIdentifier("/hang"))
        }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("sent no reply and no progress that advanced for") == true, "\(error?.message ?? "")")
        let root = try await backend.item(for: .rootContainer)
        #expect(root.kind == .folder)
    }

    @Test func crashFailsEveryRequestInFlight() async throws {
        let backend = try await ExternalFixtures.hostileBackend("crash")
        defer { Task { await backend.close() } }
        // "/hang" is never answered; the crash must fail it too, not leave it waiting.
        let hanging = Task { try await backend.item(for: ItemIdentifier("/hang")) }
        let crashing = Task { try await backend.item(for: ItemIdentifier("/crash-later")) }
        for result in [await hanging.result, await crashing.result] {
            guard case .failure(let error as FileProviderError) = result else {
                Issue.record("a request in flight when the program died did not fail: \(result)")
                continue
            }
            #expect(error.code == .serverUnreachable)
        }
    }

    @Test func malformedLineIsCorruptData() async throws {
        let backend = try await ExternalFixtures.hostileBackend("malformed")
        defer { Task { await backend.close() } }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.item(for: ItemIdentifier("/anything"))
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("malformed line") == true)
    }

    @Test(arguments: [
        ("unsolicited", "answered request 999999, which was never sent"),
        ("flood", "sent a line longer than"),
    ])
    func protocolViolationStopsTheProgram(_ behaviour: String, _ message: String) async throws {
        let backend = try await ExternalFixtures.hostileBackend(behaviour)
        defer { Task { await backend.close() } }
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.item(for: ItemIdentifier("/anything"))
        }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test func changeFeedAndThumbnailsGoThroughTheProtocol() async throws {
        let backend = try await ExternalFixtures.hostileBackend("feed")
        defer { Task { await backend.close() } }
        #expect(backend.capabilities.hasChangeFeed)
        #expect(backend.capabilities.supportsThumbnails)
        let anchor = try await backend.currentSyncAnchor(for: .workingSet)
        #expect(anchor == SyncAnchor(Data("a1".utf8)))
        let changes = try await backend.enumerateChanges(in: .workingSet, from: anchor)
        #expect(changes.updatedItems.map(\.filename) == ["new.txt"])
        #expect(changes.deletedIdentifiers == [ItemIdentifier("/gone.txt")])
        #expect(changes.newAnchor == SyncAnchor(Data("a2".utf8)))
        #expect(!changes.moreComing)
        let expired = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateChanges(in: .workingSet, from: SyncAnchor(Data("other".utf8)))
        }
        #expect(expired?.code == .syncAnchorExpired)
        // An anchor over 500 bytes is refused, never made (SyncAnchor's precondition).
        let long = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateChanges(in: .workingSet, from: SyncAnchor(Data("long".utf8)))
        }
        #expect(long?.code == .corruptData)
        #expect(try await backend.fetchThumbnail(for: ItemIdentifier("/new.txt"), size: 64) == Data("JPEG".utf8))
    }

    /// An item's `executable` is `Item.fileSystemFlags.userExecutable`, both ways: pyfolder
    /// lists its files' x bit and applies a `modify` of `fileSystemFlags` with `chmod`.
    @Test func theExecutableBitGoesThroughTheProtocol() async throws {
        let root = try ExternalFixtures.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: root + "/tool"))
        try Data("text".utf8).write(to: URL(fileURLWithPath: root + "/plain.txt"))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root + "/tool")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: root + "/plain.txt")
        let backend = try await ExternalFixtures.pyfolderBackend(root: root)
        defer { Task { await backend.close() } }
        #expect(backend.capabilities.supportsFileSystemFlags)
        let tool = try await backend.item(for: ItemIdentifier("/tool"))
        #expect(tool.fileSystemFlags.contains(.userExecutable))
        var plain = try await backend.item(for: ItemIdentifier("/plain.txt"))
        #expect(plain.fileSystemFlags == .plainFile)
        plain.fileSystemFlags.insert(.userExecutable)
        let result = try await backend.modifyItem(
            plain, baseVersion: plain.version, changedFields: [.fileSystemFlags], contents: nil, options: [])
        #expect(result.item.fileSystemFlags.contains(.userExecutable))
        let permissions = try FileManager.default.attributesOfItem(atPath: root + "/plain.txt")[.posixPermissions] as? Int
        #expect(permissions == 0o755)
    }

    @Test func hostileValuesAreRefused() async throws {
        let backend = try await ExternalFixtures.hostileBackend("values")
        defer { Task { await backend.close() } }
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(page.items.map(\.filename) == ["fine.txt"])
        let reasons = page.refused.map(\.reason).joined(separator: " | ")
        #expect(page.refused.count == 4, "\(reasons)")
        for bad in ["/huge-version", "/huge-size", "/other"] {
            let error = await #expect(throws: FileProviderError.self) { try await backend.item(for: ItemIdentifier(bad)) }
            #expect(error?.code == .corruptData, "\(bad)")
        }
    }

    @Test func cancellationIsPrompt() async throws {
        let backend = try await ExternalFixtures.hostileBackend("crash")
        defer { Task { await backend.close() } }
        let task = Task { try await backend.item(for: ItemIdentifier("/hang")) }
        task.cancel()
        let result = await task.result
        guard case .failure(let error as FileProviderError) = result else {
            Issue.record("a cancelled request did not fail: \(result)")
            return
        }
        #expect(error.code == .cancelled)
    }
}
