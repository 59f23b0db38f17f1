import Foundation
import ProviderCore
import ProviderStore

/// Writes the in-sync status (``ReplicaStatus/downloaded`` or ``ReplicaStatus/pinned``) on the
/// files whose uploads a ``JournalBatch`` recorded, in the batch's write job right after its
/// commit (``JournalBatch/finish(_:saving:)``): the status never says a file is in the store
/// before the database knows it, and it costs no job of its own nor a read of the record the
/// batch just wrote.
///
/// The content policies of the folders above (which make a file `pinned`) are read once per
/// folder for the batch's life, a few hundred changes to the same folders (``SyncUp``'s
/// `markSent` read them and the record again for each file). A folder pinned while a batch
/// runs gets its files' statuses from the pin itself.
final class SentStatus: Sendable {
    private let store: MetadataStore
    private let replica: Replica
    private let domain: String
    private let domainID: Int64
    /// The policies along each folder asked so far, by folder path.
    private let policies = Mutex<[String: PolicyResolver]>([:])

    init(context: DomainContext) {
        store = context.store
        replica = context.replica
        domain = context.domain.name
        domainID = context.domainID
    }

    /// Writes the in-sync status on each of `records` that is a file downloaded here (the
    /// uploaded file is its downloaded copy), unless its file says it is a conflicted copy.
    /// Blocking.
    func write(_ records: [ItemRecord]) {
        for record in records where record.kind == .file && record.state == .materialized {
            let path = replica.path(record.path)
            let current = ReplicaStatus.read(atPath: path)
            guard current != .conflict else { continue }
            let status = ReplicaStatus.downloaded(policy: policies(along: RelativePath(record.path).parent)?.policy(of: record))
            status.write(atPath: path, domain: domain, replacing: current)
        }
    }

    /// The policies set on `folder` and the folders above it, read once; `nil` when the
    /// database fails (the file is then taken as `lazy`, as ``ReplicaStatus/downloaded(path:own:store:domainID:)`` does).
    private func policies(along folder: String) -> PolicyResolver? {
        if let known = policies.withLock({ $0[folder] }) { return known }
        guard let read = try? PolicyResolver.read(from: store, domainID: domainID, along: folder) else { return nil }
        policies.withLock { $0[folder] = read }
        return read
    }
}
