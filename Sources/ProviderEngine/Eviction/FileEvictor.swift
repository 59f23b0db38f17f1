import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Evicts one file of one domain for automatic eviction, with every check made at that moment:
/// the item is still what the candidate said, its effective content policy allows it (read
/// afresh: a `pin` a second ago counts), the file has no local changes, and no program has it
/// open (``ExclusiveFile``, held until the file is swapped), and, where the store keeps the
/// executable bit, no local `chmod` waits to be sent (the placeholder, or the new dataless
/// file, would get the store's mode back). Blocking: run it on the engine's executor.
///
/// - A materialized file becomes its placeholder as `evict` does it (``Replica/replaceWithPlaceholder(_:_:)``:
///   a `.placeholder` file, or in a dataless domain a new dataless file renamed over it, which
///   carries none of `serve`'s marks that let reads through), then the database records it.
/// - A partly present file (dataless, progressive hydration) loses its present ranges in the
///   database first, then its blocks (punched out where it stands, the leading block written
///   again): a crash in between leaves bytes the database does not count, never a range the
///   database counts that holds zeros.
struct FileEvictor: Sendable {
    let domainID: Int64
    let domainName: String
    let replica: Replica
    let store: MetadataStore
    let method: ExclusiveFile.Method
    /// The store keeps the executable bit (`BackendCapabilities.supportsFileSystemFlags`): a
    /// downloaded file whose x bit differs from its record's has a change not sent yet.
    let keepsFlags: Bool

    /// What happened to one candidate.
    enum Outcome: Sendable, Hashable {
        /// Evicted; the bytes given back.
        case evicted(Int64)
        /// Left, for a reason to show (pinned, open, local changes).
        case kept(String)
        /// No longer a candidate (evicted, deleted, moved or completed meanwhile).
        case gone
    }

    /// Evicts `candidate` for `reason`.
    /// - Throws: `localIOFailure` (or the code of `errno`) when the file or the database fails
    ///   half-way; the file is then either untouched or evicted.
    func evict(_ candidate: EvictionCandidate, for reason: EvictionReason) throws(FileProviderError) -> Outcome {
        guard let record = try store.item(domainID: domainID, identifier: candidate.identifier), record.kind == .file,
            record.path == candidate.path
        else { return .gone }
        // Its own policy from its row, the folders above it read afresh.
        let resolved = try PolicyResolver.read(from: store, domainID: domainID, along: record.path).resolve(record)
        if reason.isPressure {
            if !resolved.policy.isEvictable {
                return .kept("pinned (\(resolved.policy.rawValue), set on /\(resolved.setOn ?? ""))")
            }
        } else if resolved.policy != .onlineOnly {
            return .gone
        }
        if candidate.isPartial {
            guard record.state == .placeholder, replica.layout.keepsPartialContents else { return .gone }
            return try evictPartial(record)
        }
        guard record.state == .materialized else { return .gone }
        return try evictMaterialized(record, bytes: candidate.bytes)
    }

    /// Evicts a partly present file that `evict` names (the caller checked its policy): its
    /// ranges forgotten, its blocks punched out, while no program has it open.
    /// - Throws: as ``evict(_:for:)``.
    func evictPartial(named record: ItemRecord) throws(FileProviderError) -> Outcome {
        guard record.state == .placeholder, replica.layout.keepsPartialContents else { return .gone }
        return try evictPartial(record)
    }

    private func evictMaterialized(_ record: ItemRecord, bytes: Int64) throws(FileProviderError) -> Outcome {
        let path = replica.path(record.path)
        guard let print = replica.fingerprint(atPath: path), print.isRegularFile else { return .gone }
        // Evicted by another process and not recorded yet.
        if replica.placeholderUnderItsName(record.path) != nil { return .gone }
        if replica.hasLocalChanges(record, print) { return .kept("has local changes that are not uploaded") }
        if keepsFlags && print.isExecutable != record.isExecutable {
            return .kept("has a local change of its executable bit that is not sent yet")
        }
        switch try ExclusiveFile.open(path, writable: false, method: method) {
        case .missing:
            return .gone
        case .inUse(let why):
            return .kept(why)
        case .held(let file):
            defer { file.release() }
            guard let status = file.status(), Replica.inode(status) == print.inode, Int64(status.st_size) == print.size,
                Replica.nanoseconds(status.st_mtim) == print.modificationNanos,
                !keepsFlags || (status.st_mode & 0o100 != 0) == record.isExecutable
            else { return .kept("changed while it was being evicted") }
            var updated = record
            updated.markPlaceholder()
            try replica.replaceWithPlaceholder(record.path, PlaceholderMetadata(domain: domainName, record: updated))
            file.release()
            try store.apply(domainID: domainID, upserts: [updated], deletions: [])
            try store.removePresentRanges(domainID: domainID, identifier: record.identifier)
            return .evicted(max(0, bytes))
        }
    }

    private func evictPartial(_ record: ItemRecord) throws(FileProviderError) -> Outcome {
        let path = replica.path(record.path)
        switch try ExclusiveFile.open(path, writable: true, method: method) {
        case .missing:
            return .gone
        case .inUse(let why):
            return .kept(why)
        case .held(let file):
            defer { file.release() }
            guard let state = Replica.datalessState(ofDescriptor: file.fd), state.key == PlaceholderOwner.key(record.identifier.rawValue)
            else { return .gone }
            if state.filling { return .kept("being downloaded") }
            let present = try store.presentBytes(domainID: domainID, identifier: record.identifier) ?? 0
            // The database first: from here on, a read fetches again whatever the file holds.
            try store.removePresentRanges(domainID: domainID, identifier: record.identifier)
            let size = Int64(file.status()?.st_size ?? 0)
            try Replica.punchContents(file.fd, size: size, path: path)
            return .evicted(max(0, present))
        }
    }
}
