import Foundation
import ProviderCore

/// Programs started to describe themselves, kept running for a while so that the first
/// ``ExternalBackend`` of the same program in this process opens its store in them instead of
/// starting the program a second time (a Python program's start costs 50–100 ms, more through
/// a version manager's shim).
///
/// A parked program has answered `hello` and `describe` and nothing else. One program is kept
/// per path (a later describe of the same path replaces and stops the earlier one); one not
/// taken within ``ExternalBackends/parkedProgramSeconds`` is stopped (its input closed). A
/// process that exits closes the programs' input too, and they exit.
final class ParkedPrograms: @unchecked Sendable {
    struct Parked {
        var program: BackendProgram
        var hello: HelloResult
    }

    static let shared = ParkedPrograms()

    private let lock = NSLock()
    private var parked: [String: Parked] = [:]

    /// Keeps `program` for the next ``take(path:silenceLimit:)`` of its path.
    func park(_ program: BackendProgram, hello: HelloResult, seconds: Double = ExternalBackends.parkedProgramSeconds) {
        let earlier = lock.withLock {
            defer { parked[program.path] = Parked(program: program, hello: hello) }
            return parked[program.path]
        }
        earlier?.program.stop()
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + seconds) { [self] in
            let expired = lock.withLock { () -> BackendProgram? in
                guard let entry = parked[program.path], entry.program === program else { return nil }
                parked[program.path] = nil
                return program
            }
            expired?.stop()
        }
    }

    /// The parked program of `path`, if one is still running with this silence limit and
    /// grace period; it is no longer parked. One that ended or has other limits is stopped and
    /// not returned.
    func take(path: String, silenceLimit: Double, stopGrace: Double) -> Parked? {
        guard let entry = lock.withLock({ parked.removeValue(forKey: path) }) else { return nil }
        guard !entry.program.hasEnded, entry.program.silenceLimit == silenceLimit, entry.program.stopGrace == stopGrace else {
            entry.program.stop(kill: true)
            return nil
        }
        return entry
    }

    /// Stops every parked program (closes its input; one still running after its grace period
    /// gets SIGTERM, then SIGKILL) and returns once they have all ended: a process calls it
    /// before it exits, so that no program is left running.
    func stopAll() async {
        let all = lock.withLock {
            defer { parked = [:] }
            return Array(parked.values)
        }
        for entry in all { entry.program.stop() }
        for entry in all { await entry.program.waitUntilEnded() }
    }

    /// Whether a program of `path` is parked (for tests).
    func isParked(path: String) -> Bool { lock.withLock { parked[path] != nil } }
}
