import Foundation
import ProviderCore

/// Where a domain's password comes from, tried in this order, the first that has one wins:
///
/// 1. the environment variable named by `--password-env`, when given and set;
/// 2. the systemd credential `fileprovider.DOMAIN`: the file `$CREDENTIALS_DIRECTORY/fileprovider.DOMAIN`
///    a unit's `LoadCredential=`, `LoadCredentialEncrypted=` or `SetCredentialEncrypted=` (with
///    `systemd-creds`) gives the service (one newline at its end is not part of the password);
/// 3. the Secret Service (GNOME Keyring, KWallet): the item with `service=fileprovider` and
///    `domain=DOMAIN` (``SecretService``), where `fileproviderctl domain add` stores a
///    password typed at its prompt;
/// 4. netrc: `--netrc-file`, else `~/.netrc`: the first `machine` entry for one of ``machines``
///    (with the login ``user`` when one is given).
///
/// No source is written to: a lookup only reads. The password is never stored in the
/// database; a domain's options hold only where to look (the names of a variable and of a
/// netrc file).
public struct PasswordLookup: Sendable, Hashable {
    /// A password found, and where.
    public struct Found: Sendable {
        public var password: String
        /// The login of the netrc entry it came from (`nil` from other sources).
        public var login: String?
        /// Where it came from, for messages (`$DAV_PASSWORD`, `the Secret Service`).
        public var source: String
    }

    /// What a lookup found, and every source it asked, with why it had nothing (for errors).
    public struct Outcome: Sendable {
        public var found: Found?
        /// Each source asked before the one that had a password (or all, when none had one):
        /// `systemd credential fileprovider.photos ($CREDENTIALS_DIRECTORY is not set)`.
        public var tried: [String]
    }

    /// The domain's name: the systemd credential and the Secret Service item are found by it.
    /// `nil` (a backend made outside a domain) skips those two sources.
    public var domain: String?
    /// The user the password is for (a netrc entry must have this login); `nil`: any login.
    public var user: String?
    /// The netrc `machine` names to try, in order (an ssh alias, then the host it resolves to).
    public var machines: [String]
    /// `--password-env`: the name of the variable to read first.
    public var environmentVariable: String?
    /// `--netrc-file`; `nil`: `~/.netrc`.
    public var netrcFile: String?

    public init(
        domain: String?, user: String?, machines: [String], environmentVariable: String? = nil, netrcFile: String? = nil
    ) {
        self.domain = domain
        self.user = user
        self.machines = machines
        self.environmentVariable = environmentVariable.flatMap { $0.isEmpty ? nil : $0 }
        self.netrcFile = netrcFile.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The name of a domain's systemd credential: `fileprovider.DOMAIN`.
    public static func credentialName(forDomain domain: String) -> String { "fileprovider.\(domain)" }

    /// What to do when no source had a password, for the end of an error message.
    public static let advice =
        "give one with 'fileproviderctl domain set NAME --password' (stored in the Secret Service), --password-env VARIABLE, a systemd credential fileprovider.NAME, or a netrc entry (see 'Passwords' in Docs/CLI.md)"

    /// Asks the sources in order and stops at the first that has a password. Blocks (the
    /// Secret Service is asked over D-Bus): call it from a thread of its own, or use
    /// ``findOffThePool(environment:)``.
    public func find(environment: [String: String] = ProcessInfo.processInfo.environment) -> Outcome {
        var tried: [String] = []
        if let name = environmentVariable {
            if let value = environment[name] {
                return Outcome(found: Found(password: value, source: "$\(name)"), tried: tried)
            }
            tried.append("the variable \(name) named by --password-env is not set")
        }
        if let domain {
            let name = Self.credentialName(forDomain: domain)
            if let folder = environment["CREDENTIALS_DIRECTORY"], !folder.isEmpty {
                let path = folder + "/" + name
                if let data = FileManager.default.contents(atPath: path) {
                    var text = String(decoding: data, as: UTF8.self)
                    if text.hasSuffix("\n") { text.removeLast() }
                    return Outcome(found: Found(password: text, source: "the systemd credential \(name)"), tried: tried)
                }
                tried.append("the systemd credential \(name) (not in $CREDENTIALS_DIRECTORY)")
            } else {
                tried.append("the systemd credential \(name) ($CREDENTIALS_DIRECTORY is not set)")
            }
            do {
                if let password = try SecretService.password(forDomain: domain, environment: environment) {
                    return Outcome(found: Found(password: password, source: "the Secret Service"), tried: tried)
                }
                tried.append("the Secret Service (no password stored for domain '\(TerminalText.quoted(domain))')")
            } catch {
                tried.append("the Secret Service (\(error.message))")
            }
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let path = netrcFile ?? home + "/.netrc"
        do {
            let netrc = try NetrcFile(contentsOf: path)
            if let entry = netrc.entry(forAnyOf: machines, login: user), let password = entry.password {
                return Outcome(found: Found(password: password, login: entry.login, source: "netrc \(path)"), tried: tried)
            }
            let machine = machines.map(TerminalText.quoted).joined(separator: " or ")
            tried.append("netrc \(path) (no entry for machine \(machine)\(user.map { " with login \(TerminalText.quoted($0))" } ?? ""))")
        } catch {
            tried.append("netrc \(path) (\(error.message))")
        }
        return Outcome(found: nil, tried: tried)
    }

    /// ``find(environment:)`` on ``SecretService/executor``'s thread.
    public func findOffThePool(environment: [String: String] = ProcessInfo.processInfo.environment) async -> Outcome {
        let lookup = self
        do {
            return try await SecretService.executor.runEvenIfCancelled { lookup.find(environment: environment) }
        } catch {
            return Outcome(found: nil, tried: ["every source (\(error.message))"])
        }
    }
}
