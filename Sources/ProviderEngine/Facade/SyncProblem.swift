import Foundation
import ProviderCore

/// Something a sync did not do, with where and why: an item of the store it skipped (a name
/// the replica cannot hold, an impossible value, a folder moved into itself, a folder not
/// listed, an item not placed, moved, removed or downloaded) or a local change it did not send
/// (refused by the store, excluded from sync, waiting for the next sync). A sync with any
/// problem succeeded only in part: `fileproviderctl sync` exits 3, and `status` shows the
/// problems of each domain's last sync (``MetadataStore/recordSyncProblems(domainID:skipped:notSent:examples:)``).
public struct SyncProblem: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable {
        /// An item of the store not brought into the replica (or not updated there).
        case skipped
        /// A local change not sent to the store.
        case notSent
    }

    public var kind: Kind
    /// The item's path in the domain, starting with `/` (for an item of a listing the sync
    /// skipped: the folder it is in).
    public var path: String
    /// Why, for people.
    public var reason: String

    public init(kind: Kind, path: String, reason: String) {
        self.kind = kind
        self.path = path
        self.reason = reason
    }
}

extension SyncReport {
    /// The most problems a report keeps with their paths and reasons (and the database keeps for
    /// `status`); the counts go on past it.
    public static let problemLimit = 50

    /// Whether the sync left anything undone: an item skipped or a change not sent.
    public var isPartial: Bool { skipped > 0 || notSent > 0 }

    /// Records an item of the store the sync skipped at `path` (relative to the replica's root),
    /// with the notice that tells the user.
    mutating func skip(_ path: String, _ reason: String, notice: String) {
        skipped += 1
        keep(SyncProblem(kind: .skipped, path: "/" + path, reason: reason))
        notices.append(notice)
    }

    /// Records `count` local changes the sync did not send (at `path`, relative to the
    /// replica's root), with the notice that tells the user.
    mutating func notSend(_ path: String, _ reason: String, notice: String, count: Int = 1) {
        notSent += count
        keep(SyncProblem(kind: .notSent, path: "/" + path, reason: reason))
        notices.append(notice)
    }

    /// Adds the problems of `part` (a report of work done beside others) to this report.
    mutating func addProblems(of part: SyncReport) {
        skipped += part.skipped
        notSent += part.notSent
        for problem in part.problems { keep(problem) }
    }

    private mutating func keep(_ problem: SyncProblem) {
        if problems.count < Self.problemLimit { problems.append(problem) }
    }

    /// `3 items skipped, 1 change not sent`, or `nil` when nothing was left undone.
    public var problemSummary: String? { Self.problemSummary(skipped: skipped, notSent: notSent) }

    /// `3 items skipped, 1 change not sent` for these counts, or `nil` when both are 0.
    public static func problemSummary(skipped: Int, notSent: Int) -> String? {
        var parts: [String] = []
        if skipped > 0 { parts.append("\(skipped) item\(skipped == 1 ? "" : "s") skipped") }
        if notSent > 0 { parts.append("\(notSent) change\(notSent == 1 ? "" : "s") not sent") }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }
}
