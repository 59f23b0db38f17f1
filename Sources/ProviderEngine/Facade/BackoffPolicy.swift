import Foundation

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
