import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// Local changes the domain's store cannot take, found before anything is sent (Apple's
/// `excludedFromSync`): an item of a kind not in ``BackendCapabilities/creatableKinds`` (a
/// folder in a store without folders), a file over ``BackendCapabilities/maximumUploadSize``,
/// and any symlink made in the replica (the engine never creates or follows symlinks; a store
/// without `.symlink` in its kinds could not hold one anyway).
///
/// Such an item stays in the replica as it is; it is not sent, so no sync retries it. The user
/// is told once, when it is first excluded for a reason (a notice in the sync report); the
/// domain lists it (``MetadataStore/excludedItems(domainID:)``: `status`, `pending`, `why`)
/// until it changes into something the store takes (then it goes up as any change) or leaves
/// the replica. What is inside an excluded folder is not sent either (its folder is not in the
/// store) and is covered by the folder's entry.
struct ExcludedFromSync {
    let capabilities: BackendCapabilities

    /// What an excluded change is: its path, kind, size and why.
    struct Exclusion {
        var path: String
        var kind: ItemKind
        var size: Int64
        var reason: String
    }

    /// Takes out of `result` (a scan of `scope`) the changes the store cannot take: each is
    /// recorded and told once (a notice); a recorded exclusion is forgotten once its path has a
    /// change the store takes, or nothing excluded is there any more (after a scan of the whole
    /// replica: not found excluded again).
    /// - Throws: `localIOFailure` when the database fails; `cancelled` when the task was
    ///   cancelled before the executor ran.
    static func takeOut(from result: inout LocalScanResult, scope: ScanScope, context: DomainContext, report: inout SyncReport)
        async throws(FileProviderError)
    {
        let (store, domainID) = (context.store, context.domainID)
        let recorded = try await context.executor.run { try store.excludedItems(domainID: domainID) }
        var known: [String: ExcludedItemRecord] = [:]
        for record in recorded { known[record.path] = record }
        let filter = ExcludedFromSync(capabilities: context.backend.capabilities)
        let sorted = filter.sort(result.changes, known: known, domainID: context.domainID)
        result.changes = sorted.send
        for record in sorted.new {
            report.notSend(
                record.path, "excluded from sync: \(record.reason)",
                notice: "\(context.display(record.path)): excluded from sync: \(record.reason)")
        }
        var forget = sorted.sendable
        let handled = Set(sorted.sendable).union(sorted.excluded).union(result.unsettled)
        let unseen = recorded.filter { !handled.contains($0.path) }
        if scope.everything && !result.isPartial {
            forget += unseen.map(\.path)
        } else if !unseen.isEmpty {
            let replica = context.replica
            forget += try await context.executor.run {
                unseen.filter { !ExcludedFromSync.stillThere(replica, $0.path, kind: $0.kind) }.map(\.path)
            }
        }
        let (new, removing) = (sorted.new, forget)
        try await context.executor.run { try store.updateExcludedItems(domainID: domainID, saving: new, removing: removing) }
    }

    /// What ``sort(_:known:domainID:)`` decided.
    struct Sorted {
        /// The changes to send, in their order.
        var send: [LocalChange] = []
        /// Exclusions new or with a new reason: recorded, and the user is told.
        var new: [ExcludedItemRecord] = []
        /// The paths excluded by this scan, told before or not.
        var excluded = Set<String>()
        /// Recorded exclusions whose path has a change the store can take now.
        var sendable: [String] = []
    }

    /// Splits a scan's changes into those to send and those the store cannot take; what is
    /// inside an excluded folder (`known`, or found now) is left out without an entry of its own.
    func sort(_ changes: [LocalChange], known: [String: ExcludedItemRecord], domainID: Int64) -> Sorted {
        var sorted = Sorted()
        let exclusions = changes.map(exclusion(of:))
        var folders = Set(known.values.filter { $0.kind == ItemKind.folder.rawValue }.map(\.path))
        for case let exclusion? in exclusions where exclusion.kind == .folder { folders.insert(exclusion.path) }
        for (change, exclusion) in zip(changes, exclusions) {
            switch change {
            case .created, .moved:
                // Its folder is not in the store, and never will be.
                if !folders.isEmpty && Self.isInside(change.path, folders) { continue }
            default: break
            }
            guard let exclusion else {
                if let refused = known[change.path], Self.isUnchanged(since: refused, change) {
                    // Refused by the store as it is now: not sent again, not told again.
                    sorted.excluded.insert(change.path)
                    continue
                }
                if known[change.path] != nil { sorted.sendable.append(change.path) }
                sorted.send.append(change)
                continue
            }
            sorted.excluded.insert(exclusion.path)
            if let old = known[exclusion.path], old.reason == exclusion.reason, old.kind == exclusion.kind.rawValue { continue }
            sorted.new.append(
                ExcludedItemRecord(
                    domainID: domainID, path: exclusion.path, kind: exclusion.kind.rawValue, size: exclusion.size, reason: exclusion.reason)
            )
        }
        return sorted
    }

    /// Why the store cannot take `change`, or `nil` when it can.
    func exclusion(of change: LocalChange) -> Exclusion? {
        switch change {
        case .created(let path, .symlink, _):
            let reason =
                capabilities.creatableKinds.contains(.symlink)
                ? "a symlink made in the replica is never sent (the engine neither creates nor follows symlinks); it stays in the replica, not synced"
                : "this store cannot hold symlinks; the symlink stays in the replica, not synced"
            return Exclusion(path: path, kind: .symlink, size: 0, reason: reason)
        case .created(let path, let kind, let print):
            if !capabilities.creatableKinds.contains(kind) {
                let what = kind == .folder ? "folders" : "files"
                let inside = kind == .folder ? ", with what is in it," : ""
                return Exclusion(
                    path: path, kind: kind, size: 0, reason: "this store cannot create \(what); it stays in the replica\(inside) not synced"
                )
            }
            return kind == .file ? tooLarge(path, print.size) : nil
        case .modified(let record, let print), .writtenOverPlaceholder(let record, let print):
            return tooLarge(record.path, print.size)
        case .moved(let record, let to, let print?):
            // Without server-side moves a moved file goes up again as a new file
            // (MovesWithoutServerSupport): held with its deletion, the store keeps the old one.
            guard !capabilities.supportsServerSideMove, record.kind == .file, record.state == .materialized, print.isRegularFile
            else { return nil }
            return tooLarge(to, print.size)
        case .moved, .deleted, .flagsChanged:
            return nil
        }
    }

    /// Whether `change` is of the item the store refused (``ExcludedItemRecord/refusedByStore``)
    /// as it was then: a file with the same size, modification time and inode, a folder still
    /// a folder.
    static func isUnchanged(since refused: ExcludedItemRecord, _ change: LocalChange) -> Bool {
        guard refused.refusedByStore else { return false }
        let print: FileFingerprint
        switch change {
        case .created(_, .folder, _): return refused.kind == ItemKind.folder.rawValue
        case .created(_, .file, let found), .modified(_, let found), .writtenOverPlaceholder(_, let found): print = found
        default: return false
        }
        return refused.kind == ItemKind.file.rawValue && print.size == refused.size
            && print.modificationNanos == refused.modificationNanos && print.inode == refused.inode
    }

    /// An exclusion for a change the store refused where the engine could not foresee it:
    /// `notSupported` (a kind or a file it cannot hold) or `invalidFilename` for a new item or
    /// an edit (in place: a `.placeholder` file's name was never the item's, see
    /// ``Uploader``). `nil` for other errors and changes: they are retried as before.
    static func refusal(of change: LocalChange, _ error: FileProviderError, domainID: Int64, layout: any ReplicaLayout)
        -> ExcludedItemRecord?
    {
        guard error.code == .notSupported || error.code == .invalidFilename else { return nil }
        let (path, kind, print): (String, ItemKind, FileFingerprint)
        switch change {
        case .created(let at, let made, let found) where made != .symlink: (path, kind, print) = (at, made, found)
        case .modified(let record, let found): (path, kind, print) = (record.path, .file, found)
        case .writtenOverPlaceholder(let record, let found) where layout.writesAtAnItemsNameEditIt:
            (path, kind, print) = (record.path, .file, found)
        default: return nil
        }
        return ExcludedItemRecord(
            domainID: domainID, path: path, kind: kind.rawValue, size: kind == .file ? print.size : 0,
            reason: "the store refused it: \(error.message); not sent again until it changes", refusedByStore: true,
            modificationNanos: print.modificationNanos, inode: print.inode)
    }

    /// The exclusion of a file of `size` bytes over the store's limit, else `nil`.
    private func tooLarge(_ path: String, _ size: Int64) -> Exclusion? {
        // A negative limit (a store's bad number) reads as 0: nothing traps on it.
        guard let limit = capabilities.maximumUploadSize.map({ max(0, $0) }), size > limit else { return nil }
        return Exclusion(
            path: path, kind: .file, size: size,
            reason:
                "\(Self.bytes(size)) is over this store's limit of \(Self.bytes(limit)) per file; not sent (nothing was uploaded), it stays in the replica and goes up once it is smaller"
        )
    }

    /// `2,000 bytes (2.0 KiB)`: exact, then readable.
    static func bytes(_ count: Int64) -> String {
        var digits = Array(String(count))
        var index = digits.count - 3
        while index > 0 {
            digits.insert(",", at: index)
            index -= 3
        }
        let exact = "\(String(digits)) byte\(count == 1 ? "" : "s")"
        return count < 1024 ? exact : "\(exact) (\(ByteCount.format(count)))"
    }

    /// Whether `path` is inside one of `folders`.
    static func isInside(_ path: String, _ folders: Set<String>) -> Bool {
        var path = Substring(path)
        while let slash = path.lastIndex(of: "/") {
            path = path[..<slash]
            if folders.contains(String(path)) { return true }
        }
        return false
    }

    /// Whether the replica still holds an item of `kind` at `path`. Blocking.
    static func stillThere(_ replica: Replica, _ path: String, kind: String) -> Bool {
        guard let print = replica.fingerprint(atPath: replica.path(path)) else { return false }
        switch kind {
        case ItemKind.symlink.rawValue: return print.isSymlink
        case ItemKind.folder.rawValue: return print.isDirectory
        default: return print.isRegularFile
        }
    }
}

extension ProviderManager {
    /// The local items of a domain excluded from sync (``ExcludedFromSync``) as the last sync
    /// found them, by path. Works offline.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `localIOFailure` when the
    ///   database fails.
    public func excludedItems(inDomain name: String) throws(FileProviderError) -> [ExcludedItemRecord] {
        let domain = try domain(named: name)
        guard let domainID = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(domain.name) has no id") }
        return try store.excludedItems(domainID: domainID)
    }

    /// `unsent` with the reasons of the changes the last sync excluded from sync (their own
    /// exclusion, or their folder's).
    static func markingExcluded(_ unsent: [UnsentChange], _ excluded: [ExcludedItemRecord]) -> [UnsentChange] {
        if excluded.isEmpty { return unsent }
        var byPath: [String: ExcludedItemRecord] = [:]
        for record in excluded { byPath[record.path] = record }
        let folders = Set(excluded.filter { $0.kind == ItemKind.folder.rawValue }.map(\.path))
        return unsent.map { change in
            guard change.kind != .deleted && change.kind != .unfinished else { return change }
            var change = change
            let path = String(change.path.dropFirst())
            if let record = byPath[path] {
                change.reason = "excluded from sync: \(record.reason)"
            } else if let folder = folders.filter({ path.hasPrefix($0 + "/") }).min() {
                change.reason = "inside /\(folder), which is excluded from sync; not synced"
            }
            return change
        }
    }
}
