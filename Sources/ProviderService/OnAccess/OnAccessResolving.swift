import Foundation
import ProviderCore
import ProviderEngine
import ProviderStore

/// What the on-access path needs of the engine, and nothing more: find the item a file is,
/// fill its contents (whole, a range; a batch of a folder's small files through the engine's
/// read-ahead, whose part `ReadAheadResolving` this refines), and record what happened.
/// ``OnAccessRequests`` decides through it; the engine's `OnAccessContents` implements it over
/// the facade (a domain's downloads, the database, the use recorder), and
/// tests implement it with a fake, so the decisions are tested without root or fanotify.
///
/// Domains are named by `domain` (name) and `domainID` as ``OnAccessRequests/Served`` has
/// them; paths are relative to the replica root. Any thread.
package protocol OnAccessResolving: ReadAheadResolving {
    // MARK: Items

    /// The item the database records at `path` of the domain, or `nil`.
    /// - Throws: `localIOFailure` when the database cannot be read.
    func item(domainID: Int64, path: String) async throws(FileProviderError) -> ItemRecord?

    // MARK: Contents

    /// Fills the dataless file of `record` of `domain` whole, where it stands, and records it
    /// as downloaded. Requests for one item share one download.
    /// - Throws: `providerDomainNotFound` for an unknown domain; what the download throws
    ///   (`serverUnreachable`, `noSuchItem`, `fileWriteOutOfSpace`, ...).
    func fill(_ record: ItemRecord, domain: String) async throws(FileProviderError)

    /// Makes bytes `range` of the partially present file `file` of `record` present
    /// (progressive hydration; `changeTime` is the file's change time now). Returns `true` when
    /// the file is complete now.
    /// - Throws: `notSupported` when the store has no ranged reads; as ``fill(_:domain:)``.
    func fetch(_ record: ItemRecord, domain: String, file: ProgressiveHydrator.FileKey, changeTime: Int64, range: Range<Int64>)
        async throws(FileProviderError) -> Bool

    /// Completes a partially present file a program wrote into: fetches the rest around what
    /// the program wrote and records it as a local edit.
    /// - Throws: as ``fetch(_:domain:file:changeTime:range:)``.
    func complete(written record: ItemRecord, domain: String, file: ProgressiveHydrator.FileKey, changeTime: Int64)
        async throws(FileProviderError)

    /// Whether bytes `range` of the partially present `file` are known present (no system
    /// call; the event thread asks it first).
    func isPresent(_ file: ProgressiveHydrator.FileKey, range: Range<Int64>, changeTime: Int64) -> Bool

    /// Whether bytes of the file at `path` of `domain` are being fetched now (its writes are
    /// the engine's).
    func isFetching(domain: String, path: String) -> Bool

    /// A program opened `file`: what is known present is checked again at its next access.
    func opened(_ file: ProgressiveHydrator.FileKey)

    // MARK: Records

    /// Remembers that a program used the file at `path` (least-recently-used eviction).
    func used(domainID: Int64, path: String)

    /// Records why fetching the item at `path` failed, as its last error (`why`).
    func recordFailure(_ message: String, domainID: Int64, path: String) async

    /// Writes down the uses remembered so far (when serve stops).
    func flushUses() async
}

/// The engine's implementation, over its facade.
extension OnAccessContents: OnAccessResolving {}
