import Foundation

/// Where a sync's time went, in seconds.
public struct SyncPhases: Codable, Sendable {
    public var listing = 0.0
    public var replica = 0.0
    public var database = 0.0
    public var downloads = 0.0
    public var upload = 0.0
    public init() {}
}
