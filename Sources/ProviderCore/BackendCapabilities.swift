/// What a backend can do. Optional abilities are data, not methods that throw.
///
/// Each field says its default, when to set it, and who reads it: the engine's components that
/// act on it and the conformance checks (`BackendConformance` in ProviderConformance) that
/// run when it says yes and check the refusal when it says no. A flag is only worth what its
/// readers do with it.
public struct BackendCapabilities: Hashable, Sendable, Codable {
    /// `currentSyncAnchor` and `enumerateChanges` work; otherwise the engine compares listings.
    /// Default `false`.
    ///
    /// Read by the engine's sync down (`SyncDown`: the change feed from the stored anchor, else
    /// a listing compared with the database) and the conformance suite's change-feed checks.
    public var hasChangeFeed: Bool
    /// The change feed's anchors stay valid in a later process: the store keeps the feed
    /// (a server's change log), not this process. When false (the local store's feed is its
    /// process's inotify watches), a sync that says no later sync of this process follows the
    /// feed (the CLI's one-shot `sync`) does not ask for an anchor, and the feed never starts.
    /// Default **`true`**: set it false when the feed lives in your process.
    ///
    /// Read by the engine's `SyncDown` (`DomainController.sync(followChanges: false)`).
    public var anchorsOutliveProcess: Bool
    /// `fetchThumbnail` works. Default `false`.
    ///
    /// Read by the engine's thumbnails (it asks the store, else makes one from the file) and
    /// the conformance check `thumbnailsDeclinedOrServed`.
    public var supportsThumbnails: Bool
    /// `fetchPartialContents` reads a range of a file, and `fetchContents` honours `offset`
    /// (resumable downloads). Default `false`.
    ///
    /// With an offset, `fetchContents` fetches and writes only the bytes from `offset` on,
    /// never those before (the conformance check `fetchWithOffsetReadsOnlyTheRest` fills them
    /// with a marker and checks they stay; a backend that checks a whole-file checksum may
    /// refuse with `corruptData` instead). Read by the engine's `Downloader` (checkpoints and
    /// resumed downloads, ranges of dataless files), progressive hydration in `serve`, and the
    /// conformance suite's ranged-read and offset checks.
    public var supportsRangedReads: Bool
    /// `modifyItem` can rename and move without copying the contents. Default `false`: then
    /// `modifyItem` throws `notSupported` for a rename or a move, and the engine never sends
    /// one (Docs/Sync.md, "Stores that cannot move").
    ///
    /// Read by the engine's sync up (`MovesWithoutServerSupport`; `ExcludedFromSync`: a moved
    /// file sent again whole must fit ``maximumUploadSize``) and the conformance suite's rename
    /// and move checks, which expect `notSupported` without it.
    public var supportsServerSideMove: Bool
    /// Writes check the base version atomically in the store (a conditional write); otherwise the
    /// check happens just before the write and a race with another writer is possible.
    /// Default `false`: claim it only when the store compares versions as it writes.
    ///
    /// Read by the conformance check `racingWritersWithOneBaseVersionOneWins` (two writers from
    /// one version at once, through a second backend over the same store: exactly one is
    /// taken), which runs for a backend that claims it. The engine sends `baseVersion` either
    /// way.
    public var supportsConditionalWrites: Bool
    /// The store can hold symlinks (and lists them as symlinks). A store whose `creatableKinds`
    /// has `.symlink` must say so (checked by the conformance suite). Default `false`.
    ///
    /// Read by the conformance check `symlinksAreReportedAsSymlinks`; the engine records
    /// listed symlinks either way and never follows them.
    public var supportsSymlinks: Bool
    /// The item kinds the store can create; `createItem` throws `notSupported` for the others.
    /// Default `[.file, .folder]`.
    ///
    /// Read by the engine's `ExcludedFromSync` (a local item of another kind is excluded from
    /// sync before anything is sent: Docs/Sync.md, "Stores that cannot take an item") and the
    /// conformance check `symlinksAreReportedAsSymlinks` (with `.symlink` it creates one;
    /// without, it expects `notSupported`).
    public var creatableKinds: Set<ItemKind>
    /// The hash algorithm of `Item.contentHash` (for example `sha256`), or `nil` (the default)
    /// when items carry no hash.
    ///
    /// Read by the conformance check `contentHashIsWellFormed`; the engine checks a download
    /// against the hash where it computes the algorithm.
    public var contentHashAlgorithm: String?
    /// The largest file the store accepts, in bytes, or `nil` (the default) for no limit.
    ///
    /// Read by the engine's `ExcludedFromSync`: a larger file is excluded from sync before a
    /// byte is sent, told once, and not retried until it changes. `createItem` and
    /// `modifyItem` must still refuse one with `notSupported`.
    public var maximumUploadSize: Int64?
    /// Identifiers are derived from paths: a rename or move gives a new identifier. Default
    /// **`true`**; set it false for a store with stable identifiers.
    ///
    /// Read by the conformance suite's rename and move checks (a new identifier, or the same
    /// one); the engine re-keys a moved item either way.
    public var identifiersArePathDerived: Bool
    /// Some files in the store are not listed (for example a store that lists images only).
    /// The conformance suite then needs `BackendConformance.Limitations.fileNameSuffix`, a
    /// suffix the store lists. Default `false`.
    public var listsOnlySomeFiles: Bool
    /// `fetchContents` (one file or a batch) creates a destination that does not exist yet
    /// when it starts at offset 0, so the engine does not create each staging file first (one
    /// `open` and `close` per file less; it still makes their folder). Checked by the
    /// conformance suite. Default `false`.
    ///
    /// Read by the engine's `Downloader` (a batch makes only the staging folders) and the
    /// conformance check `fetchCreatesMissingDestinationsWhereItSaysSo`.
    public var createsFetchDestinations: Bool
    /// `modifyItem` applies `.fileSystemFlags` (at least ``FileSystemFlags/userExecutable``:
    /// the store keeps an executable bit), so the engine sends a local `chmod +x`/`chmod -x`
    /// of a file in the replica up as a metadata change. When false (the default) it is kept
    /// locally only, and an eviction loses it.
    ///
    /// New contents keep the file's bit, and `createItem` with `.fileSystemFlags` in `fields`
    /// creates the file executable. Read by the engine's sync up (the scan compares the x bit
    /// of its `stat` with the record's flags and sends `modifyItem` with `[.fileSystemFlags]`)
    /// and the conformance check `executableBitGoesBothWaysWhereDeclared`.
    public var supportsFileSystemFlags: Bool
    /// How many transfers the backend runs at once (its connections, each busy with one
    /// request), when that is more than the engine's defaults keep going: the engine then runs
    /// that many download batches and uploads at once (at most 64). `nil` (the default): the
    /// engine's own depths, 8 download batches and 4 uploads. For a store where each small
    /// file costs a round trip and the server takes many at once (S3).
    public var concurrentTransfers: Int?

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
        supportsFileSystemFlags: Bool = false,
        concurrentTransfers: Int? = nil
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
        self.concurrentTransfers = concurrentTransfers
    }

    private enum CodingKeys: String, CodingKey {
        case hasChangeFeed, anchorsOutliveProcess, supportsThumbnails, supportsRangedReads, supportsServerSideMove
        case supportsConditionalWrites, supportsSymlinks, creatableKinds, contentHashAlgorithm, maximumUploadSize
        case identifiersArePathDerived, listsOnlySomeFiles, createsFetchDestinations, supportsFileSystemFlags
        case concurrentTransfers
    }

    /// Decodes capabilities; `anchorsOutliveProcess`, added later, is `true` when absent, and
    /// `createsFetchDestinations` and `supportsFileSystemFlags`, added later still, `false`,
    /// and `concurrentTransfers` `nil`.
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
            supportsFileSystemFlags: try values.decodeIfPresent(Bool.self, forKey: .supportsFileSystemFlags) ?? false,
            concurrentTransfers: try values.decodeIfPresent(Int.self, forKey: .concurrentTransfers))
    }
}
