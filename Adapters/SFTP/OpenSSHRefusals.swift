import Foundation

/// The servers where the channel through `ssh` failed lately: their new connections use
/// libssh2's channel until ``retryInterval`` passed since the failure, then `ssh` is tried
/// again (a refusal may be passing: a server at its `MaxStartups`, an agent locked for a
/// moment). One failure is logged; a retry that fails again is logged again.
struct OpenSSHRefusals {
    /// How long after a failure a server's connections leave `ssh` alone, in nanoseconds: five
    /// minutes.
    static let retryInterval: UInt64 = 300_000_000_000

    /// When `ssh` last failed for each endpoint (`DispatchTime` nanoseconds).
    private var failures: [String: UInt64] = [:]

    /// Whether `ssh` failed for `endpoint` less than ``retryInterval`` before `now`.
    func refuses(_ endpoint: String, now: UInt64) -> Bool {
        guard let failed = failures[endpoint] else { return false }
        return now < failed || now - failed < Self.retryInterval
    }

    /// Notes that `ssh` failed for `endpoint` at `now`.
    mutating func record(_ endpoint: String, now: UInt64) {
        failures[endpoint] = now
    }
}
