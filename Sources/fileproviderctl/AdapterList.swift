import ExternalAdapter
import LocalAdapter
import MediaAPIAdapter
import ProviderCore
import ProviderStore
import S3Adapter
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
        S3Backend.descriptor,
    ]

    static var registry: BackendRegistry { BackendRegistry(descriptors, resolver: ExternalBackends.resolver) }

    /// Describes the external backend of `kind`, if there is one, on a thread of its own: the
    /// registry's resolver then answers from its cache instead of starting the program on the
    /// calling (cooperative) thread.
    /// - Throws: what ``ExternalBackends/resolver`` throws.
    /// With `timeout`, a program is waited for that long at most for each answer (commands that
    /// only show domains pass ``ExternalBackends/showingTimeout``).
    static func describeExternal(_ kind: String, timeout: Double = 30) async throws(FileProviderError) {
        guard !descriptors.contains(where: { $0.kind == kind }) else { return }
        _ = try await onOwnThread { () throws(FileProviderError) in try ExternalBackends.resolve(kind, timeout: timeout) }
    }

    /// Describes the external backends of these domains, each once, on a thread of its own,
    /// before a command asks the engine whether it has them (``describeExternal(_:timeout:)``).
    /// A program that fails to describe itself is left for the command to report
    /// (``unavailableReason(_:)``).
    static func describeExternal(of domains: [DomainRecord], timeout: Double = 30) async {
        for kind in Set(domains.map(\.backendKind)) { try? await describeExternal(kind, timeout: timeout) }
    }

    /// Why the external backend of `kind` is not available (it did not answer, or failed to
    /// describe itself), when a command tried to describe it; else `nil`.
    static func unavailableReason(_ kind: String) -> String? {
        ExternalBackends.failure(of: kind)?.message
    }
}
