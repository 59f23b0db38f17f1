import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// What uploads cut short leave in a store's folder, next to files that only look like it: for
/// the tests that a listing removes abandoned staging files (``StagingName``) and nothing else.
public struct StagingLeftovers: Sendable {
    /// Names a listing of the folder must remove.
    public let abandoned: [String]
    /// Names it must leave alone.
    public let kept: [String]
    /// The names among ``kept`` that are items (the others are hidden from listings).
    public let listed: Set<String>

    /// Makes the leftovers in `folder` (a folder of the store, on the local disk): abandoned
    /// staging files (a file and a symlink, untouched for two hours), and what must stay: a
    /// fresh staging file, one written a moment ago, one an upload just dated back before its
    /// rename, user files whose names merely look alike, the file an interrupted replace moved
    /// aside, a folder a recursive deletion renamed to a staging name, and a plain file.
    public static func make(in folder: URL, now: Date = Date()) throws -> StagingLeftovers {
        let old = now.addingTimeInterval(-2 * StagingName.abandonedAge)
        var abandoned: [String] = []
        var kept: [String] = []
        func file(_ name: String, modified: Date, accessed: Date, abandoned isAbandoned: Bool) throws {
            let url = folder.appendingPathComponent(name)
            try Data("partial upload".utf8).write(to: url)
            try setTimes(url.path, modified: modified, accessed: accessed)
            if isAbandoned { abandoned.append(name) } else { kept.append(name) }
        }
        try file(StagingName.make(), modified: old, accessed: old, abandoned: true)
        let link = StagingName.make()
        try FileManager.default.createSymbolicLink(
            atPath: folder.appendingPathComponent(link).path, withDestinationPath: "target.txt")
        try setTimes(folder.appendingPathComponent(link).path, modified: old, accessed: old)
        abandoned.append(link)

        try file(StagingName.make(), modified: now, accessed: now, abandoned: false)
        // Being written: an upload keeps its modification time fresh.
        try file(StagingName.make(), modified: now, accessed: old, abandoned: false)
        // About to be renamed: dated back to the item's date, made a moment ago.
        try file(StagingName.make(), modified: old, accessed: now, abandoned: false)
        try file(StagingName.prefix + "notes.txt", modified: old, accessed: old, abandoned: false)
        try file(StagingName.prefix + UUID().uuidString.lowercased(), modified: old, accessed: old, abandoned: false)
        try file(StagingName.make() + ".replaced", modified: old, accessed: old, abandoned: false)
        let lookalike = String(StagingName.make().dropFirst())
        try file(lookalike, modified: old, accessed: old, abandoned: false)
        try file("report.txt", modified: old, accessed: old, abandoned: false)
        let deleted = folder.appendingPathComponent(StagingName.make())
        try FileManager.default.createDirectory(at: deleted, withIntermediateDirectories: false)
        try Data("inside".utf8).write(to: deleted.appendingPathComponent("inside.txt"))
        try setTimes(deleted.path, modified: old, accessed: old)
        kept.append(deleted.lastPathComponent)
        return StagingLeftovers(abandoned: abandoned, kept: kept, listed: [lookalike, "report.txt"])
    }

    /// The names in `folder` now.
    public static func names(in folder: URL) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
    }

    /// Sets both times of `path`, not following a symlink.
    public static func setTimes(_ path: String, modified: Date, accessed: Date) throws {
        func spec(_ date: Date) -> timespec {
            timespec(tv_sec: Int(date.timeIntervalSince1970), tv_nsec: 0)
        }
        var times = [spec(accessed), spec(modified)]
        if utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) != 0 {
            throw POSIXError.error("cannot set the times of", path: path)
        }
    }
}
