import Foundation

/// Tells when programs read the dataless files of one folder one after another (a build,
/// `grep -r`, `cat *`, a photo viewer), so that ``FolderReadAhead`` fetches the folder's other
/// small files in batches, and when they stop, so that it stops.
///
/// A value with no clock and no system call: every method takes the time (seconds on a
/// monotonic clock) from its caller, so tests drive it with times of their own.
///
/// The pattern: ``Limits/reads`` distinct files of one folder accessed (dataless, fetched on
/// access) by one program (process) within ``Limits/window`` seconds; programs that each read
/// one file (a shell loop of `cat`s, a file manager's previews) do not start one. A read-ahead it starts goes on while programs keep
/// opening files of the folder: it never runs more than ``Limits/lead`` files ahead of their
/// opens, and stops when no file of the folder was opened or accessed for ``Limits/idle``
/// seconds. Once it stopped for its lead, the next access of a dataless file of the folder
/// (programs caught up) starts it again at once.
package struct FolderReadPattern: Sendable {
    /// The thresholds of the pattern.
    package struct Limits: Sendable {
        /// Distinct files of a folder accessed ...
        package var reads = 3
        /// ... within this many seconds start a read-ahead.
        package var window: Double = 1
        /// A read-ahead stops after this many seconds without an open or access in its folder.
        package var idle: Double = 2
        /// A read-ahead fetches at most this many files more than programs opened in the
        /// folder since it started.
        package var lead = 128
        /// The most folders remembered at once (the least recently active are forgotten).
        package var folders = 32
        /// The most accessed files remembered per folder; past it the folder gets no
        /// read-ahead any more (its names are not kept without bound).
        package var accessedNames = 100_000
    }

    /// A folder of a domain: its path relative to the replica root ("" for the root).
    package struct Folder: Hashable, Sendable {
        package let domainID: Int64
        package let path: String

        /// The folder of a file's relative path, and the file's name.
        package static func of(domainID: Int64, path: String) -> (folder: Folder, name: String) {
            guard let slash = path.lastIndex(of: "/") else { return (Folder(domainID: domainID, path: ""), path) }
            return (Folder(domainID: domainID, path: String(path[..<slash])), String(path[path.index(after: slash)...]))
        }
    }

    /// What is known of one folder.
    private struct State: Sendable {
        /// The distinct files the last program accessed lately, with when: the last
        /// ``Limits/reads`` of them.
        var recent: [(name: String, at: Double)] = []
        var program: Int32 = 0
        /// Every file of the folder whose access went the usual way (fetched by its reader, not
        /// by a read-ahead): a read-ahead never takes it.
        var accessed: Set<String> = []
        /// The name last accessed (a read-ahead starts after it, in name order).
        var last = ""
        /// When a file of the folder was last opened or accessed.
        var active: Double
        /// Whether a read-ahead runs, and the programs' opens since it started.
        var running = false
        var opens = 0
        /// A read-ahead ran and stopped for its lead (not for idleness): the next access
        /// starts another.
        var resumable = false
        /// Too many names to remember: no read-ahead here any more.
        var saturated = false
    }

    package let limits: Limits
    private var folders: [Folder: State] = [:]

    package init(limits: Limits = Limits()) { self.limits = limits }

    /// The access by process `program` of the dataless file `name` of `folder` at `now`
    /// (seconds) that goes the usual way (fetched for it). `counts`: whether it may start a
    /// read-ahead (not for a program an access rule limits); it is remembered either way, so
    /// no read-ahead takes the file. Returns `true` when a read-ahead of the folder should
    /// start now.
    package mutating func accessed(_ name: String, in folder: Folder, by program: Int32, at now: Double, counts: Bool = true) -> Bool {
        forgetIdle(at: now, except: folder)
        var state = folders[folder] ?? State(active: now)
        defer { folders[folder] = state }
        // Programs came back after a pause: the pattern has to show again.
        if now - state.active > limits.idle { state.resumable = false }
        if state.accessed.count >= limits.accessedNames { state.saturated = true }
        if !state.saturated { state.accessed.insert(name) }
        state.active = now
        state.last = name
        guard counts, !state.saturated else { return false }
        if state.program != program { state.recent.removeAll() }
        state.program = program
        state.recent.removeAll { $0.name == name || now - $0.at > limits.window }
        state.recent.append((name, now))
        if state.recent.count > limits.reads { state.recent.removeFirst(state.recent.count - limits.reads) }
        guard !state.running else { return false }
        if state.resumable || state.recent.count >= limits.reads {
            state.running = true
            state.resumable = false
            state.opens = 0
            return true
        }
        return false
    }

    /// Leaves the file `name` of `folder` to programs: no read-ahead takes it (one did not fill it).
    package mutating func leave(_ name: String, in folder: Folder) {
        guard var state = folders[folder] else { return }
        if state.accessed.count >= limits.accessedNames { state.saturated = true } else { state.accessed.insert(name) }
        folders[folder] = state
    }

    /// A program opened a file of `folder` (any file: read-ahead files too) at `now`.
    package mutating func opened(in folder: Folder, at now: Double) {
        guard var state = folders[folder] else { return }
        state.active = now
        if state.running { state.opens += 1 }
        folders[folder] = state
    }

    /// Whether a program's access of `name` in `folder` went the usual way: a read-ahead leaves
    /// it alone.
    package func wasAccessed(_ name: String, in folder: Folder) -> Bool {
        folders[folder].map { $0.saturated || $0.accessed.contains(name) } ?? false
    }

    /// The name the last access of `folder` was of ("" when none).
    package func lastAccessed(in folder: Folder) -> String { folders[folder]?.last ?? "" }

    /// How many more files the read-ahead of `folder` may start at `now`, having fetched
    /// `fetched` files since it started: 0 when programs stopped (idle) or it is a full lead
    /// ahead of their opens.
    package func allowance(_ folder: Folder, fetched: Int, at now: Double) -> Int {
        guard let state = folders[folder], state.running, !state.saturated else { return 0 }
        if now - state.active > limits.idle { return 0 }
        return max(0, limits.lead - max(0, fetched - state.opens))
    }

    /// Whether no file of `folder` was opened or accessed for longer than ``Limits/idle``
    /// seconds at `now`.
    package func isIdle(_ folder: Folder, at now: Double) -> Bool {
        folders[folder].map { now - $0.active > limits.idle } ?? true
    }

    /// The read-ahead of `folder` ended: for its lead or having nothing left (`resumable`: the
    /// next access starts another) or because programs stopped.
    package mutating func stopped(_ folder: Folder, resumable: Bool) {
        guard var state = folders[folder] else { return }
        state.running = false
        state.resumable = resumable
        state.recent.removeAll()
        folders[folder] = state
    }

    /// Whether a read-ahead of `folder` is running.
    package func isRunning(_ folder: Folder) -> Bool { folders[folder]?.running ?? false }

    /// How many folders are remembered.
    package var count: Int { folders.count }

    /// Forgets folders idle for longer than ``Limits/idle`` with no read-ahead running, and the
    /// least recently active ones past ``Limits/folders``.
    private mutating func forgetIdle(at now: Double, except kept: Folder) {
        guard folders.count >= limits.folders else { return }
        folders = folders.filter { $0.key == kept || $0.value.running || now - $0.value.active <= limits.idle }
        while folders.count >= limits.folders,
            let oldest = folders.filter({ $0.key != kept && !$0.value.running }).min(by: { $0.value.active < $1.value.active })
        {
            folders.removeValue(forKey: oldest.key)
        }
    }
}
