import Foundation

/// What `verify` found wrong with one downloaded file (``ProviderManager/verify(_:progress:)``).
public struct IntegrityProblem: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The replica file's bytes are not the ones downloaded or uploaded, yet its size,
        /// modification time and inode are the recorded ones: the disk changed them (bit rot),
        /// or a program wrote them and put the date back. Nothing sends such a change: a sync
        /// sees no edit.
        case bitRot
        /// The file was changed here (its size, modification time or inode is not the
        /// recorded one) and no sync has sent it yet: not hashed, the next sync uploads it.
        case unsentEdit
        /// The store describes the downloaded contents with another hash than the one of the
        /// bytes downloaded: the store's copy and the replica's differ.
        case storeHashDiffers
        /// The database records the file as downloaded, but the replica has no file there.
        case missing
        /// The file could not be read.
        case unreadable
    }

    public var domain: String
    /// Relative to the replica root, without a leading `/`.
    public var path: String
    public var kind: Kind
    /// The hash recorded when the bytes were downloaded or uploaded (`sha256:<hex>`), if any.
    public var recordedHash: String?
    /// The hash of the bytes in the replica now (`sha256:<hex>`), when they were read.
    public var foundHash: String?
    /// The hash the store gave for the contents (`algorithm:<hex>`), if any.
    public var storeHash: String?
    /// What happened and what to do, in words.
    public var detail: String

    public init(
        domain: String, path: String, kind: Kind, recordedHash: String? = nil, foundHash: String? = nil,
        storeHash: String? = nil, detail: String
    ) {
        self.domain = domain
        self.path = path
        self.kind = kind
        self.recordedHash = recordedHash
        self.foundHash = foundHash
        self.storeHash = storeHash
        self.detail = detail
    }

    /// `DOMAIN:/path`.
    public var location: String { "\(domain):/\(path)" }

    /// Whether the replica's or the store's bytes are not what they should be (an unsent edit
    /// is a change the next sync sends, not damage).
    public var isDamage: Bool { kind != .unsentEdit }
}

/// How far a `verify` run is: files and bytes looked at of those to look at.
public struct VerifyProgress: Sendable, Hashable {
    public var files: Int
    public var totalFiles: Int
    public var bytes: Int64
    public var totalBytes: Int64
    /// The domain being verified.
    public var domain: String
}

/// What a `verify` run found (``ProviderManager/verify(_:progress:)``).
public struct VerifyReport: Sendable, Hashable {
    /// Downloaded files looked at.
    public var files = 0
    /// Files whose bytes have the hash recorded when they were downloaded or uploaded.
    public var verified = 0
    /// Files read whose bytes had no recorded hash to compare with: downloaded before hashes
    /// were kept, resumed after an interruption, filled range by range, or from a backend that
    /// does not hand its bytes to the engine (an external program).
    public var unhashed = 0
    /// Bytes read and hashed.
    public var bytesRead: Int64 = 0
    public var problems: [IntegrityProblem] = []

    public init() {}

    /// Whether a problem is damage (``IntegrityProblem/isDamage``).
    public var foundDamage: Bool { problems.contains(where: \.isDamage) }
}
