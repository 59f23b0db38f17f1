import LocalAdapter
import MediaAPIAdapter
import ProviderCore
import SFTPAdapter

/// The one list of built-in adapters. A new backend adds its descriptor here.
enum AdapterList {
    static let descriptors: [BackendDescriptor] = [
        LocalBackend.descriptor,
        SFTPBackend.descriptor,
        MediaBackend.descriptor,
    ]

    static var registry: BackendRegistry { BackendRegistry(descriptors) }
}
