import ExternalAdapter
import Foundation
import ProviderCore
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The external-program points of issue #34, against `fileprovider-backend-liar`, a program
/// written from Docs/ExternalBackends.md alone that lies, crashes and hangs as its `behaviour`
/// option says (or the end of its name, for what happens before `open`).
@Suite("External backend: a program that lies, crashes and hangs")
struct LiarBackendTests {
    static let liar = ExternalFixtures.direct("Tests/Fixtures/ExternalBackends/fileprovider-backend-liar")

    /// A backend of the liar behaving as `behaviour`, through a link of its own: no program
    /// another test of this process started (and parked, to describe itself) is taken instead.
    static func start(_ behaviour: String, options: [String: String] = [:], silenceLimit: Double = 120, stopGrace: Double = 2)
        async throws -> ExternalBackend
    {
        let link = try ExternalFixtures.temporaryFolder() + "/fileprovider-backend-liar"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: liar)
        return try await ExternalBackend.start(
            kind: "liar", programPath: link, options: options.merging(["behaviour": behaviour]) { _, new in new },
            silenceLimit: silenceLimit, stopGrace: stopGrace)
    }

    /// The liar under the name `fileprovider-backend-liar-BEHAVIOUR` (a link in a new folder),
    /// for what it does before `open`.
    static func named(_ behaviour: String) throws -> ExternalBackends.Program {
        let folder = try ExternalFixtures.temporaryFolder()
        let link = folder + "/fileprovider-backend-liar-" + behaviour
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: liar)
        return ExternalBackends.Program(kind: "liar-" + behaviour, path: link)
    }

    static func isRunning(_ pid: pid_t) -> Bool { kill(pid, 0) == 0 || errno != ESRCH }

    static func pid(in file: String) throws -> pid_t {
        try #require(pid_t(String(decoding: try Data(contentsOf: URL(fileURLWithPath: file)), as: UTF8.self)))
    }

    // MARK: One bad item must not take its folder down

    /// A size of 2^63, a size of 1.5, a date of 1e400, a name with a lone surrogate, an unknown
    /// kind and an identifier listed twice: each of those items is left out with a refusal
    /// naming it; the items around them are kept. (Before: the whole listing failed with
    /// "bad value at the top", quoting the first, innocent item.)
    @Test func oneBadItemIsLeftOutNotItsFolder() async throws {
        let backend = try await Self.start("bad-items")
        defer { Task { await backend.close() } }
        let page = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(page.items.map(\.identifier.rawValue) == ["/a.txt", "/z.txt"])
        #expect(page.items.first?.filename == "a.txt")
        let reasons = page.refused.map(\.message).joined(separator: " | ")
        #expect(page.refused.count == 6, "\(reasons)")
        let named = Set(page.refused.compactMap(\.identifier?.rawValue))
        #expect(named == ["/huge", "/fraction", "/far", "/surrogate", "/alias"], "\(reasons)")
        let expected = [
            "/huge": "its size", "/fraction": "its size", "/far": "its modification date", "/surrogate": "its name",
            "/alias": "unknown kind",
        ]
        for (identifier, what) in expected {
            let refusal = page.refused.first { $0.identifier?.rawValue == identifier }
            #expect(refusal?.reason.contains(what) == true, "\(identifier): \(refusal?.reason ?? "not refused")")
        }
        let duplicate = try #require(page.refused.first { $0.filename == "copy.txt" }, "\(reasons)")
        #expect(duplicate.identifier == nil)
        #expect(duplicate.reason.contains("/a.txt") && duplicate.reason.contains("earlier"), "\(duplicate.reason)")
    }

    // MARK: Nothing hangs, nothing is left running

    /// Progress that never advances is not progress: the program is stopped after the silence
    /// limit. (Before: any line counted, and the fetch waited for ever.)
    @Test(.timeLimit(.minutes(3))) func aFetchWhoseProgressNeverAdvancesIsStopped() async throws {
        let backend = try await Self.start("progress-forever", silenceLimit: 1)
        defer { Task { await backend.close() } }
        let destination = try ExternalFixtures.temporaryFolder() + "/staging"
        _ = FileManager.default.createFile(atPath: destination, contents: nil)
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.fetchContents(
                for: ItemIdentifier("/a.txt"), version: nil, to: URL(fileURLWithPath: destination), offset: 0, progress: nil)
        }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("no progress that advanced for 1 s") == true, "\(error?.message ?? "")")
    }

    /// A program that dies while a child it started keeps its output open is seen to end (its
    /// own exit, not the end of its output): the request fails with its exit status and error
    /// output. (Before: the request waited as long as the child lived.)
    @Test(.timeLimit(.minutes(3))) func aProgramThatDiesWhileAChildHoldsItsOutputIsSeenToEnd() async throws {
        let pidfile = try ExternalFixtures.temporaryFolder() + "/child.pid"
        let backend = try await Self.start("child-holds-stdout", options: ["pidfile": pidfile])
        defer { Task { await backend.close() } }
        let error = await #expect(throws: FileProviderError.self) { try await backend.item(for: ItemIdentifier("/die")) }
        if let child = try? Self.pid(in: pidfile) { kill(child, SIGKILL) }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("exit status 5") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("dying, my child keeps my output") == true, "\(error?.message ?? "")")
        // The next call starts it again.
        #expect(try await backend.item(for: .rootContainer).kind == .folder)
    }

    /// A program that goes on running when its input ends gets SIGTERM after the grace period,
    /// and SIGKILL after as long again when it ignores SIGTERM; `close()` returns once it has
    /// ended. (Before: it was left running.)
    @Test(.timeLimit(.minutes(3)), arguments: ["ignore-eof", "ignore-eof-and-term"])
    func aProgramThatIgnoresTheEndOfItsInputIsEnded(_ behaviour: String) async throws {
        let pidfile = try ExternalFixtures.temporaryFolder() + "/program.pid"
        let backend = try await Self.start(behaviour, options: ["pidfile": pidfile], stopGrace: 0.2)
        #expect(try await backend.item(for: .rootContainer).kind == .folder)
        let pid = try Self.pid(in: pidfile)
        #expect(Self.isRunning(pid))
        await backend.close()
        let running = Self.isRunning(pid)
        if running { kill(pid, SIGKILL) }
        #expect(!running, "the program is still running after close()")
    }

    /// A program that stopped reading (and waits for ever): the request that could not be
    /// written to it fails with what the program did, how it ended (stopped after the grace
    /// period) and its last error output, not a bare `Broken pipe`.
    @Test(.timeLimit(.minutes(3))) func aRequestThatCannotBeWrittenSaysHowTheProgramEnded() async throws {
        let backend = try await Self.start("crash-on-create", stopGrace: 1)
        defer { Task { await backend.close() } }
        let item = try await backend.item(for: ItemIdentifier("/a.txt"))
        let template = Item(
            identifier: ItemIdentifier("template"), parentIdentifier: .rootContainer, filename: "b.txt", kind: .folder,
            version: item.version)
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.createItem(basedOn: template, fields: [.filename], contents: nil, options: [])
        }
        #expect(error?.code == .serverUnreachable)
        let message = error?.message ?? ""
        #expect(message.hasPrefix("fileprovider-backend-liar ("), "\(message)")
        #expect(message.contains("stopped reading its input"), "\(message)")
        #expect(message.contains("Broken pipe"), "\(message)")
        #expect(message.contains("killed by signal 9"), "\(message)")
        #expect(message.contains("giving up on purpose"), "\(message)")
    }

    // MARK: Protocol

    /// A fetch of one version answered with another is refused with a clear error, not taken
    /// (which made every sync download the file again, silently).
    @Test func aFetchThatWritesAnotherVersionIsRefused() async throws {
        let backend = try await Self.start("other-version")
        defer { Task { await backend.close() } }
        let item = try await backend.item(for: ItemIdentifier("/a.txt"))
        let destination = try ExternalFixtures.temporaryFolder() + "/staging"
        _ = FileManager.default.createFile(atPath: destination, contents: nil)
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.fetchContents(
                for: item.identifier, version: item.version, to: URL(fileURLWithPath: destination), offset: 0, progress: nil)
        }
        #expect(error?.code == .versionNoLongerAvailable)
        #expect(error?.message.contains("wrote another") == true, "\(error?.message ?? "")")
    }

    /// A reply with both a result and an error says nothing certain: `corruptData`.
    @Test func aReplyWithAResultAndAnErrorIsCorruptData() async throws {
        let backend = try await Self.start("both")
        defer { Task { await backend.close() } }
        let error = await #expect(throws: FileProviderError.self) { try await backend.item(for: ItemIdentifier("/a.txt")) }
        #expect(error?.code == .corruptData)
        #expect(error?.message.contains("both a result and an error") == true, "\(error?.message ?? "")")
    }

    /// Forward compatibility: a capability this side does not know is ignored (a later
    /// version of the protocol may add some), as the docs say.
    @Test func anUnknownCapabilityIsIgnored() async throws {
        let backend = try await Self.start("future-capability")
        defer { Task { await backend.close() } }
        #expect(try await backend.item(for: .rootContainer).kind == .folder)
    }

    /// A death during a subfolder's listing fails it with `serverUnreachable` (the code the
    /// engine backs off on), with the exit status.
    @Test func aDeathDuringASubfolderListingIsServerUnreachable() async throws {
        let backend = try await Self.start("die-in-subfolder")
        defer { Task { await backend.close() } }
        let root = try await backend.enumerateItems(in: .rootContainer, startingAt: .initialPageSortedByName)
        #expect(root.items.map(\.filename) == ["sub"])
        let error = await #expect(throws: FileProviderError.self) {
            try await backend.enumerateItems(in: ItemIdentifier("/sub"), startingAt: .initialPageSortedByName)
        }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("exit status 9") == true, "\(error?.message ?? "")")
    }

    /// `describe` may not declare an option `domain add` has itself; a line break in a summary
    /// or a help cannot forge a line; a default of the wrong type is refused.
    @Test func describeIsChecked() async throws {
        let reserved = try Self.named("describe-reserved")
        let refused = await #expect(throws: FileProviderError.self) {
            try await offThePool { try ExternalBackends.describe(reserved) }
        }
        #expect(refused?.code == .corruptData)
        #expect(refused?.message.contains("--mode") == true, "\(refused?.message ?? "")")

        let newline = try Self.named("describe-newline")
        let descriptor = try await offThePool { try ExternalBackends.describe(newline) }
        #expect(!descriptor.summary.contains("\n"), "\(descriptor.summary)")
        #expect(descriptor.options.allSatisfy { !$0.help.contains("\n") })

        let badDefault = try Self.named("describe-bad-default")
        let wrongType = await #expect(throws: FileProviderError.self) {
            try await offThePool { try ExternalBackends.describe(badDefault) }
        }
        #expect(wrongType?.code == .corruptData)
        #expect(wrongType?.message.contains("default of the wrong type") == true, "\(wrongType?.message ?? "")")
    }

    /// A program that never answers `hello` is given up on after the timeout asked for.
    @Test(.timeLimit(.minutes(3))) func aProgramThatDoesNotAnswerHelloIsGivenUpOn() async throws {
        let hanging = try Self.named("hello-hang")
        let error = await #expect(throws: FileProviderError.self) {
            try await offThePool { try ExternalBackends.describe(hanging, timeout: 0.5) }
        }
        #expect(error?.code == .serverUnreachable)
        #expect(error?.message.contains("is not answering") == true, "\(error?.message ?? "")")
    }
}
