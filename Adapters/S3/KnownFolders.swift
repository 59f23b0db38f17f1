import Foundation
import Synchronization

/// Folders of the bucket this backend saw a moment ago, by key (`docs/`): a batch of new files
/// in one folder checks that the folder exists once, not with a listing before every upload;
/// and, where one listing page showed all of a folder's entries (or this backend made the
/// folder), the names of the folders in it, so a new file's name is checked against them
/// without a listing of its own.
///
/// A folder is trusted for ``lifetime`` after a listing showed it or this backend wrote its
/// marker; deleting or moving a folder through this backend forgets it, every folder below, and
/// its name in its parent's folders. Another client can delete a folder meanwhile: a file
/// created in it then makes the folder exist again (a key below a prefix is the folder, in S3),
/// as any S3 client writing there would; and another client making a folder of a new file's
/// name in that moment leaves both (the listing then shows the folder and refuses the object
/// it hides: nothing is lost). Holds at most ``maximumFolders`` keys and
/// ``maximumSubfolders`` names of subfolders.
final class KnownFolders: Sendable {
    /// How long a folder seen is trusted.
    static let lifetime: Duration = .seconds(5)
    /// The most folders remembered; past it the memory starts again.
    static let maximumFolders = 1_024
    /// The most names of subfolders remembered, all folders together.
    static let maximumSubfolders = 65_536

    private struct Entry {
        var at: ContinuousClock.Instant
        /// The names of the folders in it, when all are known.
        var subfolders: Set<String>?
    }

    private struct State {
        var folders: [String: Entry] = [:]
        var subfolderCount = 0

        mutating func removeAll() {
            folders.removeAll(keepingCapacity: true)
            subfolderCount = 0
        }

        mutating func set(_ key: String, _ entry: Entry?) {
            subfolderCount -= folders[key]?.subfolders?.count ?? 0
            folders[key] = entry
            subfolderCount += entry?.subfolders?.count ?? 0
        }
    }

    private let state = Mutex(State())

    /// The live entry of a folder, dropping an expired one.
    private static func live(_ key: String, in state: inout State, now: ContinuousClock.Instant) -> Entry? {
        guard let entry = state.folders[key] else { return nil }
        if now - entry.at < lifetime { return entry }
        state.set(key, nil)
        return nil
    }

    /// Whether the folder of `key` was seen less than ``lifetime`` ago.
    func contains(_ key: String) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { Self.live(key, in: &$0, now: now) != nil }
    }

    /// The names of the folders in the folder of `key`, when it was seen less than
    /// ``lifetime`` ago with all of them; `nil` when not known.
    func subfolders(of key: String) -> Set<String>? {
        let now = ContinuousClock.now
        return state.withLock { Self.live(key, in: &$0, now: now)?.subfolders }
    }

    /// Remembers that the folder of `key` exists now, with the names of all the folders in it
    /// when they are known (`subfolders`: a listing that held all its entries, or none for a
    /// folder just made).
    func insert(_ key: String, subfolders: Set<String>? = nil) {
        let now = ContinuousClock.now
        state.withLock { state in
            if state.folders.count >= Self.maximumFolders || state.subfolderCount + (subfolders?.count ?? 0) > Self.maximumSubfolders {
                state.removeAll()
            }
            // A folder seen again without its subfolders keeps the names it had while they live.
            let known = subfolders ?? Self.live(key, in: &state, now: now)?.subfolders
            state.set(key, Entry(at: now, subfolders: known))
        }
    }

    /// Adds a folder this backend made (`name`) to the subfolders of `parent`, where they are
    /// known.
    func addSubfolder(_ name: String, in parent: String) {
        state.withLock { state in
            guard var entry = state.folders[parent], entry.subfolders != nil else { return }
            entry.subfolders?.insert(name)
            state.set(parent, entry)
        }
    }

    /// Forgets the folder of `key` and every folder below it, and its name in its parent's
    /// subfolders.
    func forget(below key: String) {
        state.withLock { state in
            for folder in state.folders.keys where folder.hasPrefix(key) { state.set(folder, nil) }
            let (parent, name) = Self.parentAndName(of: key)
            if let name, var entry = state.folders[parent], entry.subfolders != nil {
                entry.subfolders?.remove(name)
                state.set(parent, entry)
            }
        }
    }

    /// The key of the folder holding the folder of `key` (`a/b/` → `a/`, `b`; `b/` → ``, `b`).
    static func parentAndName(of key: String) -> (String, String?) {
        var trimmed = Substring(key)
        guard trimmed.hasSuffix("/") else { return (key, nil) }
        trimmed.removeLast()
        guard let slash = trimmed.lastIndex(of: "/") else { return ("", String(trimmed)) }
        return (String(trimmed[...slash]), String(trimmed[trimmed.index(after: slash)...]))
    }
}
