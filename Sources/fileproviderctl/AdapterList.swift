import ExternalAdapter
import LocalAdapter
import MediaAPIAdapter
import ProviderCore
import SFTPAdapter
import WebDAVAdapter

/// The one list of built-in adapters. A new backend adds its descriptor here. Kinds not in it
/// are looked for as external backend programs (`fileprovider-backend-NAME`, see
/// ``ExternalBackends``).
enum AdapterList {
    static let descriptors: [BackendDescriptor] = [
        LocalBackend.descriptor,
        SFTPBackend.descriptor,
        MediaBackend.descriptor,
        WebDAVBackend.descriptor,
    ]

    static var registry: BackendRegistry { BackendRegistry(descriptors, resolver: ExternalBackends.resolver) }
}
