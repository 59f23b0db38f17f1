import Foundation
import ProviderCore
import ProviderStore

/// The space one fill in place of a dataless file holds while it runs
/// (``Downloader/fillInPlace(_:)``): promised under the name a staged fill of the item
/// downloads to (``Downloader/batchStagingPath(_:_:)``), whether the bytes go there or straight
/// into the item's own file, so that other downloads count it. Given back with ``release()``
/// when the fill ends, whatever the outcome.
struct FillSpace: Sendable {
    /// The item's dataless file, being filled.
    let target: String
    /// The staging file the space is promised for (nothing may be created there).
    let promised: String
    /// The item's size, as the record says: what is promised.
    let size: Int64
    /// The staging folder, on the file system measured.
    private let folder: String
    private let ticket: SpaceReservations.Ticket
    private let space: SpaceReservations

    /// Promises the space of filling `record`'s dataless file in `replica`, then runs
    /// `prepare` (which marks the file as being filled, or makes the staging file); a failure
    /// of `prepare` gives the space back. Blocking.
    /// - Throws: `fileWriteOutOfSpace` when the file does not fit beside the reserve (nothing
    ///   is promised then); what `prepare` throws.
    static func reserve(
        for record: ItemRecord, in replica: Replica, space: SpaceReservations,
        prepare: (FillSpace) throws(FileProviderError) -> Void
    ) throws(FileProviderError) -> FillSpace {
        let promised = Downloader.batchStagingPath(replica, record)
        let folder = replica.staging.path
        let ticket = try space.reserve(size: record.size, stagingFile: promised, folder: folder, canResume: false)
        let fill = FillSpace(
            target: replica.path(record.path), promised: promised, size: record.size, folder: folder, ticket: ticket, space: space)
        do throws(FileProviderError) {
            try prepare(fill)
        } catch {
            fill.release()
            throw error
        }
        return fill
    }

    /// Gives the promised space back.
    func release() { space.release(ticket) }

    /// The error to report for a fetch that failed with `error`: `fileWriteOutOfSpace` saying
    /// how much is needed when the disk is full (the staging file is deleted: a fill never
    /// resumes), else `error`. Blocking.
    func reported(_ error: FileProviderError) -> FileProviderError {
        space.outOfSpace(error, size: size, stagingFile: promised, folder: folder, ticket: ticket, canResume: false)?.error ?? error
    }
}
