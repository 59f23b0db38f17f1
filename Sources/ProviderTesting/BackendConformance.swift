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

    let makeBackend: MakeBackend
    let tearDown: TearDown

    /// - Parameters:
    ///   - makeBackend: returns a backend over a fresh, empty store on every call.
    ///   - tearDown: runs after each check with the backend it used (already closed).
    public init(makeBackend: @escaping MakeBackend, tearDown: @escaping TearDown = { _ in }) {
        self.makeBackend = makeBackend
        self.tearDown = tearDown
    }

    /// The names of every check, in a stable order.
    public static let checkNames: [String] = checks.map(\.name)

    /// Runs one check.
    ///
    /// - Throws: ``ConformanceFailure`` naming the check and what differed; an error of
    ///   `makeBackend`; an unexpected `FileProviderError` from the backend.
    public func run(_ check: String) async throws {
        guard let entry = Self.checks.first(where: { $0.name == check }) else {
            throw ConformanceFailure(check: check, message: "no such check; see BackendConformance.checkNames")
        }
        let backend = try await makeBackend()
        let context = try ConformanceContext(backend: backend, check: check)
        do {
            try await entry.body(context)
        } catch {
            await finish(context)
            if error is ConformanceFailure { throw error }
            throw ConformanceFailure(check: check, message: "unexpected error: \(Self.describe(error))")
        }
        await finish(context)
    }

    /// Runs every check, collecting failures.
    ///
    /// - Returns: the failures, empty when the backend conforms.
    public func runAll() async -> [ConformanceFailure] {
        var failures: [ConformanceFailure] = []
        for name in Self.checkNames {
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

    private func finish(_ context: ConformanceContext) async {
        await context.backend.close()
        context.removeScratch()
        await tearDown(context.backend)
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
