import Foundation
import Testing

@testable import ProviderEngine
@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// serve's watcher waits for the second half of a rename before it wakes a scan: a folder a
/// file left, compared alone, would make the file look deleted.
@Suite("A rename's two inotify events")
struct RenamePairTests {
    static func event(_ flag: Int32, cookie: UInt32, name: String) -> InotifyEvent {
        InotifyEvent(watch: 1, mask: UInt32(bitPattern: flag), cookie: cookie, name: name)
    }

    @Test func aMoveFromWithoutItsMoveToIsUnpaired() {
        let from = Self.event(IN_MOVED_FROM, cookie: 7, name: "f0.txt")
        let to = Self.event(IN_MOVED_TO, cookie: 7, name: "moved.txt")
        let other = Self.event(IN_MOVED_TO, cookie: 8, name: "x")
        #expect(Inotify.hasUnpairedMove([from]))
        #expect(Inotify.hasUnpairedMove([from, other]))
        #expect(!Inotify.hasUnpairedMove([from, to]))
        #expect(!Inotify.hasUnpairedMove([to]))
        #expect(!Inotify.hasUnpairedMove([Self.event(IN_CREATE, cookie: 0, name: "n")]))
    }

    /// A real rename between two watched folders: however the events are read, the pair is
    /// complete once the waiting is done.
    @Test func aRenameBetweenWatchedFoldersArrivesAsAPair() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("rename-pair-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        for folder in ["a", "b"] {
            try FileManager.default.createDirectory(at: root.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try Data("x".utf8).write(to: root.appendingPathComponent("a/f.txt"))
        let inotify = try Inotify()
        for folder in ["a", "b"] {
            _ = try inotify.addWatch(root.appendingPathComponent(folder).path, mask: UInt32(IN_MOVED_FROM | IN_MOVED_TO))
        }
        #expect(rename(root.appendingPathComponent("a/f.txt").path, root.appendingPathComponent("b/g.txt").path) == 0)
        var events = try inotify.read()
        var waits = 0
        while Inotify.hasUnpairedMove(events) && waits < 5 {
            events += try inotify.events(within: 10)
            waits += 1
        }
        #expect(events.count == 2 && !Inotify.hasUnpairedMove(events), "\(events)")
    }
}
