import Foundation
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What an on-access request does under the access rules (``AccessRules``): go on (and fetch
/// what is missing), or be refused at once with ``errno``, nothing fetched, nothing waiting.
public struct AccessDecision: Sendable {
    /// The action of the deciding rule (`fetch` when none decides).
    public var action: AccessRuleRecord.Action
    /// The deciding rule; `nil`: the default (`fetch`).
    public var rule: AccessRuleRecord?
    /// The program that asked.
    public var program: ProcessIdentity
    /// Whether the bytes the request needs are present.
    public var present: Bool

    public init(action: AccessRuleRecord.Action, rule: AccessRuleRecord?, program: ProcessIdentity, present: Bool) {
        self.action = action
        self.rule = rule
        self.program = program
        self.present = present
    }

    /// The error a refused access fails with: EPERM ("Operation not permitted"). It is what
    /// fanotify's own `FAN_DENY` gives, one of the few errors the kernel lets a pre-content
    /// listener answer with (EACCES is not among them), and it tells the program that this
    /// access is not allowed, as opposed to EIO (the fetch failed, try again).
    public static let errno = EPERM

    /// Whether the request fails now: `deny` refuses every request (present bytes too: a
    /// denied program reads no file that is not wholly downloaded); `present-only` refuses
    /// a request whose bytes are missing.
    public var refuses: Bool {
        switch action {
        case .fetch: false
        case .deny: true
        case .presentOnly: !present
        }
    }

    /// Whether missing bytes may be fetched for the request (an open's fill included).
    public var mayFetch: Bool { action == .fetch }

    /// The deciding rule in words: `deny program baloo_file (default, all domains)`.
    public var ruleDescription: String {
        guard let rule else { return "fetch (no rule: the default)" }
        return Self.describe(rule, domain: nil)
    }

    /// A rule in words; `domain` names its domain (`nil` for a per-domain rule: "this domain").
    public static func describe(_ rule: AccessRuleRecord, domain: String?) -> String {
        let scope = rule.domainID == nil ? "all domains" : domain.map { "domain \($0)" } ?? "this domain"
        return "\(rule.action.rawValue) \(rule.kind.rawValue) \(rule.value) (\(rule.isDefault ? "default, " : "")\(scope))"
    }
}
