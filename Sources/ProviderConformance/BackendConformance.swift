import Foundation
import ProviderCore

/// The shared suite of the ``Backend`` contract that every adapter runs.
///
/// Each check gets a backend over a fresh, empty store from `makeBackend`, runs, closes the
/// backend and calls `tearDown`. A check of an ability the backend lacks (see
/// `BackendCapabilities`) verifies that the backend declines it cleanly instead of being skipped.
///
/// ```swift
/// @Test(arguments: BackendConformance.checkNames)
/// func conformance(_ name: String) async throws {
///     try await BackendConformance(makeBackend: { try MyBackend(...) }).run(name)
/// }
/// ```
public struct BackendConformance: Sendable {
    /// Makes a backend over a fresh, empty store.
    public typealias MakeBackend = @Sendable () async throws -> any Backend
    /// Releases what `makeBackend` made (a temporary folder, a server account), after `close()`.
    public typealias TearDown = @Sendable (any Backend) async -> Void

    /// What a backend declares it cannot do, beyond what its capabilities say (as rclone's
    /// `fstests.Opt`): the suite adapts to it instead of the backend failing.
    public struct Limitations: Sendable {
        /// Checks the store cannot pass, each with the reason (say why in words a reader of the
        /// test understands: "the server lists control characters under another name"). They
        /// are not run: ``BackendConformance/applicableCheckNames`` leaves them out and
        /// ``BackendConformance/run(_:)`` returns at once.
        public var cannot: [String: String]
        /// A suffix every file's name needs for the store to keep or list it (a store that
        /// lists only some files, ``BackendCapabilities/listsOnlySomeFiles``): the checks'
        /// files get it added to their names and taken off every name read back.
        public var fileNameSuffix: String?

        public init(cannot: [String: String] = [:], fileNameSuffix: String? = nil) {
            self.cannot = cannot
            self.fileNameSuffix = fileNameSuffix
        }
    }

    /// Makes a second backend over the same store as the one given (another process's view of
    /// it: a second writer).
    public typealias SameStore = @Sendable (any Backend) async throws -> any Backend

    let makeBackend: MakeBackend
    let tearDown: TearDown
    /// What the backend under test declares it cannot do.
    public let limitations: Limitations
    /// A second backend over a check's store, for the checks of changes made behind the
    /// backend's back; without it those checks have nothing to compare and pass.
    let sameStore: SameStore?

    /// - Parameters:
    ///   - makeBackend: returns a backend over a fresh, empty store on every call.
    ///   - limitations: what the backend declares it cannot do (none by default).
    ///   - tearDown: runs after each check with the backend it used (already closed).
    ///   - sameStore: makes a second backend over the store of the backend given, for the
    ///     checks of a second writer (`changesByASecondWriterAreSeen`).
    public init(
        makeBackend: @escaping MakeBackend, limitations: Limitations = Limitations(), sameStore: SameStore? = nil,
        tearDown: @escaping TearDown = { _ in }
    ) {
        self.makeBackend = makeBackend
        self.limitations = limitations
        self.sameStore = sameStore
        self.tearDown = tearDown
    }

    /// The names of every check, in a stable order.
    public static let checkNames: [String] = checks.map(\.name)

    /// The checks this backend runs: every check but those its ``Limitations/cannot`` names.
    public var applicableCheckNames: [String] { Self.checkNames.filter { limitations.cannot[$0] == nil } }

    /// Runs one check.
    ///
    /// - Throws: ``ConformanceFailure`` naming the check and what differed; an error of
    ///   `makeBackend`; an unexpected `FileProviderError` from the backend.
    public func run(_ check: String) async throws {
        guard let entry = Self.checks.first(where: { $0.name == check }) else {
            throw ConformanceFailure(check: check, message: "no such check; see BackendConformance.checkNames")
        }
        if limitations.cannot[check] != nil { return }
        let backend = try await makeBackend()
        let suffix = limitations.fileNameSuffix
        if backend.capabilities.listsOnlySomeFiles && suffix == nil {
            // Its checks would create files the store does not list and fail for that reason.
            await backend.close()
            await tearDown(backend)
            throw ConformanceFailure(
                check: check,
                message:
                    "the backend lists only some files (listsOnlySomeFiles): give the suite Limitations(fileNameSuffix:) with a suffix the store lists"
            )
        }
        let tested = suffix.map { SuffixedNames(inner: backend, suffix: $0) } ?? backend
        let context = try ConformanceContext(backend: tested, check: check)
        if let sameStore {
            context.openSecond = { () async throws -> any Backend in
                let second = try await sameStore(backend)
                return suffix.map { SuffixedNames(inner: second, suffix: $0) } ?? second
            }
        }
        do {
            try await entry.body(context)
        } catch {
            await finish(context, backend)
            if error is ConformanceFailure { throw error }
            throw ConformanceFailure(check: check, message: "unexpected error: \(Self.describe(error))")
        }
        await finish(context, backend)
    }

    /// Runs every check, collecting failures.
    ///
    /// - Returns: the failures, empty when the backend conforms.
    public func runAll() async -> [ConformanceFailure] {
        var failures: [ConformanceFailure] = []
        for name in applicableCheckNames {
            do {
                try await run(name)
            } catch let failure as ConformanceFailure {
                failures.append(failure)
            } catch {
                failures.append(ConformanceFailure(check: name, message: Self.describe(error)))
            }
        }
        return failures
    }

    private func finish(_ context: ConformanceContext, _ backend: any Backend) async {
        await context.backend.close()
        context.removeScratch()
        await tearDown(backend)
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? FileProviderError { return "\(error.code.name): \(error.message)" }
        return String(describing: error)
    }

    typealias Check = (name: String, body: @Sendable (ConformanceContext) async throws -> Void)

    static let checks: [Check] =
        enumerationChecks + lookupChecks + contentChecks + rangeChecks + versionChecks + createChecks + modifyChecks
        + deleteChecks + nameChecks + optionalAbilityChecks
}

/// A conformance check that failed: which check and what differed.
public struct ConformanceFailure: Error, CustomStringConvertible, Sendable {
    /// The name of the check (one of ``BackendConformance/checkNames``).
    public var check: String
    /// What differed from the contract.
    public var message: String

    public init(check: String, message: String) {
        self.check = check
        self.message = message
    }

    public var description: String { "conformance check '\(check)' failed: \(message)" }
}
