import Foundation
import ProviderCore

/// The outcome of one conformance check, for a report (`fileproviderctl backend test`).
public struct ConformanceResult: Sendable, Codable, Equatable {
    /// The check's name (one of ``BackendConformance/checkNames``).
    public var check: String
    public var passed: Bool
    /// What differed, when the check failed.
    public var message: String?
    /// How long the check took, in seconds.
    public var seconds: Double
}

extension BackendConformance {
    /// A suite over one existing store, for programs that test a configured backend (as
    /// `git annex testremote` does): every check gets a backend from `makeBackend` over the same
    /// store, which must be empty at the start, and the store is emptied through a new backend
    /// after each check (everything in the root is deleted recursively).
    public static func overExistingStore(makeBackend: @escaping MakeBackend) -> BackendConformance {
        // Every backend it makes is over that one store: a second writer is one more of them.
        BackendConformance(makeBackend: makeBackend, sameStore: { _ in try await makeBackend() }) { _ in
            guard let backend = try? await makeBackend() else { return }
            if let items = try? await backend.enumerateAllItems(in: .rootContainer) {
                for item in items {
                    try? await backend.deleteItem(identifier: item.identifier, baseVersion: nil, options: [.recursive])
                }
            }
            await backend.close()
        }
    }

    /// Runs checks one after another (all of them by default), calling `onResult` after each,
    /// and returns every outcome: a runner outside a test framework.
    public func runEach(
        _ names: [String] = BackendConformance.checkNames, onResult: @Sendable (ConformanceResult) -> Void = { _ in }
    ) async -> [ConformanceResult] {
        var results: [ConformanceResult] = []
        for name in names {
            let start = Date()
            var message: String?
            do {
                try await run(name)
            } catch let failure as ConformanceFailure {
                message = failure.message
            } catch {
                message = Self.describe(error)
            }
            let result = ConformanceResult(
                check: name, passed: message == nil, message: message, seconds: Date().timeIntervalSince(start))
            onResult(result)
            results.append(result)
        }
        return results
    }
}
