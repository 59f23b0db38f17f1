import Foundation
import ProviderCore
import ProviderStore

/// How long a domain waits after failures that back the whole domain off (Apple's reaction to
/// `serverUnreachable`, `notAuthenticated`, `insufficientQuota`,
/// `providerDomainTemporarilyUnavailable`): exponential with jitter, capped.
///
/// The n-th failure in a row waits `min(cap, base · 2^(n-1) · (1 + jitter · r))` seconds with `r`
/// random in 0..<1, so the waits grow 5 s, 10 s, 20 s, … up to 5 minutes by default, and many
/// clients of one server do not all retry at the same moment.
public struct BackoffPolicy: Sendable, Hashable {
    /// The wait after the first failure, in seconds.
    public var base: Double
    /// The longest wait, in seconds.
    public var cap: Double
    /// The random part, as a fraction of the wait (0.2: up to 20 % longer).
    public var jitter: Double

    public init(base: Double = 5, cap: Double = 300, jitter: Double = 0.2) {
        self.base = max(0, base)
        self.cap = max(self.base, cap)
        self.jitter = max(0, jitter)
    }

    /// 5 s, doubling, up to 5 minutes, with up to 20 % jitter.
    public static let standard = BackoffPolicy()

    /// The wait in seconds after `failures` failures in a row (1 or more), for a random value
    /// `random` in 0..<1.
    public func delay(afterFailures failures: Int, random: Double = Double.random(in: 0..<1)) -> Double {
        let exponent = Double(min(max(failures, 1) - 1, 62))
        let plain = min(cap, base * pow(2, exponent))
        return min(cap, plain * (1 + jitter * min(max(random, 0), 1)))
    }
}

/// Why and until when a domain is backing off.
public struct DomainBackoff: Sendable, Hashable, Codable {
    /// Failures in a row.
    public var failureCount: Int
    /// When the next attempt may run.
    public var nextRetryAt: Date
    /// The last failure's message.
    public var error: String?

    /// The backoff recorded on a domain, or `nil` when it is not backing off.
    public init?(_ domain: DomainRecord) {
        guard domain.failureCount > 0, let next = domain.nextRetryAt else { return nil }
        failureCount = domain.failureCount
        nextRetryAt = next
        error = domain.lastError
    }

    /// Whether the domain must still wait at `now`.
    public func isWaiting(at now: Date = Date()) -> Bool { nextRetryAt > now }
}

extension DomainController {
    /// The domain's current backoff, read from the database (another process may have recorded
    /// it), or `nil` when the domain is not backing off.
    /// - Throws: `localIOFailure` when the database fails.
    public func backoff() throws(FileProviderError) -> DomainBackoff? {
        try store.domain(id: domainID).flatMap(DomainBackoff.init)
    }

    /// Records the outcome of a sync of the whole domain: a success clears the backoff and the
    /// last error; a failure sets the last error and, when its code's reaction is
    /// `backOffDomain`, counts the failure and sets the next retry time with ``backoffPolicy``.
    /// Database errors are ignored: the sync's own outcome matters more.
    func recordSyncOutcome(_ error: FileProviderError?) async {
        let (domainID, store, policy) = (self.domainID, self.store, backoffPolicy)
        _ = try? await blocking { ProviderManager.recordOutcome(error, domainID: domainID, store: store, policy: policy) }
    }
}

extension ProviderManager {
    /// The backoff of a domain, or `nil` when it is not backing off.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `localIOFailure` when the
    ///   database fails.
    public func backoff(ofDomain name: String) throws(FileProviderError) -> DomainBackoff? {
        DomainBackoff(try domain(named: name))
    }

    /// Records a domain-wide outcome (see `DomainController.recordSyncOutcome`).
    static func recordOutcome(_ error: FileProviderError?, domainID: Int64, store: MetadataStore, policy: BackoffPolicy) {
        guard let error else {
            try? store.recordDomainSuccess(id: domainID)
            return
        }
        let backsOff = error.code.reaction == .backOffDomain
        let now = Date()
        _ = try? store.recordDomainFailure(
            id: domainID, message: error.message,
            nextRetry: backsOff ? { failures in now.addingTimeInterval(policy.delay(afterFailures: failures)) } : nil)
    }
}
