import Foundation
import ProviderCore
import ProviderStore

/// What ``ProviderManager/convertDomain(named:to:onAccess:events:)`` did.
public struct ConversionReport: Codable, Hashable, Sendable {
    public var domain: String
    /// The mode the domain had and the mode it has now.
    public var from: ReplicaMode
    public var to: ReplicaMode
    /// The folder the files were in and the folder they are in now (the replica folder or the
    /// backing folder).
    public var source: String
    public var destination: String
    /// Entries of the old folder moved into the new one by renaming; a folder counts once, with
    /// everything inside it.
    public var movedEntries = 0
    /// Files and folders in the new folder that were not placeholders: kept as they were (the
    /// same inodes, dates and contents).
    public var files = 0
    public var folders = 0
    /// Placeholders given the new mode's form: `<name>.placeholder` files made dataless files,
    /// or dataless files made `<name>.placeholder` files.
    public var convertedPlaceholders = 0
    /// Placeholders removed without a new form, holding no contents: a `<name>.placeholder`
    /// beside a real file at its name, a dataless file that no item owns.
    public var removedPlaceholders = 0
    /// Whether this run finished a conversion that an earlier, interrupted one started.
    public var resumed = false
    /// Whether the domain had the mode (and, for a dataless domain, the on-access mechanism)
    /// already: nothing was done.
    public var unchanged = false
    /// How programs reached the domain's files before and after: `fanotify` or `fuse` for a
    /// dataless domain, `nil` for a placeholder-files one (see `domain add --on-access`).
    public var onAccessFrom: OnAccessMechanism?
    public var onAccessTo: OnAccessMechanism?
    /// Why ``onAccessTo`` was chosen (as `domain show` says it); `nil` for a placeholder-files
    /// domain (or a dataless one added before the choice was recorded).
    public var onAccessReason: String?

    init(domain: String, from: ReplicaMode, to: ReplicaMode, source: String, destination: String) {
        self.domain = domain
        self.from = from
        self.to = to
        self.source = source
        self.destination = destination
    }
}

/// Progress of a conversion, for a CLI to draw.
public enum ConversionEvent: Sendable {
    /// A sync of the domain is running (in `process`, when known): the conversion waits for it.
    case waitingForSync(process: Int32?)
    /// Entries of the new folder looked at so far, out of about `estimated` (the domain's items).
    case converting(done: Int, estimated: Int)
}

/// Receives conversion events.
public typealias ConversionEventHandler = @Sendable (ConversionEvent) -> Void

/// Converts a domain's files from one ``ReplicaLayout`` to another ("read with one layout,
/// write with the other"), in the folder the new layout keeps them in. Blocking; runs on the engine's executor.
///
/// Two steps, each made of steps that can be cut at any point and run again:
/// 1. **Move** (``EntryMover``): every entry of the old folder is renamed into the new one (a
///    folder with everything inside it in one rename), so files keep their inodes, dates and
///    sizes and the database's fingerprints still tell edits from downloads. An entry in both
///    (a folder made again in the old one) is merged; two files of one name stop the conversion.
/// 2. **Convert** (``PlaceholderConverter``) every placeholder of the domain in the new folder:
///    its new form is made first (a dataless file of the item's size and date, or a
///    `<name>.placeholder` file with its metadata), then its old form is removed. A run after a
///    kill finds either form or both, and finishes.
///
/// ``ProviderManager/convertDomain(named:to:onAccess:events:)`` runs it between writing the target mode
/// in a marker file (``ConversionMarker``; no engine work starts on the domain while it is
/// there) and recording the new mode.
struct ReplicaConversion {
    let domain: String
    let domainID: Int64
    /// The layout the domain's files are in, and the one they are converted to.
    let from: any ReplicaLayout
    let to: any ReplicaLayout
    let source: URL
    let destination: URL
    let store: MetadataStore
    let events: ConversionEventHandler?
    let estimated: Int
    /// Whether to stop at the next step (the command was interrupted).
    let stopped: @Sendable () -> Bool
    /// Records read from the database at once, and dataless files found away from their items
    /// looked up together (tests make it small).
    var pageSize = 4_096

    /// Moves the old folder's entries into the new one, then converts the placeholders.
    /// - Throws: `filenameCollision` when a file of one name is in both folders, or a file that
    ///   is not a placeholder stands where a converted placeholder goes; `cancelled`
    ///   (``interrupted``) when ``stopped`` says so; `localIOFailure` (or the code of the
    ///   failure) naming the file that cannot be moved, written or removed.
    func run(into report: inout ConversionReport) throws(FileProviderError) {
        let mover = EntryMover(source: source, destination: destination, stopped: stopped)
        var converter = PlaceholderConverter(
            domain: domain, domainID: domainID, from: from, to: to, destination: destination, store: store, events: events,
            estimated: estimated, stopped: stopped, pageSize: pageSize)
        var moved = try mover.moveEntries()
        while true {
            report.movedEntries += moved
            try converter.convertAll(report: &report)
            // Anything put in the old folder while this ran goes too: it must end empty.
            moved = try mover.moveEntries()
            if moved == 0 { return }
            report.files = 0
            report.folders = 0
        }
    }

    /// The error of a conversion stopped by an interruption.
    static let interrupted = FileProviderError(
        .cancelled, "the conversion stopped part way; the domain stays blocked until the same command finishes it")
}
