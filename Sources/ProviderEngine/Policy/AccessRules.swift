import Foundation
import ProviderStore
import ProviderSystem

/// The access rules by program of every domain, and which one decides for a program: the
/// matching behind ``AccessGate``, free of system calls.
///
/// A rule names a program by one of three things (``AccessRuleRecord/Kind``):
/// - `program`: the executable's file name (`/proc/PID/exe`) or the command name
///   (`/proc/PID/comm`, which the kernel cuts to 15 bytes: a longer name matches a command
///   name equal to its first 15 bytes);
/// - `executable`: the executable's full path;
/// - `unit`: a component of the process's cgroup path: its systemd unit
///   (`tracker-miner-fs-3.service`, `app-…​.scope`) or a slice above it.
///
/// Which rule decides: a domain's own rules before the global ones (so a domain can allow what
/// is denied everywhere else); within one scope the most precise kind (`executable`, then
/// `unit`, then `program`); between rules of the same kind that both match (a renamed
/// process's executable name and command name), the strictest (`deny`, then `present-only`).
/// No rule: `fetch`. A program of which nothing could be read (it exited before its request
/// was looked at, or runs in another pid namespace: ``ProcessIdentity/isKnown``) matches no
/// rule and gets `fetch`, as every program did before rules existed: refusing unknown
/// programs would refuse every program in a container.
public struct AccessRules: Sendable {
    /// Every rule, global and per domain.
    public let rules: [AccessRuleRecord]

    public init(_ rules: [AccessRuleRecord]) {
        self.rules = rules
    }

    /// Whether any rule limits (`deny`, `present-only`) anything: without one, no program's
    /// identity needs reading.
    public var limitsAnything: Bool { rules.contains { $0.action != .fetch } }

    /// The rule that decides for `program` in the domain `domainID`, or `nil` (then `fetch`).
    public func rule(for program: ProcessIdentity, domainID: Int64) -> AccessRuleRecord? {
        guard program.isKnown else { return nil }
        for scope in [Optional(domainID), nil] {
            let matching = rules.filter { $0.domainID == scope && Self.matches($0, program) }
            for kind in [AccessRuleRecord.Kind.executable, .unit, .program] {
                if let rule = matching.filter({ $0.kind == kind }).max(by: { $0.action.strictness < $1.action.strictness }) {
                    return rule
                }
            }
        }
        return nil
    }

    /// Whether `rule` names `program`.
    public static func matches(_ rule: AccessRuleRecord, _ program: ProcessIdentity) -> Bool {
        switch rule.kind {
        case .program:
            return program.executableName == rule.value || program.command.map { $0 == commandName(rule.value) } ?? false
        case .executable:
            return program.executable == rule.value
        case .unit:
            return program.cgroup.map { $0.split(separator: "/").contains { $0 == rule.value } } ?? false
        }
    }

    /// A program name as `/proc/PID/comm` shows it: its first 15 bytes (`TASK_COMM_LEN` - 1),
    /// cut at a character boundary.
    public static func commandName(_ name: String) -> String {
        var bytes = Array(name.utf8.prefix(15))
        while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What a request of `program` in the domain `domainID` does, given whether the bytes it
    /// needs are present.
    public func decision(for program: ProcessIdentity, domainID: Int64, present: Bool) -> AccessDecision {
        let rule = rule(for: program, domainID: domainID)
        return AccessDecision(action: rule?.action ?? .fetch, rule: rule, program: program, present: present)
    }
}
