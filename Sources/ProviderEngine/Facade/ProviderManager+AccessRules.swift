import Foundation
import ProviderCore
import ProviderStore

/// An access rule with the name of its domain, as `fileproviderctl rules` shows it.
public struct NamedAccessRule: Sendable, Codable, Hashable {
    public var action: String
    public var kind: String
    public var value: String
    /// The domain it applies in; `nil`: every domain.
    public var domain: String?
    /// Shipped with FileProviderKit (the content indexers).
    public var isDefault: Bool
    public var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case action, kind, value, domain
        case isDefault = "default"
        case createdAt
    }
}

extension ProviderManager {
    /// Every access rule by program: the global ones first, then each domain's.
    /// - Throws: `localIOFailure` when the database fails.
    public func accessRules() throws(FileProviderError) -> [NamedAccessRule] {
        let names = Dictionary(uniqueKeysWithValues: try domains().compactMap { domain in domain.id.map { ($0, domain.name) } })
        return try store.accessRules().map { rule in
            NamedAccessRule(
                action: rule.action.rawValue, kind: rule.kind.rawValue, value: rule.value, domain: rule.domainID.flatMap { names[$0] },
                isDefault: rule.isDefault, createdAt: rule.createdAt)
        }
    }

    /// Adds an access rule (in `domain`, or every domain when `nil`), replacing the rule of the
    /// same scope, kind and value; returns the rule replaced.
    /// - Throws: `invalidArgument` for a value that cannot name a program of that kind (empty,
    ///   with a control character; an executable that is no absolute path; a program or unit
    ///   with a `/`); `providerDomainNotFound` for an unknown domain; `localIOFailure` when the
    ///   database fails.
    @discardableResult
    public func addAccessRule(_ action: AccessRuleRecord.Action, kind: AccessRuleRecord.Kind, value: String, domain: String?)
        throws(FileProviderError) -> NamedAccessRule?
    {
        try Self.checkRuleValue(value, kind: kind)
        let domainID = try domain.map { name throws(FileProviderError) in try self.domain(named: name).id }
        let old = try store.addAccessRule(AccessRuleRecord(domainID: domainID ?? nil, kind: kind, value: value, action: action))
        return old.map { NamedAccessRule($0, domain: domain) }
    }

    /// Removes the access rule of a scope (`domain`, or the global rules when `nil`), kind and
    /// value; returns it.
    /// - Throws: `noSuchItem` when there is no such rule (the message lists the rules of that
    ///   kind and value in other scopes); `providerDomainNotFound`; `localIOFailure`.
    @discardableResult
    public func removeAccessRule(kind: AccessRuleRecord.Kind, value: String, domain: String?) throws(FileProviderError)
        -> NamedAccessRule
    {
        let domainID = try domain.map { name throws(FileProviderError) in try self.domain(named: name).id }
        if let old = try store.removeAccessRule(domainID: domainID ?? nil, kind: kind, value: value) {
            return NamedAccessRule(old, domain: domain)
        }
        let elsewhere = try accessRules().filter { $0.kind == kind.rawValue && $0.value == value }
            .map { $0.domain.map { "--domain \($0)" } ?? "global" }
        let scope = domain.map { "in domain \($0)" } ?? "among the global rules"
        let hint =
            elsewhere.isEmpty
            ? "; 'fileproviderctl rules list' shows the rules"
            : "; there is one for \(elsewhere.joined(separator: ", ")) (remove it with that scope)"
        throw FileProviderError(.noSuchItem, "no rule for \(kind.rawValue) \(TerminalText.quoted(value)) \(scope)\(hint)")
    }

    /// Checks that `value` can name a program by `kind`.
    /// - Throws: `invalidArgument` saying what is wrong.
    static func checkRuleValue(_ value: String, kind: AccessRuleRecord.Kind) throws(FileProviderError) {
        if value.isEmpty { throw FileProviderError(.invalidArgument, "the \(kind.rawValue) of a rule cannot be empty") }
        if value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            throw FileProviderError(
                .invalidArgument, "\(TerminalText.quoted(value)) holds a control character; no \(kind.rawValue) is named so")
        }
        switch kind {
        case .executable where !value.hasPrefix("/"):
            throw FileProviderError(
                .invalidArgument,
                "\(TerminalText.quoted(value)) is no absolute path; give the executable's full path (as /proc/PID/exe shows it), or use --program NAME"
            )
        case .program where value.contains("/"):
            throw FileProviderError(
                .invalidArgument, "a program name has no '/': use --executable \(TerminalText.quoted(value)) for a path")
        case .unit where value.contains("/"):
            throw FileProviderError(
                .invalidArgument, "a unit name has no '/' (for example tracker-miner-fs-3.service or app.slice)")
        default: break
        }
    }
}

extension NamedAccessRule {
    init(_ rule: AccessRuleRecord, domain: String?) {
        self.init(
            action: rule.action.rawValue, kind: rule.kind.rawValue, value: rule.value, domain: domain, isDefault: rule.isDefault,
            createdAt: rule.createdAt)
    }
}
