import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

/// The "system" side of FileProviderKit, as Apple's `NSFileProviderManager`: adds, lists and
/// removes domains and hands out one ``DomainController`` per domain. Many domains live side by
/// side in one process and one database.
public final class ProviderManager: Sendable {
    /// The state folder: the database, default replicas, staging files.
    public let home: URL
    public let store: MetadataStore
    public let registry: BackendRegistry
    package let executor: BlockingExecutor
    let logger: Logger
    /// How long a domain waits after failures that back it off (see ``BackoffPolicy``).
    public let backoffPolicy: BackoffPolicy
    /// The space promised to running downloads on each file system, and what stays free there
    /// (see ``SpaceReserve``); shared by all domains.
    let spaceReservations: SpaceReservations
    let controllers = Mutex<[String: DomainController]>([:])
    /// Records when programs use files, for least-recently-used eviction; written about once a
    /// second and when the manager closes. The on-access handler and `serve`'s watcher feed it.
    public let useRecorder: UseRecorder
    /// Told of the dataless folders syncs make (`serve` marks them at once).
    package let newDatalessFolders = NewDatalessFolders()
    /// Wakes the eviction loop of a `serve` running in this process, if any (see
    /// ``requestEviction()``); the loop sets it while it runs.
    package let evictionWakeup = Mutex<(@Sendable () -> Void)?>(nil)
    /// Records a replica conversion reads from the database at once (tests make it small).
    let conversionPage = Mutex(4_096)

    /// Opens the state folder `home`, creating it and the database when needed. The state
    /// folder and its `locks`, `staging` and `signals` folders are made (or made again, when an
    /// older version made them readable to others) readable only to their owner (0700), the
    /// database files too (0600): they name every path of every domain. Downloads leave
    /// `spaceReserve` free on the file system they are written to.
    /// - Throws: `localIOFailure` when the folder or the database cannot be opened.
    public init(
        home: URL, registry: BackendRegistry, logger: Logger = Logger(label: "fileprovider.engine"),
        backoffPolicy: BackoffPolicy = .standard, spaceReserve: SpaceReserve = .standard
    ) throws(FileProviderError) {
        self.home = home.standardizedFileURL
        do throws(FileProviderError) {
            try PrivateFolder.makeHome(self.home)
        } catch {
            throw FileProviderError(.localIOFailure, "cannot create the state folder \(home.path): \(error.message)")
        }
        store = try MetadataStore(url: home.appendingPathComponent("metadata.sqlite"))
        self.registry = registry
        self.logger = logger
        self.backoffPolicy = backoffPolicy
        spaceReservations = SpaceReservations(reserve: spaceReserve)
        executor = BlockingExecutor(name: "fileprovider-engine", threads: 4)
        useRecorder = UseRecorder(store: store, executor: executor, logger: logger)
    }

    /// The default state folder: `$FILEPROVIDER_HOME`, else `$XDG_DATA_HOME/fileprovider`, else
    /// `~/.local/share/fileprovider`.
    public static func defaultHome(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = environment["FILEPROVIDER_HOME"], !home.isEmpty { return URL(fileURLWithPath: home) }
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty {
            return URL(fileURLWithPath: data).appendingPathComponent("fileprovider")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/fileprovider")
    }

    /// Checks a domain name: 1 to 64 characters, no `/`, `:`, whitespace or control characters, not
    /// starting with `.` or `-`.
    /// - Throws: `invalidArgument` saying what is wrong.
    public static func validateDomainName(_ name: String) throws(FileProviderError) {
        func fail(_ why: String) -> FileProviderError {
            FileProviderError(.invalidArgument, "invalid domain name \(name.debugDescription): \(why)")
        }
        if name.isEmpty { throw fail("it is empty") }
        if name.count > 64 { throw fail("it is longer than 64 characters") }
        if name.hasPrefix(".") || name.hasPrefix("-") { throw fail("it may not start with '.' or '-'") }
        for scalar in name.unicodeScalars {
            if scalar == "/" || scalar == ":" { throw fail("it may not contain '/' or ':'") }
            if scalar.properties.isWhitespace || scalar.value < 0x20 || scalar.value == 0x7f {
                throw fail("it may not contain spaces or control characters")
            }
        }
    }

    // MARK: Domains

    /// Adds a domain: checks the name and options, connects once to check the store, creates the
    /// replica folder and records the domain with its root.
    ///
    /// In `mode` ``ReplicaMode/dataless`` it also checks that the system can watch accesses
    /// (``OnAccessSupport/problem(forBacking:)``) and makes the backing folder
    /// (``backingURL(forDomainNamed:)``), where the files will be, beside the empty replica folder.
    ///
    /// - Throws: `invalidArgument` for a bad name, unknown backend, bad options, a replica folder
    ///   that is not empty or overlaps a store path or another replica (or another dataless
    ///   domain's backing folder), a dataless domain's replica folder and backing folder that
    ///   overlap or a backing folder that is not empty; `notSupported` when dataless files cannot
    ///   work here (no CAP_SYS_ADMIN, a kernel before 6.14, a file system that refuses fanotify
    ///   marks), with the reason; `filenameCollision` when the name is taken; what the backend
    ///   throws when the store cannot be reached.
    ///
    /// Path options (``BackendOption/ValueType/path``) and `replicaPath` are stored absolute:
    /// `~` is expanded and a relative path is taken from the current directory
    /// (``BackendDescriptor/normalizingPaths(_:relativeTo:)``).
    ///
    /// `cacheBudget` is the domain's own budget of downloaded contents (bytes; `nil`: none);
    /// `hydration` how a dataless domain fetches files on access (default: ``Hydration/progressive``
    /// for a dataless domain, ``Hydration/full`` otherwise); `onAccess` how programs reach a
    /// dataless domain's files (`nil`: fanotify where it can work, else FUSE; see
    /// ``chooseOnAccess(_:backing:)``, whose refusals this throws too); `modeReason` why the
    /// domain has its mode, kept for `domain show` (``DomainRecord/modeReason``).
    ///
    /// With `keepsConnection` the backend that answered stays open as the new domain's
    /// controller (``controller(for:)`` returns it), for a sync right after that does not
    /// connect to the store again (`domain add --sync`); else it is closed.
    @discardableResult
    public func addDomain(
        name: String, kind: String, options: [String: String], replicaPath: String? = nil, ignorePatterns: [String] = [],
        mode: ReplicaMode = .placeholderFiles, cacheBudget: Int64? = nil, hydration: Hydration? = nil,
        onAccess: OnAccessMechanism? = .fanotify, modeReason: String? = nil, keepsConnection: Bool = false
    ) async throws(FileProviderError) -> DomainRecord {
        try await add(
            name: name, kind: kind, options: options, replicaPath: replicaPath, ignorePatterns: ignorePatterns, mode: mode,
            cacheBudget: cacheBudget, hydration: hydration, onAccess: onAccess, modeReason: modeReason, adopting: false,
            keepsConnection: keepsConnection
        ).record
    }

    /// Adds a `placeholder-files` domain whose replica folder holds files already (kept by
    /// `removeDomain(named:keepReplica:)`, or copied), as ``addDomain(name:kind:options:replicaPath:ignorePatterns:mode:cacheBudget:hydration:)``
    /// does, then takes the folder over (``ReplicaAdoption``): files that are the store's items
    /// (same size and modification time) are recorded as downloaded, folders as folders. The
    /// first sync deals with the rest as with any replica: nothing is lost, nothing is
    /// downloaded again.
    ///
    /// - Throws: what `addDomain` throws (except that the replica folder may hold files);
    ///   `invalidArgument` for a `dataless` domain; what the store's listing throws (then the
    ///   domain is not added).
    public func addDomainAdoptingReplica(
        name: String, kind: String, options: [String: String], replicaPath: String? = nil, ignorePatterns: [String] = [],
        cacheBudget: Int64? = nil, hydration: Hydration? = nil, modeReason: String? = nil
    ) async throws(FileProviderError) -> (record: DomainRecord, adopted: AdoptionSummary) {
        let added = try await add(
            name: name, kind: kind, options: options, replicaPath: replicaPath, ignorePatterns: ignorePatterns,
            mode: .placeholderFiles, cacheBudget: cacheBudget, hydration: hydration, onAccess: nil, modeReason: modeReason,
            adopting: true, keepsConnection: false)
        return (added.record, added.adopted ?? AdoptionSummary())
    }

    private func add(
        name: String, kind: String, options: [String: String], replicaPath: String?, ignorePatterns: [String],
        mode: ReplicaMode, cacheBudget: Int64?, hydration: Hydration?, onAccess: OnAccessMechanism?, modeReason: String?,
        adopting: Bool, keepsConnection: Bool
    ) async throws(FileProviderError) -> (record: DomainRecord, adopted: AdoptionSummary?) {
        try await PoolCheck.during("domain add") {
            () async throws(FileProviderError) -> (record: DomainRecord, adopted: AdoptionSummary?) in
            try await adding(
                name: name, kind: kind, options: options, replicaPath: replicaPath, ignorePatterns: ignorePatterns, mode: mode,
                cacheBudget: cacheBudget, hydration: hydration, onAccess: onAccess, modeReason: modeReason, adopting: adopting,
                keepsConnection: keepsConnection)
        }
    }

    private func adding(
        name: String, kind: String, options: [String: String], replicaPath: String?, ignorePatterns: [String],
        mode: ReplicaMode, cacheBudget: Int64?, hydration: Hydration?, onAccess: OnAccessMechanism?, modeReason: String?,
        adopting: Bool, keepsConnection: Bool
    ) async throws(FileProviderError) -> (record: DomainRecord, adopted: AdoptionSummary?) {
        try Self.validateDomainName(name)
        try Self.validateIgnorePatterns(ignorePatterns)
        // How programs will reach a dataless domain's files: decided before anything is made.
        let onAccessChoice: (mechanism: OnAccessMechanism, reason: String)? =
            mode == .dataless ? try Self.chooseOnAccess(onAccess, backing: try backingURL(forDomainNamed: name)) : nil
        let layout = ReplicaLayouts.layout(for: mode, onAccess: onAccessChoice?.mechanism ?? .fanotify)
        if adopting && !layout.canAdoptReplicaFolder {
            throw FileProviderError(
                .invalidArgument, "a dataless domain cannot adopt a replica folder; add it in placeholder-files mode, then convert it")
        }
        if let cacheBudget, cacheBudget < 0 { throw FileProviderError(.invalidArgument, "a cache budget cannot be negative") }
        let store = self.store
        if try await blocking({ () throws(FileProviderError) in try store.domain(named: name) }) != nil {
            throw FileProviderError(.filenameCollision, "a domain named '\(name)' exists already; pick another name or remove it first")
        }
        let descriptor = try registry.descriptor(for: kind)
        var validated = try descriptor.validate(descriptor.normalizingPaths(options))
        validated.domainName = name
        let configuration = validated
        let replica = URL(
            fileURLWithPath: replicaPath.map { ($0 as NSString).expandingTildeInPath }
                ?? home.appendingPathComponent("domains/\(name)").path
        )
        .standardizedFileURL.resolvingSymlinksInPath()
        let backing = layout.keepsFilesInBackingFolder ? try backingURL(forDomainNamed: name) : nil
        // The other domains' folders, the replica folder's contents: on the engine's threads.
        try await blocking { [self] () throws(FileProviderError) in
            try checkReplicaLocation(
                replica, backing: backing, descriptor: descriptor, configuration: configuration, mayHoldFiles: adopting)
            if let backing { try checkDatalessLocation(replica: replica, backing: backing, layout: layout) }
        }

        let backend: any Backend
        do {
            backend = try await descriptor.factory(configuration)
        } catch {
            throw FileProviderError.wrap(error, as: .invalidArgument)
        }
        let root: Item
        do {
            root = try await CheckedBackend(backend).item(for: .rootContainer)
        } catch {
            await backend.close()
            throw FileProviderError(error.code, "cannot reach the store of '\(name)': \(error.message)")
        }
        let keepsBackend = adopting || keepsConnection
        if !keepsBackend { await backend.close() }

        do throws(FileProviderError) {
            try await blocking { [self] () throws(FileProviderError) in try makeFolders(replica: replica, backing: backing, domain: name) }
        } catch {
            await backend.close()
            throw error
        }
        let stored = descriptor.redacted(configuration).values.filter { key, _ in
            descriptor.options.first { $0.name == key }?.isSecret != true
        }
        var record = DomainRecord(name: name, backendKind: kind, configuration: stored, replicaPath: replica.path)
        record.ignorePatterns = ignorePatterns.joined(separator: "\n")
        record.replicaMode = mode
        record.modeReason = modeReason
        if let onAccessChoice {
            record.onAccess = onAccessChoice.mechanism
            record.onAccessReason = onAccessChoice.reason
        }
        record.cacheBudget = cacheBudget
        record.hydration = hydration ?? layout.defaultHydration
        let domainID: Int64
        do throws(FileProviderError) {
            let unsaved = record
            record = try await blocking { () throws(FileProviderError) -> DomainRecord in
                let record = try store.insertDomain(unsaved)
                guard let id = record.id else { throw FileProviderError(.localIOFailure, "the domain was not saved") }
                var rootRecord = ItemRecord(domainID: id, item: root, path: "")
                rootRecord.identifier = .rootContainer
                rootRecord.parentIdentifier = .rootContainer
                try store.save(rootRecord)
                return record
            }
            guard let id = record.id else { throw FileProviderError(.localIOFailure, "the domain was not saved") }
            domainID = id
        } catch {
            if keepsBackend { await backend.close() }
            throw error
        }
        if keepsConnection {
            do throws(FileProviderError) {
                try await keep(backend, asControllerOf: record)
            } catch {
                // The domain is added; a later sync connects again.
                await backend.close()
            }
            return (record, nil)
        }
        guard adopting else { return (record, nil) }
        let adoption = ReplicaAdoption(
            backend: CheckedBackend(backend), replica: Replica(root: replica, staging: replica), store: store, domainID: domainID,
            executor: executor)
        do {
            let summary = try await adoption.run()
            await backend.close()
            return (record, summary)
        } catch {
            await backend.close()
            _ = try? await blocking { () throws(FileProviderError) in try store.deleteDomain(id: domainID) }
            throw FileProviderError(error.code, "cannot take over the replica folder \(replica.path): \(error.message)")
        }
    }

    /// Checks where a new domain's files would be: its replica folder and, for a dataless domain,
    /// its backing folder may not overlap a store path or another domain's replica or backing
    /// folder; the replica folder must be empty or new.
    private func checkReplicaLocation(
        _ replica: URL, backing: URL?, descriptor: BackendDescriptor, configuration: BackendConfiguration, mayHoldFiles: Bool
    ) throws(FileProviderError) {
        let path = replica.path
        var mine = [(path, "the replica folder \(path)", "choose a replica outside it with --replica")]
        if let backing {
            mine.append(
                (backing.path, "the backing folder \(backing.path) (in the state folder)", "choose another state folder with --home"))
        }
        // The store's own folders stay apart from this domain's folders and, as `domain set`
        // checks, from every other domain's.
        var apart = mine
        for domain in try store.domains() {
            apart.append((domain.replicaPath, "the replica of domain '\(domain.name)'", "choose a store path outside it"))
            if let theirBacking = try? backingURL(of: domain) {
                apart.append((theirBacking.path, "the backing folder of domain '\(domain.name)'", "choose a store path outside it"))
            }
        }
        try Self.checkStorePaths(descriptor: descriptor, configuration: configuration, apartFrom: apart)
        for domain in try store.domains() {
            var theirs = [(domain.replicaPath, "replica")]
            if let theirBacking = try? backingURL(of: domain) { theirs.append((theirBacking.path, "backing folder")) }
            for (folder, what, _) in mine {
                for (other, kind) in theirs where Self.overlaps(folder, other) {
                    let instead = folder == path ? "choose another with --replica" : "choose another name"
                    throw FileProviderError(.invalidArgument, "\(what) overlaps the \(kind) of domain '\(domain.name)'; \(instead)")
                }
            }
        }
        if !mayHoldFiles, let contents = try? FileManager.default.contentsOfDirectory(atPath: path), !contents.isEmpty {
            throw FileProviderError(
                .invalidArgument,
                "the replica folder \(path) is not empty; choose an empty or new folder with --replica, or take over what it holds (a replica kept by 'domain remove --keep-replica') with --adopt-replica"
            )
        }
    }

    /// Checks that the folders where a store keeps its data on this machine (the options its
    /// descriptor marks ``BackendOption/isStoreLocation``) do not overlap `folders`: (path, what
    /// it is, what to do instead).
    /// - Throws: `invalidArgument` naming both.
    static func checkStorePaths(
        descriptor: BackendDescriptor, configuration: BackendConfiguration, apartFrom folders: [(String, String, String)]
    ) throws(FileProviderError) {
        for option in descriptor.options where option.isStoreLocation {
            guard let value = configuration[option.name] else { continue }
            let other = URL(fileURLWithPath: value).standardizedFileURL.resolvingSymlinksInPath().path
            for (folder, what, instead) in folders where Self.overlaps(folder, other) {
                throw FileProviderError(.invalidArgument, "\(what) overlaps --\(option.name) \(other); \(instead)")
            }
        }
    }

    /// Whether this program has the backend of `domain` (its kind is in ``registry``). A domain
    /// whose backend is missing (an external backend program that is not installed, a kind only
    /// another tool links) stays as it is: `sync` and `serve` skip it, nothing is recorded on
    /// it, and a program that has the backend syncs it as before.
    public func isBackendAvailable(for domain: DomainRecord) -> Bool {
        (try? registry.descriptor(for: domain.backendKind)) != nil
    }

    /// The descriptor of a domain's backend.
    /// - Throws: `backendNotAvailable` when this program does not have it.
    func descriptor(of domain: DomainRecord) throws(FileProviderError) -> BackendDescriptor {
        do {
            return try registry.descriptor(for: domain.backendKind)
        } catch {
            throw FileProviderError(
                .backendNotAvailable,
                "domain '\(domain.name)' uses the backend '\(domain.backendKind)', which is not available here (known backends: \(registry.kinds.joined(separator: ", "))); install it, or use the program that has it"
            )
        }
    }

    /// Every domain, by name.
    public func domains() throws(FileProviderError) -> [DomainRecord] { try store.domains() }

    /// The domain of that name.
    /// - Throws: `providerDomainNotFound` naming the known domains.
    public func domain(named name: String) throws(FileProviderError) -> DomainRecord {
        if let domain = try store.domain(named: name) { return domain }
        let names = try store.domains().map(\.name)
        let known =
            names.isEmpty
            ? "no domains exist yet; add one with 'fileproviderctl domain add'" : "known domains: \(names.joined(separator: ", "))"
        throw FileProviderError(.providerDomainNotFound, "no domain named '\(name)'; \(known)")
    }

    /// Removes a domain and its metadata; deletes its replica folder unless `keepReplica`.
    ///
    /// A kept replica loses only the engine's own files: the placeholders of this domain and
    /// its staging folder. Downloaded files, local edits, new files and everything else the
    /// user put there stay.
    ///
    /// For a dataless domain, "the replica" is its backing folder (``replicaRoot(of:)``), where
    /// the files are: deleted or kept as above. Its replica folder, the empty mount point, is
    /// removed either way (only while empty: see ``removeFolders(of:root:staging:keepReplica:)``).
    ///
    /// Deleting the replica would lose what the store does not have yet, so without
    /// `keepReplica` it is refused while ``unsentChanges(inDomain:)`` lists a change in the
    /// replica (an `unfinished` journal entry alone has nothing in the replica behind it), unless
    /// `force`. A replica folder that is gone holds nothing to lose.
    /// - Throws: `providerDomainNotFound` for an unknown domain; `providerDomainTemporarilyUnavailable`
    ///   while a conversion of its replica mode is unfinished (its files may be in two folders);
    ///   `unsyncedEdits` (nothing removed) when the replica holds changes that are not in the store, neither
    ///   `keepReplica` nor `force` is given; `cannotSynchronize` (nothing removed) for a dataless
    ///   domain that a running `serve` serves; `localIOFailure` when the database fails.
    public func removeDomain(named name: String, keepReplica: Bool, force: Bool = false) async throws(FileProviderError) {
        try await PoolCheck.during("domain remove") { () async throws(FileProviderError) in
            try await removingDomain(named: name, keepReplica: keepReplica, force: force)
        }
    }

    private func removingDomain(named name: String, keepReplica: Bool, force: Bool) async throws(FileProviderError) {
        let domain = try await blocking { [self] () throws(FileProviderError) in try self.domain(named: name) }
        try checkNoUnfinishedConversion(name)
        let root = try replicaRoot(of: domain)
        // A served dataless domain's backing folder is mounted at its replica path, where
        // programs may have its files open: serve must let go of it first.
        if ReplicaLayouts.layout(of: domain).keepsFilesInBackingFolder, let process = DomainLock.holder(home: home, domain: name) {
            throw FileProviderError(
                .cannotSynchronize,
                "domain '\(name)' is served by process \(process), which shows its files at \(domain.replicaPath); stop that serve first, then remove the domain"
            )
        }
        // A replica folder that is gone holds nothing to lose.
        if !keepReplica && !force && FileManager.default.fileExists(atPath: root.path) {
            let unsent = try await unsentChanges(inDomain: name)
            if unsent.contains(where: \.losesWork) {
                let listed = unsent.prefix(5).map { "\($0.path) (\($0.kind.rawValue))" }.joined(separator: ", ")
                let more = unsent.count > 5 ? " and \(unsent.count - 5) more" : ""
                throw FileProviderError(
                    .unsyncedEdits,
                    "domain '\(name)' has \(unsent.count) local change\(unsent.count == 1 ? "" : "s") that the store does not have: \(listed)\(more); "
                        + "send them with 'fileproviderctl sync \(name)', or keep the replica folder with --keep-replica, "
                        + "or remove it anyway (losing them) with --force")
            }
        }
        if let controller = controllers.withLock({ $0.removeValue(forKey: name) }) {
            await controller.close()
        }
        guard let id = domain.id else { return }
        try await blocking { [store, home] () throws(FileProviderError) in
            try store.deleteDomain(id: id)
            ReplicaChangeFeed.forget(home: home, domain: name)
        }
        let staging = home.appendingPathComponent("staging/\(id)")
        try await executor.run { self.removeFolders(of: domain, root: root, staging: staging, keepReplica: keepReplica) }
    }

    /// The controller of a domain, made on first use and kept.
    /// - Throws: `providerDomainNotFound`; `providerDomainTemporarilyUnavailable` while a
    ///   conversion of the domain's replica mode is unfinished
    ///   (``convertDomain(named:to:onAccess:events:)``); `backendNotAvailable` when this program does not
    ///   have the domain's backend (``isBackendAvailable(for:)``; nothing is recorded on the
    ///   domain); what the backend's factory throws.
    public func controller(for name: String) async throws(FileProviderError) -> DomainController {
        try await PoolCheck.during("controller") { () async throws(FileProviderError) -> DomainController in
            try await makingController(for: name)
        }
    }

    private func makingController(for name: String) async throws(FileProviderError) -> DomainController {
        try checkNoUnfinishedConversion(name)
        if let existing = controllers.withLock({ $0[name] }) { return existing }
        let domain = try await blocking { [self] () throws(FileProviderError) in try self.domain(named: name) }
        // A missing backend is no failure of the store: nothing is recorded on the domain.
        let descriptor = try descriptor(of: domain)
        let backend: any Backend
        do throws(FileProviderError) {
            var configuration = try descriptor.validate(domain.options)
            configuration.domainName = name
            do {
                backend = try await descriptor.factory(configuration)
            } catch {
                throw FileProviderError.wrap(error, as: .invalidArgument)
            }
        } catch {
            // A store that cannot be reached backs the domain off, as a failed sync does.
            if let id = domain.id {
                let (store, policy) = (self.store, backoffPolicy)
                _ = try? await blocking { Self.recordOutcome(error, domainID: id, store: store, policy: policy) }
            }
            throw error
        }
        // Its folders (staging, the replica root's device) are made and checked on the engine's threads.
        let controller = try await blocking { [self] () throws(FileProviderError) in
            try DomainController(domain: domain, backend: backend, manager: self)
        }
        return controllers.withLock { map in
            if let existing = map[name] { return existing }
            map[name] = controller
            return controller
        }
    }

    /// Makes the controller of a domain just added around the backend that answered, so that
    /// ``controller(for:)`` returns it without connecting again.
    /// - Throws: what ``DomainController`` throws when its folders cannot be made.
    private func keep(_ backend: any Backend, asControllerOf domain: DomainRecord) async throws(FileProviderError) {
        let controller = try await blocking { [self] () throws(FileProviderError) in
            try DomainController(domain: domain, backend: backend, manager: self)
        }
        let kept = controllers.withLock { map in
            guard map[domain.name] == nil else { return false }
            map[domain.name] = controller
            return true
        }
        if !kept { await controller.close() }
    }

    /// Runs a short blocking step (database, folders) on the engine's executor, never on the
    /// cooperative pool, also when the task is cancelled (as the same step run inline would).
    /// - Throws: what `body` throws.
    package func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await executor.runEvenIfCancelled { () throws -> T in try body() }
    }

    /// The controller of a domain if one was made already, else `nil` (never makes one).
    package func loadedController(for name: String) -> DomainController? {
        controllers.withLock { $0[name] }
    }

    /// Closes every controller and its backend.
    public func close() async {
        await useRecorder.flush()
        let all = controllers.withLock { map in
            defer { map.removeAll() }
            return Array(map.values)
        }
        for controller in all { await controller.close() }
        executor.shutDown()
    }
}
