import Foundation
import ProviderCore
import ProviderStore

/// Placing a finished download: its staging file checked, dated and stamped (``Downloader/stage(_:_:staging:folders:sha256:policies:)``),
/// noted in the database (``Downloader/note(_:)``), renamed into place (``Downloader/settle(_:placeholderAbsent:folders:)``).
extension Downloader {
    /// `record` as a complete download of `item` leaves it: the store's metadata at the
    /// record's path, materialized at the item's content version with the file's fingerprint
    /// `print` and the download's SHA-256, no last error.
    static func downloaded(_ record: ItemRecord, as item: Item, fingerprint print: FileFingerprint, sha256: String?) -> ItemRecord {
        var updated = record
        updated.update(from: item, path: record.path)
        updated.markMaterialized(contentVersion: item.version.content, fingerprint: print)
        updated.recordSHA256(sha256, of: item.version.content)
        updated.lastError = nil
        return updated
    }

    /// A finished download checked, dated and stamped in its staging file (``stage(_:_:staging:folders:sha256:policies:)``),
    /// to be noted (``note(_:)``) and renamed into place (``settle(_:placeholderAbsent:folders:)``).
    /// A class: a batch's files pass through arrays and tuples, and a struct of two records and
    /// an item was copied, with a retain and a release of each of their strings, at each step.
    final class StagedDownload {
        let stored: ItemRecord
        let item: Item
        let staging: String
        let file: StagedFile
        /// The staging file's fingerprint, which the rename keeps: the placed file's.
        let fingerprint: FileFingerprint
        /// The record to write once the file is in place.
        let updated: ItemRecord

        /// What ``note(_:)`` takes of it.
        var noted: (file: StagedFile, item: Item, print: FileFingerprint) { (file, item, fingerprint) }

        init(stored: ItemRecord, item: Item, staging: String, file: StagedFile, fingerprint: FileFingerprint, updated: ItemRecord) {
            self.stored = stored
            self.item = item
            self.staging = staging
            self.file = file
            self.fingerprint = fingerprint
            self.updated = updated
        }
    }

    /// Places a complete download of `stored`'s item (`item`, as the store sent it) from
    /// `staging` into the replica: checked for size, dated, noted as the engine's download
    /// (``DownloadNotes``, or a ``DownloadMark`` where the replica has no notes or the database
    /// cannot be written), renamed to the item's name over its placeholder or an earlier
    /// download of it. Returns the record to write. Whatever fails, the staging file does not
    /// stay behind. Blocking.
    ///
    /// `placeholderAbsent`: the caller knows that no `.placeholder` file stands beside the name
    /// (see ``download(_:events:placeholderFree:)``), so none is removed after the rename.
    /// `folders`: the placing job's open staging folders, through which the staging file is
    /// dated, read and renamed by name (`nil`: by its path). `sha256`: the SHA-256 of the bytes
    /// as the backend wrote them (``ContentSink``), recorded with the item. `policies`: the
    /// batch's memo of the policies its files inherit (`nil`: read for this file).
    /// - Throws: `corruptData` when the file is not the size the store announced, or its bytes
    ///   not the ones of the content hash it sent; `unsyncedEdits` when the materialized file has local changes, `cannotSynchronize` when
    ///   a local file is in the way (nothing is replaced then); `localIOFailure`.
    func place(
        _ stored: ItemRecord, _ item: Item, staging: String, placeholderAbsent: Bool = false, folders: StagingFolders? = nil,
        sha256 streamed: String? = nil, policies: InheritedPolicies? = nil
    ) throws(FileProviderError) -> ItemRecord {
        let staged = try stage(stored, item, staging: staging, folders: folders, sha256: streamed, policies: policies)
        note([staged.noted])
        return try settle(staged, placeholderAbsent: placeholderAbsent, folders: folders)
    }

    /// The first half of ``place(_:_:staging:placeholderAbsent:folders:sha256:policies:)``:
    /// the staging file dated, given the store's executable bit, checked (size, content hash)
    /// and stamped with its status. On a failure the staging file is removed. Blocking.
    /// - Throws: as ``place(_:_:staging:placeholderAbsent:folders:sha256:policies:)``.
    func stage(
        _ stored: ItemRecord, _ item: Item, staging: String, folders: StagingFolders?, sha256 streamed: String?,
        policies: InheritedPolicies?
    ) throws(FileProviderError) -> StagedDownload {
        let path = stored.path
        let expected = item.size
        var staged = false
        defer { if !staged { try? replica.removeFile(atPath: staging) } }
        let file = folders?.file(atPath: staging) ?? StagedFile(path: staging)
        if let date = item.contentModificationDate { try replica.setModificationDate(date, of: file) }
        // Dated first, so one look gives the size to check and the fingerprint. A rename keeps
        // size, date and inode: this is the placed file's fingerprint too.
        guard var print = replica.fingerprint(of: file) else {
            throw FileProviderError(.localIOFailure, "\(staging) vanished right after it was written")
        }
        // The store's executable bit, before the file has its name (a chmod keeps the fingerprint).
        if item.kind == .file, item.fileSystemFlags.contains(.userExecutable) != print.isExecutable {
            try replica.applyFlags(item.fileSystemFlags, toPath: staging, current: print.permissions)
            print.permissions = item.fileSystemFlags.applied(toMode: print.permissions)
        }
        guard print.isRegularFile, print.size == expected else {
            throw FileProviderError(
                .corruptData, "the download of \(display(path)) was \(print.size) bytes, expected \(expected); try again")
        }
        let sha256 = try checkHash(of: item, staged: staging, path: path, streamed: streamed)
        if item.kind == .file {
            let status =
                policies.map { ReplicaStatus.downloaded(policy: $0.policy(ofFileAt: path, own: stored.contentPolicy)) }
                ?? ReplicaStatus.downloaded(path: path, own: stored.contentPolicy, store: store, domainID: domainID)
            status.stamp(file, domain: domainName)
        }
        staged = true
        return StagedDownload(
            stored: stored, item: item, staging: staging, file: file, fingerprint: print,
            updated: Self.downloaded(stored, as: item, fingerprint: print, sha256: sha256))
    }

    /// Notes finished downloads as the engine's (`file`: the staging file, or the file filled
    /// in place; `item` as the store sent it; `print` the dated file's fingerprint), before a
    /// staging file gets its name or a filled file loses its dataless mark: whoever finds one
    /// before it is recorded (a sync in another process, the next run after a kill) knows it is
    /// a download, not a local edit. One transaction for all of them (``DownloadNotes``); where
    /// the replica has no notes, or the database cannot be written, each file gets its
    /// ``DownloadMark`` instead. Blocking.
    func note(_ files: [(file: StagedFile, item: Item, print: FileFingerprint)]) {
        if files.isEmpty { return }
        let downloads = files.map {
            PlacedDownload(identifier: $0.item.identifier, contentVersion: $0.item.version.content, fingerprint: $0.print)
        }
        if let notes = replica.downloadNotes, (try? notes.note(downloads)) != nil { return }
        // After the status: with the mark first, ext4 built the status in an attribute block
        // shared with other files and copied it for the domain's name, freeing a block (and
        // waiting for its discard where the disk is mounted with `discard`): 59 against 18 µs
        // per file here.
        for file in files {
            DownloadMark.write(
                to: file.file, identifier: file.item.identifier, contentVersion: file.item.version.content, fingerprint: file.print)
        }
    }

    /// The second half of ``place(_:_:staging:placeholderAbsent:folders:sha256:policies:)``:
    /// the noted staging file renamed into place. Returns the record to write. On a failure
    /// the staging file is removed, and its note forgotten. Blocking.
    /// - Throws: as ``place(_:_:staging:placeholderAbsent:folders:sha256:policies:)``.
    func settle(_ download: StagedDownload, placeholderAbsent: Bool, folders: StagingFolders?) throws(FileProviderError) -> ItemRecord {
        let stored = download.stored
        let (staging, file, staged) = (download.staging, download.file, download.fingerprint)
        let path = stored.path
        let expected = download.item.size
        var placed = false
        defer {
            if !placed {
                try? replica.removeFile(atPath: staging)
                replica.downloadNotes?.forget(download.item.identifier, inode: staged.inode)
            }
        }
        let target = replica.path(path)
        // The usual case first: nothing at the name (its `.placeholder` file stands beside
        // it, unless the caller knows there is none). The rename refuses to replace anything;
        // when it fails, the checks below look at whatever is there.
        if !replica.layout.placeholderTakesItemsName,
            (try? replica.move(file, toPath: target, into: folders?.place(atPath: target))) != nil
        {
            placed = true
            if !placeholderAbsent { try replica.removeFile(atPath: replica.placeholderPath(path)) }
            return download.updated
        }
        if let existing = replica.fingerprint(atPath: target), replica.placeholderUnderItsName(path) == nil {
            let ours = stored.state == .materialized && !replica.hasLocalChanges(stored, existing)
            // A download renamed into place by a process that died before recording it: its
            // note or mark says so; without either, the same size and exactly the date this
            // download just gave its staging file.
            let sameAsDownload =
                DownloadMark.recognize(stored, existing, in: replica) != nil
                || (existing.isRegularFile && existing.size == expected && download.item.contentModificationDate != nil
                    && staged.modificationNanos == existing.modificationNanos)
            guard ours || sameAsDownload else {
                if stored.state == .materialized {
                    throw FileProviderError(
                        .unsyncedEdits,
                        "\(target) has local changes, so the store's newer version was not downloaded over it; nothing was lost")
                }
                throw FileProviderError(
                    .cannotSynchronize, "a local file is in the way at \(target); move it elsewhere and materialize again")
            }
            try replica.replace(fromPath: staging, toPath: target)
            placed = true
            // Over an earlier download its placeholder may still stand beside.
            try replica.removePlaceholder(path)
        } else {
            // Nothing there but the item's placeholder (in the dataless layout, the dataless
            // file at the name: replaced in one rename), which goes.
            try replica.placeFile(fromPath: staging, at: path)
            placed = true
        }
        return download.updated
    }
}
