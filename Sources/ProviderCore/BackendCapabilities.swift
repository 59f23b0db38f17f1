/// What a backend can do. Optional abilities are data, not methods that throw.
public struct BackendCapabilities: Hashable, Sendable, Codable {
    /// `currentSyncAnchor` and `enumerateChanges` work; otherwise the engine compares listings.
    public var hasChangeFeed: Bool
    /// `fetchThumbnail` works.
    public var supportsThumbnails: Bool
    /// `fetchPartialContents` reads a range of a file, and `fetchContents` honours `offset`
    /// (resumable downloads).
    public var supportsRangedReads: Bool
    /// `modifyItem` can rename and move without copying the contents.
    public var supportsServerSideMove: Bool
    /// Writes check the base version atomically in the store (a conditional write); otherwise the
    /// check happens just before the write and a race with another writer is possible.
    public var supportsConditionalWrites: Bool
    /// The store can hold symlinks (and lists them as symlinks). A store whose `creatableKinds`
    /// has `.symlink` must say so (checked by the conformance suite).
    public var supportsSymlinks: Bool
    /// The item kinds the store can create.
    public var creatableKinds: Set<ItemKind>
    /// The hash algorithm of `Item.contentHash` (for example `sha256`), or `nil`.
    public var contentHashAlgorithm: String?
    /// The largest file the store accepts, in bytes, or `nil` for no limit.
    public var maximumUploadSize: Int64?
    /// Identifiers are derived from paths: a rename or move gives a new identifier.
    public var identifiersArePathDerived: Bool
    /// Some files in the store are not listed (for example a store that lists images only).
    /// The conformance suite then needs `BackendConformance.Limitations.fileNameSuffix`, a
    /// suffix the store lists.
    public var listsOnlySomeFiles: Bool

    public init(
        hasChangeFeed: Bool = false,
        supportsThumbnails: Bool = false,
        supportsRangedReads: Bool = false,
        supportsServerSideMove: Bool = false,
        supportsConditionalWrites: Bool = false,
        supportsSymlinks: Bool = false,
        creatableKinds: Set<ItemKind> = [.file, .folder],
        contentHashAlgorithm: String? = nil,
        maximumUploadSize: Int64? = nil,
        identifiersArePathDerived: Bool = true,
        listsOnlySomeFiles: Bool = false
    ) {
        self.hasChangeFeed = hasChangeFeed
        self.supportsThumbnails = supportsThumbnails
        self.supportsRangedReads = supportsRangedReads
        self.supportsServerSideMove = supportsServerSideMove
        self.supportsConditionalWrites = supportsConditionalWrites
        self.supportsSymlinks = supportsSymlinks
        self.creatableKinds = creatableKinds
        self.contentHashAlgorithm = contentHashAlgorithm
        self.maximumUploadSize = maximumUploadSize
        self.identifiersArePathDerived = identifiersArePathDerived
        self.listsOnlySomeFiles = listsOnlySomeFiles
    }
}
