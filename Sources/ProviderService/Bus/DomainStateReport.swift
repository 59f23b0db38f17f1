import Foundation

/// One served domain as `ListDomains` gives it.
public struct DomainStateReport: Sendable, Codable, Hashable {
    public var name: String
    /// The backend's kind (`local`, `sftp`, ...).
    public var backend: String
    /// The replica mode (`placeholder-files`, `dataless`).
    public var mode: String
    /// Where programs see the domain's files.
    public var replica: String
    /// ``DomainSyncState``'s raw value.
    public var state: String
    /// Why the state is `paused`, `offline` or `error`.
    public var detail: String?
    public var lastSyncAt: Date?
}
