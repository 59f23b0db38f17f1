import ProviderCore
import ProviderStore

extension ProviderManager {
    /// Whether the store of `domain` keeps the executable bit
    /// (`BackendCapabilities.supportsFileSystemFlags`), so that a local `chmod` is a change to
    /// send: it then keeps a file from eviction until it is sent, and `pending` lists it.
    /// Answered without making a backend (which may contact the store or start a program): the
    /// backend of this process's controller of the domain when there is one, else what its kind
    /// declares (`BackendDescriptor.keepsFileSystemFlags`; the registered kinds only, no
    /// program is started), else `true`: a bit that is never sent keeps a file downloaded,
    /// which loses nothing, where the other answer would drop a bit the store would have kept.
    func keepsFileSystemFlags(_ domain: DomainRecord) -> Bool {
        if let controller = controllers.withLock({ $0[domain.name] }), controller.domainID == domain.id {
            return controller.backend.capabilities.supportsFileSystemFlags
        }
        return registry.descriptors[domain.backendKind]?.keepsFileSystemFlags ?? true
    }
}
