/// What a backend can do. Optional abilities are data, not methods that throw.
public struct BackendCapabilities: Hashable, Sendable, Codable {
    /// `currentSyncAnchor` and `enumerateChanges` work; otherwise the engine compares listings.
    public var hasChangeFeed: Bool
    /// The change feed's anchors stay valid in a later process: the store keeps the feed
    /// (a server's change log), not this process. When false (the local store's feed is its
    /// process's inotify watches), a sync that says no later sync of this process follows the
    /// feed (the CLI's one-shot `sync`) does not ask for an anchor, and the feed never starts.
    public var anchorsOutliveProcess: Bool
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
    /// `fetchContents` (one file or a batch) creates a destination that does not exist yet
    /// when it starts at offset 0, so the engine does not create each staging file first (one
    /// `open` and `close` per file less; it still makes their folder). Checked by the
    /// conformance suite.
    public var createsFetchDestinations: Bool
    /// `modifyItem` applies `.fileSystemFlags` (at least ``FileSystemFlags/userExecutable``:
    /// the store keeps an executable bit), so the engine sends a local `chmod +x`/`chmod -x`
    /// of a file in the replica up as a metadata change. When false it is kept locally only.
    public var supportsFileSystemFlags: Bool

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
        listsOnlySomeFiles: Bool = false,
        anchorsOutliveProcess: Bool = true,
        createsFetchDestinations: Bool = false,
        supportsFileSystemFlags: Bool = false
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
        self.anchorsOutliveProcess = anchorsOutliveProcess
        self.createsFetchDestinations = createsFetchDestinations
        self.supportsFileSystemFlags = supportsFileSystemFlags
    }

    private enum CodingKeys: String, CodingKey {
        case hasChangeFeed, anchorsOutliveProcess, supportsThumbnails, supportsRangedReads, supportsServerSideMove
        case supportsConditionalWrites, supportsSymlinks, creatableKinds, contentHashAlgorithm, maximumUploadSize
        case identifiersArePathDerived, listsOnlySomeFiles, createsFetchDestinations, supportsFileSystemFlags
    }

    /// Decodes capabilities; `anchorsOutliveProcess`, added later, is `true` when absent, and
    /// `createsFetchDestinations` and `supportsFileSystemFlags`, added later still, `false`.
    /// - Throws: `DecodingError` when another key is missing or has the wrong type.
    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            hasChangeFeed: try values.decode(Bool.self, forKey: .hasChangeFeed),
            supportsThumbnails: try values.decode(Bool.self, forKey: .supportsThumbnails),
            supportsRangedReads: try values.decode(Bool.self, forKey: .supportsRangedReads),
            supportsServerSideMove: try values.decode(Bool.self, forKey: .supportsServerSideMove),
            supportsConditionalWrites: try values.decode(Bool.self, forKey: .supportsConditionalWrites),
            supportsSymlinks: try values.decode(Bool.self, forKey: .supportsSymlinks),
            creatableKinds: try values.decode(Set<ItemKind>.self, forKey: .creatableKinds),
            contentHashAlgorithm: try values.decodeIfPresent(String.self, forKey: .contentHashAlgorithm),
            maximumUploadSize: try values.decodeIfPresent(Int64.self, forKey: .maximumUploadSize),
            identifiersArePathDerived: try values.decode(Bool.self, forKey: .identifiersArePathDerived),
            listsOnlySomeFiles: try values.decode(Bool.self, forKey: .listsOnlySomeFiles),
            anchorsOutliveProcess: try values.decodeIfPresent(Bool.self, forKey: .anchorsOutliveProcess) ?? true,
            createsFetchDestinations: try values.decodeIfPresent(Bool.self, forKey: .createsFetchDestinations) ?? false,
            supportsFileSystemFlags: try values.decodeIfPresent(Bool.self, forKey: .supportsFileSystemFlags) ?? false)
    }
}
