/// The error every backend and the engine throw: a code with Apple's name and a message for people.
///
/// The codes carry Apple's `NSFileProviderError.Code` raw values where Apple has the code; codes
/// of our own are in the -3000 range. The engine reacts to each code as Apple's system does (see
/// ``FileProviderError/Code/reaction``).
public struct FileProviderError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        // Apple's codes.
        /// The user must sign in again (wrong key, wrong password, expired token).
        public static let notAuthenticated = Code(rawValue: -1000)
        /// An item with that name already exists in the folder.
        public static let filenameCollision = Code(rawValue: -1001)
        /// The change feed no longer knows the anchor: enumerate from scratch.
        public static let syncAnchorExpired = Code(rawValue: -1002)
        /// The listing no longer knows the page: start the listing again. The same code as
        /// ``syncAnchorExpired``, as in Apple's framework.
        public static let pageExpired = Code(rawValue: -1002)
        /// The store is full.
        public static let insufficientQuota = Code(rawValue: -1003)
        /// The store cannot be reached now (refused connection, timeout, server gone).
        public static let serverUnreachable = Code(rawValue: -1004)
        /// No item has that identifier.
        public static let noSuchItem = Code(rawValue: -1005)
        /// The store refused to delete the item.
        public static let deletionRejected = Code(rawValue: -1006)
        /// A folder to delete is not empty and the deletion was not recursive.
        public static let directoryNotEmpty = Code(rawValue: -1007)
        /// The item cannot be synchronized (a bad name, an unsupported kind, ...).
        public static let cannotSynchronize = Code(rawValue: -2005)
        /// A folder cannot be evicted because something in it cannot.
        public static let nonEvictableChildren = Code(rawValue: -2006)
        /// The item has local edits that are not uploaded yet.
        public static let unsyncedEdits = Code(rawValue: -2007)
        /// The item must stay materialized (it is pinned).
        public static let nonEvictable = Code(rawValue: -2008)
        /// The requested version of the contents is gone from the store.
        public static let versionNoLongerAvailable = Code(rawValue: -2009)
        /// The domain is not known.
        public static let providerDomainNotFound = Code(rawValue: -2013)
        /// The domain is disconnected or otherwise unavailable for now.
        public static let providerDomainTemporarilyUnavailable = Code(rawValue: -2012)

        // Our own codes.
        /// The base version given is not the item's current version: nothing was changed.
        public static let versionOutOfDate = Code(rawValue: -3001)
        /// A name that may not be used: empty, `.`, `..`, with `/` or NUL, over 255 bytes.
        public static let invalidFilename = Code(rawValue: -3002)
        /// The backend cannot do this (see its `BackendCapabilities`).
        public static let notSupported = Code(rawValue: -3003)
        /// The store or the local system denied access to a path.
        public static let permissionDenied = Code(rawValue: -3004)
        /// An argument or an option is wrong (a bad domain name, a missing option, ...).
        public static let invalidArgument = Code(rawValue: -3005)
        /// A local file system operation failed (disk full, I/O error).
        public static let localIOFailure = Code(rawValue: -3006)
        /// The data from the store is not what it said (short download, bad hash, bad reply).
        public static let corruptData = Code(rawValue: -3007)
        /// The work was cancelled.
        public static let cancelled = Code(rawValue: -3008)
        /// The local disk has not enough free space for a file the engine writes (a download):
        /// Apple's `CocoaError.fileWriteOutOfSpace`, not ``insufficientQuota``, which says the
        /// store is full. Thrown before a download that would not fit (the message says how much
        /// is needed and free) and by adapters when writing the engine's file fails with
        /// `ENOSPC` or `EDQUOT`.
        public static let fileWriteOutOfSpace = Code(rawValue: -3009)
        /// The domain's backend is not one this program knows: an external backend program that
        /// is not installed, or a kind only another tool links. Nothing is wrong with the store
        /// or the domain: the domain is skipped (not synced, not backed off, no `lastError`)
        /// until a program that has the backend runs.
        public static let backendNotAvailable = Code(rawValue: -3010)

        private static let names: [Int: String] = [
            -1000: "notAuthenticated", -1001: "filenameCollision", -1002: "syncAnchorExpired",
            -1003: "insufficientQuota", -1004: "serverUnreachable",
            -1005: "noSuchItem", -1006: "deletionRejected", -1007: "directoryNotEmpty",
            -2005: "cannotSynchronize", -2006: "nonEvictableChildren", -2007: "unsyncedEdits",
            -2008: "nonEvictable", -2009: "versionNoLongerAvailable",
            -2012: "providerDomainTemporarilyUnavailable", -2013: "providerDomainNotFound",
            -3001: "versionOutOfDate", -3002: "invalidFilename", -3003: "notSupported",
            -3004: "permissionDenied", -3005: "invalidArgument", -3006: "localIOFailure",
            -3007: "corruptData", -3008: "cancelled", -3009: "fileWriteOutOfSpace",
            -3010: "backendNotAvailable",
        ]

        /// Apple's name of the code, for logs and `--json` output.
        public var name: String { Self.names[rawValue] ?? "code\(rawValue)" }
        public var description: String { name }

        /// Whether a backend's change method (`createItem`, `modifyItem`, `deleteItem`) that
        /// throws this code has changed nothing in the store: the store answered and refused.
        /// Any other error (the connection dropped, a timeout, cancellation) leaves the outcome
        /// unknown: the store may have made the change without the answer arriving, so the
        /// engine replays the operation (with `mayAlreadyExist`) instead of sending it afresh.
        public var isRefusal: Bool {
            switch self {
            case .noSuchItem, .filenameCollision, .versionOutOfDate, .versionNoLongerAvailable, .invalidFilename,
                .invalidArgument, .directoryNotEmpty, .deletionRejected, .notSupported, .permissionDenied,
                .notAuthenticated, .insufficientQuota:
                return true
            default:
                return false
            }
        }

        /// How the engine reacts to this code, following Apple's table.
        public var reaction: Reaction {
            switch self {
            case .serverUnreachable, .notAuthenticated, .insufficientQuota,
                .providerDomainTemporarilyUnavailable:
                return .backOffDomain
            case .syncAnchorExpired:
                return .enumerateFromScratch
            case .fileWriteOutOfSpace:
                // The local disk, not the store: the domain goes on (other items may fit, and
                // space comes back when the user frees some), only the item waits.
                return .retryWithBackoff
            case .noSuchItem, .versionNoLongerAvailable, .versionOutOfDate:
                return .refetchItem
            case .filenameCollision, .invalidFilename, .cannotSynchronize, .notSupported,
                .permissionDenied, .invalidArgument, .deletionRejected, .directoryNotEmpty,
                .unsyncedEdits, .nonEvictable, .nonEvictableChildren, .providerDomainNotFound,
                .cancelled, .backendNotAvailable:
                return .reportToUser
            default:
                return .retryWithBackoff
            }
        }
    }

    /// What the engine does when an operation fails with a code.
    public enum Reaction: String, Sendable {
        /// Pause the whole domain, retry with capped exponential backoff.
        case backOffDomain
        /// Drop the sync anchor and list everything again.
        case enumerateFromScratch
        /// Ask the store for the item's current state and decide again.
        case refetchItem
        /// Retry the one item later with backoff; others go on.
        case retryWithBackoff
        /// Nothing will change by retrying: show the error.
        case reportToUser
    }

    public var code: Code
    /// What went wrong and, where it helps, what to do; for people.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// Wraps any error: a `FileProviderError` stays as it is, cancellation becomes `cancelled`,
    /// anything else becomes `code` with the error's description.
    public static func wrap(_ error: any Error, as code: Code = .localIOFailure, context: String? = nil)
        -> FileProviderError
    {
        if let error = error as? FileProviderError { return error }
        if error is CancellationError { return FileProviderError(.cancelled, "cancelled") }
        let text = String(describing: error)
        return FileProviderError(code, context.map { "\($0): \(text)" } ?? text)
    }
}

extension FileProviderError {
    public static func noSuchItem(_ identifier: ItemIdentifier) -> FileProviderError {
        FileProviderError(.noSuchItem, "no item '\(identifier.rawValue)'")
    }

    public static func versionOutOfDate(_ identifier: ItemIdentifier) -> FileProviderError {
        FileProviderError(
            .versionOutOfDate,
            "'\(identifier.rawValue)' changed in the store since the base version; nothing was overwritten")
    }
}
