import Foundation

/// Polls `condition` every `interval` seconds until it holds or `timeout` seconds pass; returns
/// whether it held. Never holds a thread of the cooperative pool.
///
/// The timeout counts only time this task got to poll: each pause counts at most a quarter of a
/// second, so a test bundle that keeps the cooperative pool busy (every test of a bundle runs at
/// once, on two threads here) delays a poll without making it give up early. A wall-clock limit
/// of five times `timeout` still ends a wait whose condition never holds.
public func eventually(
    timeout: Double = 30, every interval: Double = 0.02, _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let start = Date()
    var waited = 0.0
    var last = start
    while true {
        if try await condition() { return true }
        let now = Date()
        waited += min(now.timeIntervalSince(last), 0.25)
        last = now
        if waited >= timeout || now.timeIntervalSince(start) >= timeout * 5 { return false }
        try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
    }
}
