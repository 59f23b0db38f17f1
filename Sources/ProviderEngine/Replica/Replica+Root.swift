import Foundation
import ProviderCore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

extension Replica {
    /// The extended attribute that names the domain whose replica a folder is.
    static let rootAttribute = "user.fileprovider.replica"

    /// Marks the root folder as the replica of `domain`, where the file system keeps extended
    /// attributes. Blocking.
    public func markRoot(domain: String) {
        PoolCheck.note()
        let value = Array(domain.utf8)
        ExtendedAttribute.set(Self.rootAttribute, to: value, atPath: root.path)
    }

    /// Checks that the replica folder is there and is `domain`'s before a scan compares it with
    /// the database: a scan of a folder that is gone, or of an empty mount point whose disk is
    /// not mounted, would find every item missing and send the store a deletion of everything.
    ///
    /// A root marked as this domain's replica passes (an empty one too: its items were deleted
    /// on purpose). An unmarked root is marked and passes when it holds something (a replica
    /// made before marks) or when the database knows no items yet (`knowsItems` false); an
    /// unmarked empty root of a domain with items does not. Where the file system keeps no
    /// extended attributes, only a missing root fails. Blocking.
    /// - Throws: `providerDomainTemporarilyUnavailable` (the domain backs off and is tried
    ///   again later) saying what is wrong and what to do, when the root is missing, not a
    ///   folder, empty and unmarked, or marked as another domain's replica.
    public func checkRoot(domain: String, knowsItems: Bool) throws(FileProviderError) {
        PoolCheck.note()
        let nothingSent = "nothing was sent to the store, so nothing there is deleted"
        let startOver =
            "to start this replica again from the store, 'fileproviderctl domain remove \(domain) --keep-replica' and add the domain again"
        guard let print = fingerprint(atPath: root.path), print.isDirectory else {
            throw FileProviderError(
                .providerDomainTemporarilyUnavailable,
                "the replica folder \(root.path) is missing (a disk not mounted, a folder moved?); \(nothingSent). Put it back and sync again, or \(startOver)"
            )
        }
        var buffer = [UInt8](repeating: 0, count: 256)
        let length = ExtendedAttribute.get(Self.rootAttribute, atPath: root.path, into: &buffer)
        let failure = errno
        if length >= 0 {
            let owner = String(decoding: buffer[..<length], as: UTF8.self)
            if owner == domain { return }
            throw FileProviderError(
                .providerDomainTemporarilyUnavailable,
                "the folder \(root.path) is the replica of domain '\(owner)', not of '\(domain)'; \(nothingSent)")
        }
        let supported = failure == ENODATA
        if !supported || !knowsItems || holdsSomething() {
            if supported { markRoot(domain: domain) }
            return
        }
        throw FileProviderError(
            .providerDomainTemporarilyUnavailable,
            "the replica folder \(root.path) is empty and was not made by this domain (a disk not mounted there, the folder made anew?); \(nothingSent). Mount or put back the replica and sync again, or \(startOver)"
        )
    }

    /// Whether the root holds anything but the engine's own staging folder.
    private func holdsSomething() -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root.path) else { return false }
        return names.contains { path($0) != staging.path }
    }
}
