import Foundation
import ProviderCore
import ProviderStore

/// What a ``FolderReadAhead`` needs of the engine, and nothing more: the files of a folder it
/// may take, filling a batch of them in place, and a pass of eviction after. The engine's
/// ``OnAccessContents`` implements it over the facade for both on-access layouts (fanotify's
/// handler in ProviderService, whose `OnAccessResolving` refines this protocol, and the FUSE
/// layout's ``ReplicaFetcher``); tests implement it with a fake.
///
/// Domains are named by `domain` (name) and `domainID`; paths are relative to the replica
/// root. Any thread.
package protocol ReadAheadResolving: Sendable {
    /// The files a read-ahead may take in the folder of the file at `path`: its siblings small
    /// enough for a batch and not downloaded, in any order; and the bytes the cache budgets
    /// leave room for (`Int64.max` without one).
    /// - Throws: `localIOFailure` when the database cannot be read.
    func readAheadCandidates(domainID: Int64, path: String) async throws(FileProviderError) -> (files: [ItemRecord], room: Int64)

    /// Fills the dataless files of `records` of `domain` in place, in one batch; one result
    /// per record, in order. Never throws.
    func fill(batch records: [ItemRecord], domain: String) async -> [Result<ItemRecord, FileProviderError>]

    /// Asks automatic eviction for a pass soon (the replica grew).
    func requestEviction()
}

/// The engine's implementation, over its facade.
extension OnAccessContents: ReadAheadResolving {}
