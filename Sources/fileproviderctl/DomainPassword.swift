import AdapterKit
import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// The password of a domain whose backend takes one (`sftp`, `webdav`: a `--password-env`
/// option), as `domain add` (prompting when the store refuses), `domain set --password` and
/// `domain remove` keep it in the Secret Service (``SecretService``; the item
/// `service=fileprovider domain=NAME`). The database never holds it.
struct DomainPassword {
    let domain: String
    let kind: String
    let user: String
    let host: String

    /// Whether the built-in backend `kind` takes a password (it has a `--password-env` option).
    static func takesPassword(_ kind: String) -> Bool {
        AdapterList.descriptors.first { $0.kind == kind }?.options.contains { $0.name == "password-env" } ?? false
    }

    /// `nil` when the backend takes no password, or (WebDAV) no `--user` says whose it is.
    init?(domain: String, kind: String, options: [String: String]) {
        guard Self.takesPassword(kind) else { return nil }
        self.domain = domain
        self.kind = kind
        if let url = options["url"] {
            guard let user = options["user"], !user.isEmpty else { return nil }
            self.user = user
            host = URL(string: url)?.host ?? url
        } else {
            user = options["user"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.currentUser()
            host = options["host"] ?? "?"
        }
    }

    /// What the prompt asks.
    var prompt: String { "Password of \(user) on \(host) (domain '\(domain)'): " }

    /// Where a stored password is, for messages.
    var whereStored: String {
        "the Secret Service (secret-tool lookup service fileprovider domain \(domain))"
    }

    /// What to do instead when the Secret Service cannot keep the password.
    static func instead(_ domain: String) -> String {
        "give the password another way: --password-env VARIABLE (set whenever the domain is used), a systemd credential \(PasswordLookup.credentialName(forDomain: domain)) (systemd-creds, for 'serve' as a service), or a netrc entry for the host (~/.netrc or --netrc-file); see 'Passwords' in Docs/CLI.md"
    }

    /// Why the Secret Service cannot be used here, or `nil`: asked with a lookup, so a missing
    /// provider on the bus is found too.
    static func unavailableReason(_ domain: String) async -> String? {
        if let reason = SecretService.unavailableReason() { return reason }
        do {
            _ = try await SecretService.executor.runEvenIfCancelled {
                try SecretService.password(forDomain: domain)
            }
            return nil
        } catch {
            return error.message
        }
    }

    /// The password stored for the domain, or `nil`.
    /// - Throws: `notAuthenticated` when the Secret Service cannot be asked.
    func stored() async throws(FileProviderError) -> String? {
        let domain = self.domain
        return try await SecretService.executor.runEvenIfCancelled {
            try SecretService.password(forDomain: domain)
        }
    }

    /// Stores `password` for the domain.
    /// - Throws: `notAuthenticated` when the Secret Service cannot store it.
    func store(_ password: String) async throws(FileProviderError) {
        let (domain, user, host, kind) = (self.domain, self.user, self.host, self.kind)
        try await SecretService.executor.runEvenIfCancelled {
            try SecretService.store(password, forDomain: domain, user: user, host: host, backend: kind)
        }
    }

    /// Deletes the password stored for `domain`; `true` when there was one.
    /// - Throws: `notAuthenticated` when the Secret Service cannot be asked.
    @discardableResult
    static func delete(_ domain: String) async throws(FileProviderError) -> Bool {
        try await SecretService.executor.runEvenIfCancelled {
            try SecretService.deletePassword(forDomain: domain)
        }
    }

    private static func currentUser() -> String {
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name { return String(cString: name) }
        return ProcessInfo.processInfo.environment["USER"] ?? "?"
    }
}
