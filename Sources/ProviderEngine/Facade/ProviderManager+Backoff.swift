import Foundation
import ProviderCore
import ProviderStore

extension ProviderManager {
    /// The backoff of a domain, or `nil` when it is not backing off.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `localIOFailure` when the
    ///   database fails.
    public func backoff(ofDomain name: String) throws(FileProviderError) -> DomainBackoff? {
        DomainBackoff(try domain(named: name))
    }

    /// Records a domain-wide outcome (see ``DomainSync/recordSyncOutcome(_:)``).
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
