import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

extension DownloadMark {
    /// Whether a file in a folder being populated is the download of `record`, and of which
    /// content version (`nil`: an older one): a recursive materialize downloads before it
    /// populates, and a process that died in between (or a `serve` populating meanwhile) finds
    /// the file unrecorded. Its ``DownloadMark`` says so; a file without one (a file system
    /// without extended attributes) counts when it has the item's size and exactly its date.
    /// Anything else is a local file in the way. Blocking.
    static func downloadedVersion(of record: ItemRecord, _ print: FileFingerprint, in replica: Replica) -> Data?? {
        if let download = DownloadMark.recognize(record, print, in: replica) {
            return .some(download.contentVersion)
        }
        // A dataless file has the item's size and date too, and nothing of its contents.
        if replica.placeholderUnderItsName(record.path) != nil { return nil }
        guard DownloadMark.read(atPath: replica.path(record.path)) == nil, record.kind == .file, print.isRegularFile,
            print.size == record.size,
            let date = record.modificationDate, abs(Double(print.modificationNanos) / 1e9 - date.timeIntervalSince1970) < 1e-6
        else { return nil }
        return .some(record.contentVersion)
    }
}
