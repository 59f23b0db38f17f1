import Foundation
import ProviderCore
import ProviderSystem

/// Writes ``ReplicaStatus/unsent`` on the files a scan found changed, new or still being
/// written (every program sees that they are not in the store yet), unless what the file is
/// *now* says otherwise.
///
/// The scan's findings are older than the files: between the scan's look and this write, the
/// engine may have finished filling a file a program opened (fanotify's fill on open, FUSE's
/// fetch). A scan that saw the fill half done takes it for a file still being written. Writing
/// an attribute moves the file's change time, and `tar` compares the change time after its
/// open with the one after reading ("file changed as we read it", exit 1). So a file is left
/// alone when it is:
/// - still marked dataless: the engine is filling it (its writes are no edit);
/// - the engine's download, unchanged since it was placed (the database's note of it,
///   ``DownloadNotes``, or its ``DownloadMark`` describes it as it stands; any edit breaks
///   that);
/// - a conflicted copy, which keeps saying so until it is replaced.
enum UnsentStatus {
    /// Writes `unsent` on each of `paths` (relative to `replica`) that is a regular file and
    /// none of the above. Blocking.
    static func write(on paths: [String], in replica: Replica, domain: String) {
        for path in paths {
            let target = replica.path(path)
            // A new file (the many files of a first upload) carries none of the engine's
            // attributes: one list of its attributes' names says so, instead of five reads. This
            // runs before the first upload starts.
            if !ExtendedAttribute.hasAny(withPrefix: ReplicaStatus.attributePrefix, atPath: target) {
                guard let print = replica.fingerprint(atPath: target), print.isRegularFile else { continue }
                ReplicaStatus.unsent.stamp(atPath: target, domain: domain)
                continue
            }
            // The dataless mark before the fingerprint: a completion clears the mark last, after
            // dating the file and noting the download, so a file found unmarked here is done, and
            // its fingerprint taken now matches the note. Taken first, the
            // fingerprint of a file half completed (not dated yet) did not match it, and the
            // finished download got `unsent` while tar read it.
            guard Replica.datalessOwner(atPath: target) == nil,
                let print = replica.fingerprint(atPath: target), print.isRegularFile,
                !DownloadMark.isUnchangedDownload(path, print, in: replica),
                ReplicaStatus.read(atPath: target) != .conflict
            else { continue }
            ReplicaStatus.unsent.write(atPath: target, domain: domain)
        }
    }
}
