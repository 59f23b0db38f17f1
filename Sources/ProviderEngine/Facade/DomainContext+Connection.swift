import Foundation
import ProviderCore
import ProviderStore

extension DomainContext {
    /// Checks that the domain is connected now (another process may have disconnected it since
    /// this context was made).
    /// - Throws: `providerDomainTemporarilyUnavailable` after `domain disconnect`; `localIOFailure`
    ///   when the database fails.
    func checkConnected() throws(FileProviderError) {
        guard let record = try store.domain(named: domain.name), !record.isConnected else { return }
        throw FileProviderError(
            .providerDomainTemporarilyUnavailable,
            "domain '\(domain.name)' is disconnected: it syncs nothing until 'fileproviderctl domain connect \(domain.name)'")
    }
}
