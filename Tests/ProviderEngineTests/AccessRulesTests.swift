import Foundation
import ProviderStore
import ProviderSystem
import ProviderTesting
import Testing

@testable import ProviderEngine

#if canImport(Glibc)
    import Glibc
#endif

/// Which access rule decides for a program (``AccessRules``), and what `/proc` tells of a
/// process (``ProcessIdentity``): this process, one that exited, cgroup lines of both
/// hierarchies.
@Suite("Access rules by program")
struct AccessRulesTests {
    static func program(exe: String?, comm: String?, cgroup: String? = nil) -> ProcessIdentity {
        ProcessIdentity(
            pid: 42, executable: exe, command: comm, unit: cgroup.flatMap(ProcessIdentity.unit(ofCgroup:)), cgroup: cgroup)
    }

    @Test func theShippedDefaultsDenyTheIndexersByExecutableOrByTheirCutCommandName() {
        let rules = AccessRules(
            AccessRuleRecord.defaultDeniedPrograms.map { AccessRuleRecord(domainID: nil, kind: .program, value: $0, action: .deny) })
        // tracker-miner-fs-3 is 18 bytes: the kernel's command name keeps 15.
        let tracker = Self.program(exe: "/usr/libexec/tracker-miner-fs-3", comm: "tracker-miner-f")
        #expect(rules.decision(for: tracker, domainID: 1, present: true).refuses)
        let renamedCopy = Self.program(exe: "/opt/x/other", comm: "tracker-miner-f")
        #expect(rules.rule(for: renamedCopy, domainID: 1)?.value == "tracker-miner-fs-3")
        let baloo = Self.program(exe: "/tmp/x/baloo_file", comm: "baloo_file")
        #expect(rules.decision(for: baloo, domainID: 1, present: false).refuses)
        // baloo_file_extractor is not baloo_file, though one starts with the other.
        #expect(
            rules.rule(for: Self.program(exe: "/usr/bin/baloo_file_extractor", comm: "baloo_file_extr"), domainID: 1)?.value
                == "baloo_file_extractor")
        #expect(rules.rule(for: Self.program(exe: "/usr/bin/cat", comm: "cat"), domainID: 1) == nil)
        #expect(!rules.decision(for: Self.program(exe: "/usr/bin/cat", comm: "cat"), domainID: 1, present: false).refuses)
    }

    @Test func aDomainsRuleDecidesBeforeAGlobalOneAndTheMorePreciseKindFirst() {
        let rules = AccessRules([
            AccessRuleRecord(domainID: nil, kind: .program, value: "viewer", action: .deny),
            AccessRuleRecord(domainID: 7, kind: .program, value: "viewer", action: .fetch),
            AccessRuleRecord(domainID: nil, kind: .unit, value: "photos.service", action: .presentOnly),
            AccessRuleRecord(domainID: nil, kind: .executable, value: "/usr/bin/viewer", action: .fetch),
        ])
        let inUnit = Self.program(exe: "/opt/viewer", comm: "viewer", cgroup: "/user.slice/user@0.service/app.slice/photos.service")
        #expect(rules.rule(for: inUnit, domainID: 7)?.action == .fetch)
        #expect(rules.rule(for: inUnit, domainID: 8)?.action == .presentOnly)
        let present = rules.decision(for: inUnit, domainID: 8, present: true)
        #expect(!present.refuses && !present.mayFetch)
        #expect(rules.decision(for: inUnit, domainID: 8, present: false).refuses)
        let byPath = Self.program(exe: "/usr/bin/viewer", comm: "viewer", cgroup: "/user.slice/user@0.service/app.slice/photos.service")
        #expect(rules.rule(for: byPath, domainID: 8)?.kind == .executable)
        // A slice above the unit matches too.
        let slice = AccessRules([AccessRuleRecord(domainID: nil, kind: .unit, value: "app.slice", action: .deny)])
        #expect(slice.rule(for: inUnit, domainID: 1) != nil)
        // Of two rules of one kind that both match (executable name and command name), the
        // stricter.
        let two = AccessRules([
            AccessRuleRecord(domainID: nil, kind: .program, value: "python3", action: .fetch),
            AccessRuleRecord(domainID: nil, kind: .program, value: "indexer", action: .deny),
        ])
        #expect(two.rule(for: Self.program(exe: "/usr/bin/python3", comm: "indexer"), domainID: 1)?.action == .deny)
    }

    @Test func aProcessThatExitedIsUnknownAndMatchesNoRule() async throws {
        let child = try await runChild()
        let identity = ProcessIdentity.of(pid: child)
        #expect(!identity.isKnown, "\(identity)")
        let rules = AccessRules([AccessRuleRecord(domainID: nil, kind: .unit, value: "user.slice", action: .deny)])
        #expect(!rules.decision(for: identity, domainID: 1, present: false).refuses)
        #expect(!ProcessIdentity.of(pid: 0).isKnown)
        // This process: its executable, command name and cgroup.
        let own = ProcessIdentity.of(pid: getpid())
        #expect(own.executable?.hasPrefix("/") == true && own.command != nil && own.cgroup != nil, "\(own)")
    }

    @Test func cgroupLinesOfBothHierarchiesGiveTheUnit() {
        #expect(
            ProcessIdentity.cgroupPath("0::/user.slice/user-1000.slice/user@1000.service/app.slice/tracker-miner-fs-3.service\n")
                == "/user.slice/user-1000.slice/user@1000.service/app.slice/tracker-miner-fs-3.service")
        #expect(
            ProcessIdentity.cgroupPath("12:cpu,cpuacct:/x\n1:name=systemd:/system.slice/cron.service\n") == "/system.slice/cron.service")
        #expect(ProcessIdentity.unit(ofCgroup: "/system.slice/docker-1.scope/sub") == "docker-1.scope")
        #expect(ProcessIdentity.unit(ofCgroup: "/user.slice") == nil)
        #expect(ProcessIdentity.cgroupPath("garbage") == nil)
        #expect(AccessRules.commandName("localsearch-extractor-3") == "localsearch-ext")
        #expect(AccessRules.commandName("ééééééééé") == "ééééééé")
    }

    /// The pid of a child that ran `true` and was reaped.
    private func runChild() async throws -> Int32 {
        try await offThePool {
            var pid: pid_t = 0
            var arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
            defer { for argument in arguments { free(argument) } }
            guard posix_spawn(&pid, "/bin/true", nil, nil, &arguments, nil) == 0 else { throw CancellationError() }
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            return pid
        }
    }
}
