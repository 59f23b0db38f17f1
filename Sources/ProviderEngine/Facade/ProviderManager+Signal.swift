import Foundation
import ProviderCore
import ProviderSystem

extension ProviderManager {
    /// The file `fileproviderctl signal` touches and `serve` watches: `<home>/signals/<domain>`.
    public func signalURL(forDomain name: String) -> URL {
        home.appendingPathComponent("signals/\(name)")
    }

    /// Asks a running `serve` to poll a domain's store now (and to retry now if the domain is
    /// backing off), by rewriting the domain's signal file.
    /// - Returns: the process id of the `serve` running the domain, or `nil` when none runs it
    ///   (the next `serve` syncs the domain when it starts anyway).
    /// - Throws: `providerDomainNotFound` for an unknown domain; `localIOFailure` when the signal
    ///   file cannot be written.
    @discardableResult
    public func signalServe(domain name: String) throws(FileProviderError) -> Int32? {
        _ = try domain(named: name)
        let url = signalURL(forDomain: name)
        do {
            try PrivateFolder.make(atPath: url.deletingLastPathComponent().path)
            try Data("\(Date().timeIntervalSince1970)\n".utf8).write(to: url)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot write the signal file \(url.path): \(error.localizedDescription)")
        }
        return DomainLock.holder(home: home, domain: name)
    }
}
