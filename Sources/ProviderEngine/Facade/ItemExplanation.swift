import Foundation
import ProviderCore
import ProviderStore

#if canImport(Glibc)
    import Glibc
#endif

/// Why an item is in its state: everything the database and the replica say about it, for
/// `fileproviderctl why`.
public struct ItemExplanation: Sendable, Codable {
    /// A journalled operation on the item that is not done.
    public struct Operation: Sendable, Codable, Hashable {
        /// `create`, `modify`, `move` or `delete`.
        public var operation: String
        /// `pending` (retried by the next sync), `running` (interrupted, replayed with
        /// `mayAlreadyExist`) or `failed` (refused by the store: nothing was done; sent afresh).
        public var state: String
        public var attempts: Int
        public var lastError: String?
        public var since: Date
    }

    /// A conflict logged for the item's path (or kept as this path).
    public struct Conflict: Sendable, Codable {
        public var kind: String
        public var path: String
        public var keptPath: String?
        public var details: String
        public var date: Date
    }

    /// The last time an access rule by program refused a program's access to the file.
    public struct AccessRefusal: Sendable, Codable {
        /// The program's name (its command name, else its executable's).
        public var program: String
        public var executable: String?
        public var unit: String?
        public var pid: Int32
        /// The rule in words (`deny program baloo_file (default, all domains)`).
        public var rule: String
        /// Refusals of this file so far.
        public var count: Int
        public var at: Date
    }

    public var domain: String
    /// The item's path, starting with `/`.
    public var path: String
    /// Whether the database knows the item (a new local file is not known until uploaded).
    public var known: Bool
    /// `file`, `folder` or `symlink`, when known or found in the replica.
    public var kind: String?
    /// `placeholder`, `materialized`, `folder` or `symlink` for a known item; `local` for an
    /// item only in the replica.
    public var state: String
    /// The content policy that applies to the item (`lazy`, `eager`, `evict-on-remote-update`,
    /// `online-only`), its own or inherited.
    public var policy: String
    /// Where the policy is set (the item itself or a folder above it), with `/`; `nil` for the
    /// default.
    public var policySetOn: String?
    /// Whether the item is pinned (its policy is `eager`), itself or through a folder.
    public var pinned: Bool
    /// The item whose `eager` policy keeps it downloaded (itself or a folder above), with `/`.
    public var pinnedBy: String?
    /// The store has newer contents than the downloaded file.
    public var outdated: Bool
    /// A local change not uploaded yet: `edited`, `created`, `deleted`, `overwrotePlaceholder`,
    /// `ignored` (a name that is never uploaded), or `excluded` (excluded from sync: the store
    /// cannot take it, see `ExcludedFromSync`).
    public var localChange: String?
    public var operations: [Operation]
    /// The item's last error (an upload or a download that failed).
    public var lastError: String?
    public var conflicts: [Conflict]
    /// Set when an access rule refused a program's access to the file.
    public var accessRefusal: AccessRefusal?
    /// Set when the domain is backing off.
    public var backoff: DomainBackoff?
    /// The above in sentences, most important first.
    public var reasons: [String]
}

extension ProviderManager {
    /// Explains an item's state from the database and the replica folder, offline (the store is
    /// not contacted).
    ///
    /// - Throws: `providerDomainNotFound` for an unknown domain; `noSuchItem` when neither the
    ///   database nor the replica has anything at the path; `localIOFailure` when the database
    ///   fails.
    public func explain(_ location: ItemLocation) throws(FileProviderError) -> ItemExplanation {
        let domain = try domain(named: location.domain)
        guard let domainID = domain.id else { throw FileProviderError(.providerDomainNotFound, "domain \(domain.name) has no id") }
        let path = location.path
        let display = TerminalText.quoted("\(domain.name):/\(path)")
        let replica = Replica(
            root: try replicaRoot(of: domain), staging: home.appendingPathComponent("staging/\(domainID)"),
            layout: ReplicaLayouts.layout(of: domain)
        ).noting(downloadsOf: domainID, in: store)
        let record = try store.item(domainID: domainID, path: path)
        let onDisk = replica.fingerprint(atPath: replica.path(path))
        let placeholderOnDisk = replica.placeholderExists(path)
        if record == nil && onDisk == nil {
            throw FileProviderError(
                .noSuchItem,
                "no item at \(display), neither in the database nor in the replica; run 'fileproviderctl sync \(domain.name)' to refresh")
        }

        var explanation = ItemExplanation(
            domain: domain.name, path: "/" + path, known: record != nil,
            kind: record?.kind.rawValue ?? (onDisk?.isDirectory == true ? "folder" : onDisk?.isSymlink == true ? "symlink" : "file"),
            state: record?.state.rawValue ?? "local", policy: ContentPolicy.lazy.rawValue, policySetOn: nil, pinned: false, pinnedBy: nil,
            outdated: record?.isOutdated ?? false,
            localChange: nil, operations: [], lastError: record?.lastError, conflicts: [],
            backoff: DomainBackoff(domain), reasons: [])
        var reasons: [String] = []

        // State and content policy.
        // Its own policy is in its row; the folders above it are read for what it inherits.
        let policy = try PolicyResolver.read(from: store, domainID: domainID, along: path).effective(path, own: record?.contentPolicy)
        explanation.policy = policy.policy.rawValue
        explanation.policySetOn = policy.setOn.map { "/" + $0 }
        if let record {
            if policy.policy == .eager {
                explanation.pinned = true
                explanation.pinnedBy = explanation.policySetOn
            }
            switch record.state {
            case .placeholder:
                let present =
                    replica.layout.keepsPartialContents
                    ? try store.presentRanges(domainID: domainID, identifier: record.identifier, contentVersion: record.contentVersion)
                        .reduce(Int64(0)) { $0 + ($1.upperBound - $1.lowerBound) } : 0
                reasons.append(
                    replica.layout.explainNotDownloaded(
                        present: present, size: record.size, display: display, replicaPath: domain.replicaPath))
            case .materialized:
                reasons.append("materialized: the contents are downloaded")
            case .folder:
                reasons.append(
                    record.isDataless
                        ? "dataless folder: its items are known but not in the replica yet; opening it under 'serve' or 'fileproviderctl populate \(display)' writes them"
                        : "folder")
            case .symlink:
                reasons.append("symlink: kept as a placeholder, never followed")
            }
            reasons.append(Self.describe(policy, domain: domain.name, isFolder: record.kind == .folder))
            if policy.policy == .eager && record.state == .placeholder {
                reasons.append("eager but not downloaded yet: the next sync downloads it")
            }
            if record.isOutdated {
                reasons.append(
                    policy.policy.evictsOnRemoteUpdate
                        ? "outdated: the store has newer contents; the next sync evicts it (its policy), unless it has local changes"
                        : "outdated: the store has newer contents; the next sync downloads them")
            }
        }

        // Local changes not uploaded yet.
        let name = String(path.split(separator: "/").last ?? "")
        let parentPath = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        var inDatalessFolder = false
        if !path.isEmpty, let parent = try store.item(domainID: domainID, path: parentPath) { inDatalessFolder = parent.isDataless }
        if inDatalessFolder {
            reasons.append(
                "in a dataless folder: not in the replica until \(TerminalText.quoted("\(domain.name):/\(parentPath)")) is populated")
        } else if let record {
            switch record.state {
            case .materialized:
                if let onDisk, onDisk.isRegularFile {
                    if onDisk.size != record.localSize || onDisk.modificationNanos != record.localModificationNanos
                        || onDisk.inode != record.localInode
                    {
                        if DownloadMark.recognize(record, onDisk, in: replica) != nil {
                            reasons.append(
                                "downloaded again, not recorded yet (another process, or one that was killed); the next sync records it")
                        } else {
                            explanation.localChange = "edited"
                            reasons.append("changed locally since it was downloaded; not uploaded yet (the next sync sends it)")
                        }
                    }
                } else if onDisk == nil {
                    explanation.localChange = "deleted"
                    reasons.append("deleted (or moved) locally; not sent to the store yet (the next sync sends it)")
                }
            case .placeholder, .symlink:
                if let onDisk, onDisk.isRegularFile, record.state == .placeholder,
                    replica.placeholderUnderItsName(path)?.isOwned(by: record.identifier) != true
                {
                    if DownloadMark.recognize(record, onDisk, in: replica) != nil {
                        reasons.append("downloaded, not recorded yet (another process, or one that was killed); the next sync records it")
                    } else if replica.writesAtAnItemsNameEditIt {
                        explanation.localChange = "edited"
                        reasons.append(
                            "replaced locally (emptied or renamed over by a program); not uploaded yet (the next sync sends it as an edit)")
                    } else {
                        explanation.localChange = "overwrotePlaceholder"
                        reasons.append(
                            "a file was written at its name without its contents being downloaded: the next sync keeps both (the store's version keeps the name, the file goes up as a conflicted copy)"
                        )
                    }
                } else if !placeholderOnDisk {
                    explanation.localChange = "deleted"
                    reasons.append("its placeholder was removed (or moved) locally; not sent to the store yet (the next sync sends it)")
                }
            case .folder:
                if onDisk?.isDirectory != true {
                    explanation.localChange = "deleted"
                    reasons.append("deleted (or moved) locally; not sent to the store yet (the next sync sends it)")
                }
            }
        } else if let onDisk {
            let ignore = IgnoreRules(extra: domain.ignoreList)
            if let pattern = ignore.patterns.first(where: { fnmatch($0, name, 0) == 0 }) {
                explanation.localChange = "ignored"
                reasons.append("only in the replica and never uploaded: its name matches the ignore pattern \(pattern.debugDescription)")
            } else if ignore.ignores(name, inFolder: parentPath) {
                explanation.localChange = "ignored"
                reasons.append(
                    "only in the replica and never uploaded: a lock file inside a .git folder (the ignore rule \(IgnoreRules.gitLocks.debugDescription))"
                )
            } else if !onDisk.isRegularFile && !onDisk.isDirectory {
                explanation.localChange = "ignored"
                reasons.append("only in the replica and never uploaded: only files and folders are uploaded")
            } else {
                explanation.localChange = "created"
                reasons.append(
                    "new in the replica; not uploaded yet (the next sync sends it; a file still being written waits until it stops changing)"
                )
            }
        }

        // Excluded from sync by the last sync: the store cannot take it.
        if let excluded = try store.excludedItems(domainID: domainID).first(where: { $0.path == path }) {
            explanation.localChange = "excluded"
            reasons.append("excluded from sync since \(Self.timestamp(excluded.since)): \(excluded.reason)")
        }

        // Journalled operations.
        var keys: Set<String> = ["create:\(path)"]
        if let record {
            for operation in ["modify", "move", "delete"] { keys.insert("\(operation):\(record.identifier.rawValue)") }
        }
        for entry in try store.unfinishedOperations(domainID: domainID) where keys.contains(entry.templateIdentifier) {
            let operation = ItemExplanation.Operation(
                operation: entry.operation, state: entry.state.rawValue, attempts: entry.attempts, lastError: entry.lastError,
                since: entry.createdAt)
            explanation.operations.append(operation)
            reasons.append(Self.describe(operation))
        }
        if let error = record?.lastError { reasons.append("last error: \(error)") }

        // Access rules by program.
        if let refusal = try store.accessRefusal(domainID: domainID, path: path) {
            explanation.accessRefusal = ItemExplanation.AccessRefusal(
                program: refusal.program, executable: refusal.executable, unit: refusal.unit, pid: refusal.pid, rule: refusal.rule,
                count: refusal.count, at: refusal.at)
            var who = "pid \(refusal.pid)"
            if let executable = refusal.executable { who += ", \(executable)" }
            if let unit = refusal.unit { who += ", unit \(unit)" }
            let times = refusal.count == 1 ? "" : " (\(refusal.count) refusals so far)"
            reasons.append(
                "access refused on \(Self.timestamp(refusal.at)) to \(refusal.program) (\(who)) by rule \(refusal.rule); nothing was fetched for it\(times); 'fileproviderctl rules' changes the rules"
            )
        }

        // Conflicts.
        for conflict in try store.conflicts(domainID: domainID) where conflict.path == path || conflict.keptPath == path {
            explanation.conflicts.append(
                ItemExplanation.Conflict(
                    kind: conflict.kind, path: "/" + conflict.path, keptPath: conflict.keptPath.map { "/" + $0 },
                    details: conflict.details, date: conflict.createdAt))
            var line = "conflict (\(conflict.kind)) on \(Self.timestamp(conflict.createdAt)): \(conflict.details)"
            if let kept = conflict.keptPath {
                line +=
                    kept == path
                    ? "; this is the kept copy of \(TerminalText.quoted("\(domain.name):/\(conflict.path)"))"
                    : "; the other version is \(TerminalText.quoted("\(domain.name):/\(kept)"))"
            }
            reasons.append(line)
        }

        // The domain.
        if let backoff = explanation.backoff {
            var line =
                "the domain is backing off until \(Self.timestamp(backoff.nextRetryAt)) after \(backoff.failureCount) failure\(backoff.failureCount == 1 ? "" : "s")"
            if let error = backoff.error { line += ": \(error)" }
            reasons.append(line)
        } else if !domain.isConnected {
            reasons.append("the domain is disconnected: it is not synced")
        }
        if reasons.count == 2 && explanation.localChange == nil && record != nil {
            reasons.append("in sync with the store as of the last sync (\(domain.lastSyncAt.map(Self.timestamp) ?? "never"))")
        }
        explanation.reasons = reasons
        return explanation
    }

    /// A content policy in words: what it means, where it is set and how to change it ("eager
    /// through photos:/2023: ..."). A folder's policy is that of the files below it.
    static func describe(_ policy: EffectivePolicy, domain: String, isFolder: Bool) -> String {
        let display = TerminalText.quoted("\(domain):/\(policy.path)")
        let source: String
        let change: String
        switch policy.setOn {
        case nil:
            source = " (the default)"
            change = "'fileproviderctl policy \(display) POLICY' sets one"
        case policy.path:
            source = " (set on this item)"
            change = "'fileproviderctl policy \(display) inherit' removes it"
        case let setOn?:
            source = " through \(TerminalText.quoted("\(domain):/\(setOn)"))"
            change = "'fileproviderctl policy \(display) POLICY' gives it its own"
        }
        let files = isFolder ? "the files below it are " : ""
        switch policy.policy {
        case .lazy:
            return "lazy\(source): \(files)downloaded when read, evictable; \(change)"
        case .eager:
            return "eager\(source): pinned: \(files)kept downloaded and never evicted; \(change)"
        case .evictOnRemoteUpdate:
            return
                "evict-on-remote-update\(source): \(files)downloaded when read; a change in the store evicts a downloaded file instead of downloading it again (unless it has local changes); \(change)"
        case .onlineOnly:
            return
                "online-only\(source): unpinned: \(files)evicted as soon as no program has them open and their changes are uploaded; \(change)"
        }
    }

    /// `2026-11-21 14:03:05` in local time.
    static func timestamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date)
    }
}
