import CSecret
import Foundation
import ProviderCore

/// Domains' passwords in the Secret Service (GNOME Keyring, KWallet, KeePassXC), through
/// libsecret, loaded when first asked for (`libsecret-1.so.0`; Debian's `libsecret-1-0`).
///
/// An item is found by the attributes `service=fileprovider` and `domain=NAME`, and also
/// carries `user`, `host` and `backend` for people reading the keyring: `secret-tool search
/// service fileprovider` lists them, and `secret-tool store --label=… service fileprovider
/// domain NAME` stores one by hand. The database never holds the password, only the domain's
/// name it is found by.
///
/// Every method blocks on D-Bus: call it from a thread of its own (``executor`` is one).
public enum SecretService {
    /// One thread for the async callers (the CLI, the WebDAV factory).
    public static let executor = BlockingExecutor(name: "secret-service", threads: 1)

    /// Why the Secret Service cannot be asked here, or `nil` when it can be tried: libsecret is
    /// missing, or there is no D-Bus session bus (no `DBUS_SESSION_BUS_ADDRESS` and no
    /// `$XDG_RUNTIME_DIR/bus`: as in a service without a user session; libsecret would try to
    /// start one for an X11 display).
    public static func unavailableReason(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let failure = fp_secret_load_error() {
            return "libsecret is not installed (\(String(cString: failure))); install libsecret-1-0"
        }
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return nil }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty,
            FileManager.default.fileExists(atPath: runtime + "/bus")
        {
            return nil
        }
        return "no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set and there is no $XDG_RUNTIME_DIR/bus"
    }

    /// The password stored for the domain `domain`, or `nil` when none is.
    ///
    /// - Throws: `notAuthenticated` with the reason when the Secret Service cannot be asked
    ///   (``unavailableReason(environment:)`` of `environment`, no provider on the bus, a locked
    ///   keyring that could not be unlocked).
    public static func password(
        forDomain domain: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(FileProviderError) -> String? {
        if let reason = unavailableReason(environment: environment) { throw FileProviderError(.notAuthenticated, reason) }
        var found: UnsafeMutablePointer<CChar>?
        var error: UnsafeMutablePointer<CChar>?
        let rc = fp_secret_lookup(domain, &found, &error)
        defer {
            fp_secret_free(found)
            fp_secret_free(error)
        }
        if rc < 0 { throw FileProviderError(.notAuthenticated, message(error)) }
        return found.map { String(cString: $0) }
    }

    /// Stores `password` for the domain `domain` in the default collection (the login keyring),
    /// replacing every item stored for it (also one stored by hand with other attributes, which
    /// a lookup could otherwise find instead).
    ///
    /// - Throws: `notAuthenticated` with the reason when it cannot be stored (as
    ///   ``password(forDomain:environment:)``; also a collection that is locked or missing).
    public static func store(
        _ password: String, forDomain domain: String, user: String, host: String, backend: String
    ) throws(FileProviderError) {
        if let reason = unavailableReason() { throw FileProviderError(.notAuthenticated, reason) }
        var error: UnsafeMutablePointer<CChar>?
        let label = "FileProviderKit: \(user)@\(host) (domain \(domain))"
        let rc = fp_secret_store(label, domain, user, host, backend, password, &error)
        defer { fp_secret_free(error) }
        if rc < 0 { throw FileProviderError(.notAuthenticated, message(error)) }
    }

    /// Deletes the password stored for the domain `domain`; `true` when there was one.
    ///
    /// - Throws: `notAuthenticated` with the reason when the Secret Service cannot be asked.
    @discardableResult
    public static func deletePassword(forDomain domain: String) throws(FileProviderError) -> Bool {
        if let reason = unavailableReason() { throw FileProviderError(.notAuthenticated, reason) }
        var error: UnsafeMutablePointer<CChar>?
        let rc = fp_secret_clear(domain, &error)
        defer { fp_secret_free(error) }
        if rc < 0 { throw FileProviderError(.notAuthenticated, message(error)) }
        return rc == 1
    }

    private static func message(_ error: UnsafeMutablePointer<CChar>?) -> String {
        let text = error.map { String(cString: $0) } ?? "the Secret Service failed"
        return TerminalText.escaped(text)
    }
}
