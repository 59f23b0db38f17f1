import Foundation
import ProviderCore
import ProviderStore
import ProviderSystem

extension ProviderManager {
    /// The replica of a domain as the engine works on it: where it reads and writes the files
    /// (the replica folder, or a dataless domain's backing folder, never the replica path that
    /// `serve` marks with fanotify), its staging folder (made here: in the state folder, private
    /// as the state folder is, when both are on one device; else `.fileprovider-staging` in the
    /// replica, so a download is placed by a rename) and its layout.
    /// - Throws: `localIOFailure` when the staging folder cannot be made; what
    ///   ``replicaRoot(of:)`` throws.
    func openReplica(of domain: DomainRecord, id: Int64) throws(FileProviderError) -> Replica {
        let replicaRoot = try replicaRoot(of: domain)
        var staging = home.appendingPathComponent("staging/\(id)")
        let inHome = Self.sameDevice(home.path, replicaRoot.path)
        if !inHome {
            staging = replicaRoot.appendingPathComponent(".fileprovider-staging")
        }
        do {
            if inHome {
                try PrivateFolder.make(atPath: staging.path)
            } else {
                try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            }
        } catch {
            throw FileProviderError(
                .localIOFailure, "cannot create the staging folder \(staging.path): \(FileProviderError.wrap(error).message)")
        }
        return Replica(root: replicaRoot, staging: staging, layout: ReplicaLayouts.layout(of: domain))
    }

    private static func sameDevice(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(a, &first) == 0, stat(b, &second) == 0 else { return false }
        return first.st_dev == second.st_dev
    }
}
