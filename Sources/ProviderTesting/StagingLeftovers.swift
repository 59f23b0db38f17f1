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
    /// Staging files of uploads in progress, by their times: fresh, being written, about to be
    /// renamed. A listing leaves them (the `local` backend tells by the writer's lock instead:
    /// its test locks them).
    public let inFlight: [String]
    /// Other names it must leave alone.
    public let kept: [String]
    /// The names among ``kept`` that are items (the others are hidden from listings).
    public let listed: Set<String>

    /// Makes the leftovers in `folder` (a folder of the store, on the local disk): abandoned
    /// staging files (a file and a symlink, untouched for two hours); uploads in progress (a
    /// fresh staging file, one written a moment ago, one an upload just dated back before its
    /// rename); and what must stay whatever its age: user files whose names merely look alike,
    /// the file an interrupted replace moved aside, a folder a recursive deletion renamed to a
    /// staging name, and a plain file.
    public static func make(in folder: URL, now: Date = Date()) throws -> StagingLeftovers {
        let old = now.addingTimeInterval(-2 * StagingName.abandonedAge)
        var abandoned: [String] = []
        var inFlight: [String] = []
        var kept: [String] = []
        func file(_ name: String, modified: Date, accessed: Date, into list: inout [String]) throws {
            let url = folder.appendingPathComponent(name)
            try Data("partial upload".utf8).write(to: url)
            try setTimes(url.path, modified: modified, accessed: accessed)
            list.append(name)
        }
        try file(StagingName.make(), modified: old, accessed: old, into: &abandoned)
        let link = StagingName.make()
        try FileManager.default.createSymbolicLink(
            atPath: folder.appendingPathComponent(link).path, withDestinationPath: "target.txt")
        try setTimes(folder.appendingPathComponent(link).path, modified: old, accessed: old)
        abandoned.append(link)

        try file(StagingName.make(), modified: now, accessed: now, into: &inFlight)
        // Being written: an upload keeps its modification time fresh.
        try file(StagingName.make(), modified: now, accessed: old, into: &inFlight)
        // About to be renamed: dated back to the item's date, made a moment ago.
        try file(StagingName.make(), modified: old, accessed: now, into: &inFlight)
        try file(StagingName.prefix + "notes.txt", modified: old, accessed: old, into: &kept)
        try file(StagingName.prefix + UUID().uuidString.lowercased(), modified: old, accessed: old, into: &kept)
        try file(StagingName.make() + ".replaced", modified: old, accessed: old, into: &kept)
        let lookalike = String(StagingName.make().dropFirst())
        try file(lookalike, modified: old, accessed: old, into: &kept)
        try file("report.txt", modified: old, accessed: old, into: &kept)
        let deleted = folder.appendingPathComponent(StagingName.make())
        try FileManager.default.createDirectory(at: deleted, withIntermediateDirectories: false)
        try Data("inside".utf8).write(to: deleted.appendingPathComponent("inside.txt"))
        try setTimes(deleted.path, modified: old, accessed: old)
        kept.append(deleted.lastPathComponent)
        return StagingLeftovers(abandoned: abandoned, inFlight: inFlight, kept: kept, listed: [lookalike, "report.txt"])
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
