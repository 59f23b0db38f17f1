import Foundation
import GRDB
import ProviderCore

/// One configured domain: a backend kind with its options and a replica folder.
public struct DomainRecord: Codable, Hashable, Sendable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "domain"

    public var id: Int64?
    /// The name users type; no `/`, `:` or control characters.
    public var name: String
    public var backendKind: String
    /// The backend options as JSON; secret values are never stored.
    public var configuration: String
    /// The absolute path of the replica folder: where users and programs see the domain's files
    /// (in ``ReplicaMode/dataless`` mode, the mount point of the backing folder).
    public var replicaPath: String
    public var createdAt: Date
    /// False after `disconnect`: the domain is kept but not synced.
    public var isConnected: Bool
    public var lastSyncAt: Date?
    /// The last error of the domain as a whole (for example the store was unreachable).
    public var lastError: String?
    /// The domain's own ignore patterns (`*`/`?` wildcards), one per line: local names that
    /// match are never uploaded.
    public var ignorePatterns: String = ""
    /// How many syncs in a row failed with an error that backs the whole domain off
    /// (`serverUnreachable`, `notAuthenticated`, `insufficientQuota`); 0 after a success.
    public var failureCount: Int = 0
    /// When a backed-off domain may be synced again; `nil` when it is not backing off.
    public var nextRetryAt: Date?
    /// How the replica shows files that are not downloaded (see ``ReplicaMode``); fixed when the
    /// domain is added. In ``ReplicaMode/dataless`` mode the engine keeps the files in a backing
    /// folder and ``replicaPath`` is where programs see them.
    public var replicaMode: ReplicaMode = .placeholderFiles
    /// How a dataless domain fetches a file a program reads (see ``Hydration``).
    public var hydration: Hydration = .full
    /// How programs reach a dataless domain's files (see ``OnAccessMechanism``); fixed when the
    /// domain is added. Ignored in other modes.
    public var onAccess: OnAccessMechanism = .fanotify
    /// Why ``onAccess`` was chosen, as `domain add` said it (`--on-access auto` picks one);
    /// `nil` for domains added before the choice existed.
    public var onAccessReason: String?
    /// Why the domain has its ``replicaMode``, as `domain add` or `domain convert` said it (the
    /// mode asked for, the default, or why the default cannot work here); `nil` for domains
    /// added before it was kept.
    public var modeReason: String?
    /// The most bytes of downloaded contents the domain keeps before automatic eviction takes
    /// the least recently used evictable files; `nil` for no budget of its own.
    public var cacheBudget: Int64?

    public enum Columns {
        public static let id = Column(CodingKeys.id)
        public static let name = Column(CodingKeys.name)
    }

    public init(
        name: String, backendKind: String, configuration: [String: String], replicaPath: String,
        createdAt: Date = Date()
    ) {
        self.name = name
        self.backendKind = backendKind
        let data = (try? JSONSerialization.data(withJSONObject: configuration, options: [.sortedKeys])) ?? Data("{}".utf8)
        self.configuration = String(decoding: data, as: UTF8.self)
        self.replicaPath = replicaPath
        self.createdAt = createdAt
        self.isConnected = true
    }

    /// The backend options decoded from ``configuration``.
    public var options: [String: String] {
        (try? JSONSerialization.jsonObject(with: Data(configuration.utf8)) as? [String: String]) ?? [:]
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// Where an item's contents are in the replica.
public enum ContentState: String, Codable, Hashable, Sendable {
    /// A file whose contents are not downloaded: the replica holds `<name>.placeholder`.
    case placeholder
    /// A file whose contents are downloaded under its real name.
    case materialized
    /// A folder (always a real folder in the replica).
    case folder
    /// A symlink, kept as a placeholder; never followed.
    case symlink
}

/// One item of one domain, as last seen in the store, with its state in the replica.
public struct ItemRecord: Codable, Hashable, Sendable {
    public var domainID: Int64
    public var identifier: ItemIdentifier
    public var parentIdentifier: ItemIdentifier
    public var filename: String
    /// The path relative to the replica root, `/`-separated, without a leading `/`; "" for the root.
    public var path: String
    public var kind: ItemKind
    public var contentType: String
    public var size: Int64
    public var creationDate: Date?
    public var modificationDate: Date?
    public var contentVersion: Data
    public var metadataVersion: Data
    public var capabilities: Int
    public var symlinkTarget: String?
    public var contentHash: String?
    public var state: ContentState
    /// The content policy set on this item itself; `nil` when it inherits its parent's.
    public var contentPolicy: ContentPolicy?
    /// Whether the item itself is set to ``ContentPolicy/eager`` (pinned).
    public var isPinned: Bool {
        get { contentPolicy == .eager }
        set { contentPolicy = newValue ? .eager : (contentPolicy == .eager ? nil : contentPolicy) }
    }
    /// A folder whose children are in the database but not in the replica: they are written
    /// (as placeholders and dataless folders) when the folder is populated, the first time it is
    /// opened or something below it is materialized. The root is never dataless; a dataless
    /// folder's subfolders are dataless too.
    public var isDataless: Bool
    /// The content version of the downloaded file, when materialized.
    public var localContentVersion: Data?
    /// Size, modification time (ns) and inode of the materialized file as written by the engine;
    /// a file that no longer matches has local edits.
    public var localSize: Int64?
    public var localModificationNanos: Int64?
    public var localInode: Int64?
    public var lastError: String?
    /// The item's ``FileSystemFlags`` (raw value): the store's executable bit, kept on the
    /// replica file.
    public var fileSystemFlags: Int
    /// The SHA-256 (lowercase hex) the engine computed of the bytes of content version
    /// ``hashedContentVersion`` while they streamed: a download as it was written, an upload
    /// as it was read (Docs/Reliability.md, "Content hashes"). Beside the store's own
    /// ``contentHash``; see ``sha256`` and ``localSHA256`` for when it holds.
    public var contentSHA256: String?
    /// The content version ``contentSHA256`` is the hash of. Kept across moves, renames and
    /// metadata changes; once the store's content version is another, the hash no longer
    /// describes the item (``sha256`` is `nil`), whichever code path recorded the new version.
    public var hashedContentVersion: Data?

    /// A record for an item seen in the store; not materialized, not pinned.
    @inlinable public init(domainID: Int64, item: Item, path: String) {
        let state: ContentState
        switch item.kind {
        case .folder: state = .folder
        case .symlink: state = .symlink
        case .file: state = .placeholder
        }
        self.domainID = domainID
        self.identifier = item.identifier
        self.parentIdentifier = item.parentIdentifier
        self.filename = item.filename
        self.path = path
        self.kind = item.kind
        self.contentType = item.contentType
        self.size = item.size
        self.creationDate = item.creationDate
        self.modificationDate = item.contentModificationDate
        self.contentVersion = item.version.content
        self.metadataVersion = item.version.metadata
        self.capabilities = item.capabilities.rawValue
        self.symlinkTarget = item.symlinkTargetPath
        self.contentHash = item.contentHash
        self.state = state
        self.contentPolicy = nil
        self.isDataless = false
        self.fileSystemFlags = item.fileSystemFlags.rawValue
    }

    /// The item as the backend described it.
    public var item: Item {
        Item(
            identifier: identifier, parentIdentifier: parentIdentifier, filename: filename, kind: kind,
            contentType: contentType, size: size, creationDate: creationDate,
            contentModificationDate: modificationDate,
            version: ItemVersion(content: contentVersion, metadata: metadataVersion),
            capabilities: ItemCapabilities(rawValue: capabilities), symlinkTargetPath: symlinkTarget,
            contentHash: contentHash, fileSystemFlags: flags)
    }

    /// ``fileSystemFlags`` as a set.
    public var flags: FileSystemFlags { FileSystemFlags(rawValue: fileSystemFlags) }

    /// Whether the replica file of this item gets the x bits (a file whose store has its
    /// executable bit).
    public var isExecutable: Bool { kind == .file && fileSystemFlags & FileSystemFlags.userExecutable.rawValue != 0 }

    public var version: ItemVersion { ItemVersion(content: contentVersion, metadata: metadataVersion) }

    /// Takes the store's metadata of `item`, keeping the replica state.
    public mutating func update(from item: Item, path: String) {
        identifier = item.identifier
        parentIdentifier = item.parentIdentifier
        filename = item.filename
        self.path = path
        kind = item.kind
        contentType = item.contentType
        size = item.size
        creationDate = item.creationDate
        modificationDate = item.contentModificationDate
        contentVersion = item.version.content
        metadataVersion = item.version.metadata
        capabilities = item.capabilities.rawValue
        symlinkTarget = item.symlinkTargetPath
        contentHash = item.contentHash
        fileSystemFlags = item.fileSystemFlags.rawValue
    }

    /// The SHA-256 (lowercase hex) of the store's current contents of the item, as the engine
    /// computed it when it downloaded or uploaded them; `nil` when it never did, or the contents
    /// changed since.
    public var sha256: String? { hashedContentVersion == contentVersion ? contentSHA256 : nil }

    /// The SHA-256 (lowercase hex) the downloaded file in the replica should have: the hash of
    /// the content version it was downloaded or uploaded as; `nil` when not materialized or not
    /// hashed.
    public var localSHA256: String? {
        state == .materialized && localContentVersion != nil && hashedContentVersion == localContentVersion ? contentSHA256 : nil
    }

    /// The hash to compare contents by (`whereis`, `dupes`, `find -hash`): the engine's own
    /// (`sha256:<hex>`) where it has one, else the store's ``contentHash``.
    public var comparableHash: String? { sha256.map { "sha256:" + $0 } ?? contentHash }

    /// Records `hex`, the SHA-256 of the bytes of `contentVersion` (nothing is recorded with a
    /// `nil` hash or version: an earlier hash of another version is kept, and no longer holds).
    public mutating func recordSHA256(_ hex: String?, of contentVersion: Data?) {
        guard let hex, let contentVersion else { return }
        contentSHA256 = hex
        hashedContentVersion = contentVersion
    }

    /// Whether the materialized file holds an older content version than the store's.
    public var isOutdated: Bool { state == .materialized && localContentVersion != contentVersion }
}

/// The last anchor of a container's change feed.
public struct SyncAnchorRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "syncAnchor"
    public var domainID: Int64
    public var container: String
    public var anchor: Data
    public var updatedAt: Date
}

/// The state of a journalled operation.
public enum JournalState: String, Codable, Hashable, Sendable {
    /// The last attempt failed in a way that may have reached the store (the connection
    /// dropped, a timeout): the next attempt is a replay (`mayAlreadyExist`).
    case pending
    /// An attempt is under way, or its process died: the next attempt is a replay.
    case running
    /// Finished; the database records the result.
    case done
    /// The store refused the last attempt and no earlier one may have reached it: nothing was
    /// done, and the next attempt is sent afresh.
    case failed
}

/// One operation on the store, written before it runs and marked done after, so a crash can be
/// replayed (with `mayAlreadyExist`) without doing it twice.
public struct JournalEntry: Codable, Hashable, Sendable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "journal"
    public var id: Int64?
    public var domainID: Int64
    /// The template identifier the operation is keyed by.
    public var templateIdentifier: String
    /// `create`, `modify`, `move` or `delete`.
    public var operation: String
    /// The operation's arguments as JSON.
    public var payload: String
    public var state: JournalState
    public var attempts: Int
    public var lastError: String?
    public var nextAttemptAt: Date?
    public var createdAt: Date
    public var updatedAt: Date

    public init(domainID: Int64, templateIdentifier: String, operation: String, payload: String, now: Date = Date()) {
        self.domainID = domainID
        self.templateIdentifier = templateIdentifier
        self.operation = operation
        self.payload = payload
        self.state = .pending
        self.attempts = 0
        self.createdAt = now
        self.updatedAt = now
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// Where an interrupted download stands, so the next attempt resumes instead of starting over.
public struct TransferCheckpoint: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "transferCheckpoint"
    public var domainID: Int64
    public var identifier: String
    public var contentVersion: Data
    public var stagingPath: String
    public var bytesTransferred: Int64
    public var totalBytes: Int64?
    public var updatedAt: Date

    public init(
        domainID: Int64, identifier: String, contentVersion: Data, stagingPath: String,
        bytesTransferred: Int64, totalBytes: Int64?, updatedAt: Date = Date()
    ) {
        self.domainID = domainID
        self.identifier = identifier
        self.contentVersion = contentVersion
        self.stagingPath = stagingPath
        self.bytesTransferred = bytesTransferred
        self.totalBytes = totalBytes
        self.updatedAt = updatedAt
    }
}

/// A cached thumbnail, keyed by content version.
public struct ThumbnailRecord: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "thumbnail"
    public var domainID: Int64
    public var identifier: String
    public var contentVersion: Data
    public var size: Int
    public var data: Data
    public var createdAt: Date

    public init(domainID: Int64, identifier: String, contentVersion: Data, size: Int, data: Data, createdAt: Date = Date()) {
        self.domainID = domainID
        self.identifier = identifier
        self.contentVersion = contentVersion
        self.size = size
        self.data = data
        self.createdAt = createdAt
    }
}

/// A conflict the engine resolved by keeping both versions (or bringing one back).
public struct ConflictRecord: Codable, Hashable, Sendable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "conflict"
    public var id: Int64?
    public var domainID: Int64
    /// The item's path (relative to the replica root).
    public var path: String
    /// Where the other version was kept (a conflicted copy), when one was made.
    public var keptPath: String?
    /// `bothEdited`, `editedAndDeleted`, `deletedAndEdited`, `movedAndEdited` or `nameCollision`.
    public var kind: String
    public var details: String
    public var createdAt: Date

    public init(domainID: Int64, path: String, keptPath: String?, kind: String, details: String, createdAt: Date = Date()) {
        self.domainID = domainID
        self.path = path
        self.keptPath = keptPath
        self.kind = kind
        self.details = details
        self.createdAt = createdAt
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

extension DomainRecord {
    /// ``ignorePatterns`` as a list.
    public var ignoreList: [String] {
        ignorePatterns.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
