import Foundation

/// Names for the copies the engine keeps when two versions collide.
enum ConflictName {
    /// `name (conflicted copy 2026-11-21 143005 host).ext`.
    static func conflictedCopy(of name: String, date: Date = Date(), host: String = ProcessInfo.processInfo.hostName) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&seconds, &parts)
        let stamp = String(
            format: "%04d-%02d-%02d %02d%02d%02d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
        let shortHost = host.split(separator: ".").first.map(String.init) ?? host
        return insert(" (conflicted copy \(stamp) \(shortHost))", into: name)
    }

    /// `name 2.ext`, `name 3.ext`, … for `attempt` 2, 3, ….
    static func numbered(_ name: String, _ attempt: Int) -> String { insert(" \(attempt)", into: name) }

    /// Inserts `suffix` before the extension (`a.tar.gz` keeps `.gz` only; dotfiles keep their name).
    static func insert(_ suffix: String, into name: String) -> String {
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return String(name[..<dot]) + suffix + String(name[dot...])
        }
        return name + suffix
    }
}
