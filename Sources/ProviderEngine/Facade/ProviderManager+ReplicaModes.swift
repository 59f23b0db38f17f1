import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Where a domain's files are on disk, by its ``ReplicaMode``.
///
/// A `placeholder-files` domain has one folder, its replica (``DomainRecord/replicaPath``): the
/// engine and programs use the same path. A `dataless` domain has two: the **backing folder**
/// `<home>/replicas/<domain name>`, where the files are and where the engine reads and writes
/// them, and its replica path, an empty folder on which `serve` mounts the backing folder (a bind
/// mount it marks with fanotify, so reads by programs fetch contents). The engine never touches
/// contents through the replica path: an access of its own through the marked mount would wait
/// for its own fanotify event.
///
/// The backing folder is not stored: it follows from the state folder and the domain's name.
/// The state folder is where the database is, so it cannot move without it, and a domain's name
/// never changes (a command that renames domains must move the backing folder too).
extension ProviderManager {
    /// The folder of the state folder that holds the backing folders of dataless domains.
    public static let backingFoldersName = "replicas"

    /// The backing folder a dataless domain named `name` has (or would have):
    /// `<home>/replicas/<name>`, with the state folder's symlinks resolved (as replica paths are).
    /// - Throws: `invalidArgument` when `name` is not a valid domain name (see
    ///   ``validateDomainName(_:)``), so a name from a damaged database never points outside
    ///   `<home>/replicas`.
    public func backingURL(forDomainNamed name: String) throws(FileProviderError) -> URL {
        try Self.validateDomainName(name)
        return home.resolvingSymlinksInPath().appendingPathComponent(Self.backingFoldersName).appendingPathComponent(name)
    }

    /// The backing folder of a dataless domain; `nil` for a domain in another mode.
    /// - Throws: `invalidArgument` when the domain's name is not valid.
    public func backingURL(of domain: DomainRecord) throws(FileProviderError) -> URL? {
        ReplicaLayouts.layout(of: domain).keepsFilesInBackingFolder ? try backingURL(forDomainNamed: domain.name) : nil
    }

    /// The root of a domain's ``Replica``: the folder the engine reads and writes the domain's
    /// files in. The replica folder for `placeholder-files`, the backing folder for `dataless`.
    /// - Throws: `invalidArgument` when a dataless domain's name is not valid.
    public func replicaRoot(of domain: DomainRecord) throws(FileProviderError) -> URL {
        try backingURL(of: domain) ?? URL(fileURLWithPath: domain.replicaPath)
    }

    /// Checks that a new dataless domain can work before anything is made: the replica folder
    /// and the backing folder are apart, the backing folder is empty or new, and the system can
    /// watch accesses to it (``OnAccessSupport/problem(forBacking:)``).
    /// - Throws: `invalidArgument` when the folders are the same or one is inside the other, or
    ///   the backing folder holds something; `notSupported` with the probe's reason.
    func checkDatalessLocation(replica: URL, backing: URL, layout: any ReplicaLayout) throws(FileProviderError) {
        if Self.overlaps(replica.path, backing.path) {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(replica.path) and the backing folder \(backing.path) (where a dataless domain keeps its files) are the same or inside one another; choose a replica folder outside \(backing.deletingLastPathComponent().path) with --replica"
            )
        }
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: backing.path), !contents.isEmpty {
            throw FileProviderError(
                .invalidArgument,
                "the backing folder \(backing.path) is not empty (files kept when a domain of that name was removed?); move them away or choose another name"
            )
        }
        if layout.isGuardedOnAccess, let problem = OnAccessSupport.problem(forBacking: backing) {
            throw FileProviderError(.notSupported, problem)
        }
    }

    /// How programs will reach a new dataless domain's files, with the reason `domain add` and
    /// `domain show` give: `requested`, or with `nil` (`--on-access auto`) fanotify where it can
    /// work (CAP_SYS_ADMIN, Linux 6.14 or later, a backing folder on a file system that takes
    /// the mark: ``OnAccessSupport/problem(forBacking:)``), else FUSE. Blocking (reads `/proc`,
    /// `statfs`, loads libfuse).
    /// - Throws: `notSupported` (or `permissionDenied` for `/dev/fuse`) when the mechanism asked
    ///   for cannot work here, or with `nil` when neither can; each message says what to do.
    public static func chooseOnAccess(_ requested: OnAccessMechanism?, backing: URL) throws(FileProviderError)
        -> (mechanism: OnAccessMechanism, reason: String)
    {
        let fanotifyProblem = OnAccessSupport.problem(forBacking: backing)
        let short = fanotifyProblem?.replacingOccurrences(of: ", or " + OnAccessSupport.instead, with: "")
            .replacingOccurrences(of: "; " + OnAccessSupport.instead, with: "")
        switch requested {
        case .fanotify:
            if let fanotifyProblem {
                throw FileProviderError(.notSupported, fanotifyProblem + ", or --on-access fuse (any user, any kernel with FUSE)")
            }
            return (.fanotify, "asked for (--on-access fanotify)")
        case .fuse:
            do { try FUSEMountCheck.checkSystem() } catch {
                throw FileProviderError(error.code, "--on-access fuse cannot work here: \(error.message)")
            }
            return (.fuse, "asked for (--on-access fuse)")
        case nil:
            guard let short else {
                return (
                    .fanotify,
                    "auto: fanotify pre-content events work here (CAP_SYS_ADMIN, Linux 6.14 or later, a file system that takes the mark)"
                )
            }
            do { try FUSEMountCheck.checkSystem() } catch {
                throw FileProviderError(
                    error.code,
                    "dataless files cannot work here: not through fanotify (\(short)), not through FUSE (\(error.message)); \(OnAccessSupport.instead)"
                )
            }
            return (.fuse, "auto: FUSE, as fanotify cannot work here (\(short))")
        }
    }

    /// The mode of a new domain named `name` that was given none (`domain add` without
    /// `--mode`), with the reason `domain add` gives: ``ReplicaMode/dataless`` wherever
    /// fanotify or FUSE can work (``chooseOnAccess(_:backing:)`` with `nil` then picks which), as
    /// Apple's and Windows' cloud files always are; else ``ReplicaMode/placeholderFiles``, which
    /// works anywhere, with why neither mechanism can work and what each needs. Runs the checks
    /// on the engine's threads (they read `/proc`, call `statfs` and load libfuse).
    /// - Throws: `invalidArgument` when `name` is not a valid domain name (as
    ///   ``addDomain(name:kind:options:replicaPath:ignorePatterns:mode:cacheBudget:hydration:onAccess:)``
    ///   throws it).
    public func defaultMode(forDomainNamed name: String) async throws(FileProviderError) -> (mode: ReplicaMode, reason: String) {
        let backing = try backingURL(forDomainNamed: name)
        return try await blocking { Self.chooseDefaultMode(backing: backing) }
    }

    /// What ``defaultMode(forDomainNamed:)`` answers for a backing folder at `backing`. Blocking.
    static func chooseDefaultMode(backing: URL) -> (mode: ReplicaMode, reason: String) {
        do {
            _ = try chooseOnAccess(nil, backing: backing)
            return (.dataless, defaultModeReason)
        } catch {
            let prefix = "dataless files cannot work here: "
            var why = error.message.replacingOccurrences(of: "; " + OnAccessSupport.instead, with: "")
            if why.hasPrefix(prefix) { why.removeFirst(prefix.count) }
            return (.placeholderFiles, "dataless files, \(defaultModeReason), cannot work here: \(why)")
        }
    }

    /// The reason of a mode ``defaultMode(forDomainNamed:)`` chose.
    public static let defaultModeReason = "the default (no --mode)"

    /// Makes a new domain's folders and marks the root of its ``Replica`` as the domain's (the
    /// check before a scan, ``Replica/checkRoot(domain:knowsItems:)``, reads the mark). For a
    /// dataless domain: the backing folder with the modes the umask gives (they are the user's
    /// files, unlike the private state folder) and the empty replica folder, its mount point.
    /// Blocking.
    /// - Throws: `localIOFailure` naming the folder that cannot be made.
    func makeFolders(replica: URL, backing: URL?, domain: String) throws(FileProviderError) {
        for (folder, what) in [(replica, "replica folder"), (backing, "backing folder")] {
            guard let folder else { continue }
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            } catch {
                throw FileProviderError(.localIOFailure, "cannot create the \(what) \(folder.path): \(error.localizedDescription)")
            }
        }
        let root = backing ?? replica
        Replica(root: root, staging: root).markRoot(domain: domain)
    }

    /// Removes a domain's folders after its metadata is gone. Blocking.
    ///
    /// The root of its ``Replica`` (the backing folder of a dataless domain) is deleted with
    /// everything in it, or with `keepReplica` loses only the engine's own files. A dataless
    /// domain's replica folder is only ever removed with `rmdir`: it is empty, or it is still the
    /// mount point of the backing folder (a running `serve`), and a recursive removal there would
    /// delete the files through the marked mount; it stays when it is not empty.
    func removeFolders(of domain: DomainRecord, root: URL, staging: URL, keepReplica: Bool) {
        try? FileManager.default.removeItem(at: staging)
        if keepReplica {
            try? FileManager.default.removeItem(at: root.appendingPathComponent(".fileprovider-staging"))
            Replica(root: root, staging: staging, layout: ReplicaLayouts.layout(of: domain)).removeAllPlaceholders(of: domain.name)
        } else {
            try? FileManager.default.removeItem(at: root)
        }
        if ReplicaLayouts.layout(of: domain).keepsFilesInBackingFolder && root.path != domain.replicaPath {
            _ = rmdir(domain.replicaPath)
        }
    }

    /// Whether two absolute paths are the same or one is inside the other.
    static func overlaps(_ a: String, _ b: String) -> Bool {
        a == b || a.hasPrefix(b.hasSuffix("/") ? b : b + "/") || b.hasPrefix(a.hasSuffix("/") ? a : a + "/")
    }
}

extension ProviderManager {
    /// Detaches the replica mount of every dataless domain that no live fanotify group guards
    /// any more (``ReplicaMount/detachUnguarded(at:backing:)``): what `serve` and its guardian
    /// leave when both are killed at once, a mount through which programs would read the holes
    /// of files never downloaded as zeros. Every `fileproviderctl` command runs it when it opens
    /// the state folder, and `serve` before it mounts; a mount is looked at only without a
    /// `serve` holding the domain's lock, and then costs one `statx` and a look at the fanotify
    /// descriptors of every process. Returns the names of the domains
    /// whose mount it detached; a domain it cannot judge (not root) is logged and skipped.
    @discardableResult
    public func detachUnguardedReplicaMounts() -> [String] {
        guard let domains = try? domains() else { return [] }
        var detached: [String] = []
        for domain in domains where ReplicaLayouts.layout(of: domain).isGuardedOnAccess && ReplicaMount.isMountPoint(domain.replicaPath) {
            // A running `serve` (it holds the domain's lock) guards its mount: no process's
            // descriptors need a look, so a command run beside `serve` stays as fast as without.
            if DomainLock.holder(home: home, domain: domain.name) != nil { continue }
            guard let backing = try? backingURL(of: domain) else { continue }
            do {
                if try ReplicaMount.detachUnguarded(at: domain.replicaPath, backing: backing.path) {
                    logger.warning(
                        "\(domain.name): detached the replica mount at \(domain.replicaPath), which no serve guarded any more (serve and its guardian were killed together); programs reading through it could have read zeros"
                    )
                    detached.append(domain.name)
                }
            } catch {
                logger.debug("\(domain.name): cannot check the replica mount at \(domain.replicaPath): \(error)")
            }
        }
        return detached
    }
}
