import Foundation
import Logging
import ProviderCore
import ProviderStore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Fetches a dataless file's contents when any program accesses it: the engine's counterpart
/// of Apple's system calling `startProvidingItem(at:)` "as other processes attempt to access
/// documents". Serves every `dataless` domain of one `serve` process with one fanotify
/// pre-content group (``PreContentGroup``), guarded by a ``PreContentGuardian`` so that no
/// program ever reads a file's holes, even after `kill -9`.
///
/// For each served domain the backing folder is mounted at the replica path (``ReplicaMount``),
/// marked before any program can reach it. An access (read, write, truncate, `mmap`, exec) of
/// a file there waits for an event, which this handler answers:
/// - a file that is not dataless (complete) gets an ignore mark, so its later accesses run at
///   native speed, and the access goes on;
/// - a dataless file is filled where it stands by the domain's ``Downloader`` (one download per
///   item however many programs wait), recorded as materialized, then gets the ignore mark and
///   the access goes on;
/// - a dataless file a program emptied while opening it (`O_TRUNC`, `> file`) needs no
///   download: it loses its dataless mark and becomes an ordinary local edit of the item;
/// - a failure (store unreachable, item gone, disk full) fails the access with EIO (ENOSPC for
///   a full disk), is recorded as the item's last error (`why`) and logged; the file stays
///   dataless and the next access tries again.
///
/// The engine itself never reads or writes through the replica path (it would wait on its own
/// event): it uses the backing folder, which is not marked.
///
/// Threads: one thread of its own reads events and answers those of complete files; fills run
/// as tasks whose blocking parts go through the manager's ``BlockingExecutor``. Nothing blocks
/// Swift's cooperative pool.
public final class OnAccessHandler: @unchecked Sendable {
    /// A domain whose replica path this handler serves.
    struct Served: Sendable {
        let name: String
        let domainID: Int64
        let mount: ReplicaMount
        /// The replica path as this process's `/proc/self/fd` links show it, with a final `/`.
        let prefix: String
        /// How its files are fetched: ``Hydration/progressive`` only where the backend has
        /// ranged reads.
        let hydration: Hydration
    }

    /// The file an event is about: its identity, change time and the bytes the access needs.
    struct Access: Sendable {
        let key: ProgressiveHydrator.FileKey
        let changeTime: Int64
        let range: Range<Int64>
    }

    /// What an event's file turned out to be.
    enum Resolution: Sendable {
        /// Contents complete (or not ours): let the access go on and stop watching the file.
        case complete
        /// Emptied by the program opening it: no download needed.
        case emptied(domain: String, path: String)
        /// Dataless: fill it first (or, with progressive hydration, the bytes the access needs).
        case dataless(served: Served, path: String, key: UInt64, access: Access)
        /// Partially present and the bytes the access needs are there: let it go on, keep
        /// watching the file.
        case present
        /// Cannot be served: fail the access.
        case refused(String)
    }

    /// Runs a sync of a domain (upload included) that compares at least the folder of the file
    /// at `path` (relative), so that a local move or edit there is recorded or sent.
    public typealias Synchronize = @Sendable (_ domain: String, _ path: String) async -> Void

    let manager: ProviderManager
    let logger: Logger
    /// Asked for when a dataless file is not where the database has it (moved or renamed
    /// locally since the last sync).
    let synchronize: Synchronize?
    let group: PreContentGroup
    let guardian: PreContentGuardian
    private let served = Mutex<[Served]>([])
    private let stopRequested = Mutex(false)
    private let finished = Latch()
    private let started = Mutex(false)
    /// The files being filled, as `domain/relative path`: their writes are the engine's.
    private let filling = Mutex<Set<String>>([])
    /// Fills in flight, for ``stop()``.
    private let running = Mutex<[UUID: Task<Void, Never>]>([:])
    /// The partially present files of progressive domains.
    let hydrator: ProgressiveHydrator
    /// Fetches the small files of a folder that programs read file after file.
    let readAhead: FolderReadAhead
    /// Access rules by program: asked before anything is fetched for a program.
    let accessGate: AccessGate

    private init(
        manager: ProviderManager, logger: Logger, synchronize: Synchronize?, group: PreContentGroup, guardian: PreContentGuardian
    ) {
        self.manager = manager
        self.logger = logger
        self.synchronize = synchronize
        self.group = group
        self.guardian = guardian
        self.hydrator = ProgressiveHydrator(logger: logger)
        self.readAhead = FolderReadAhead(manager: manager, logger: logger)
        self.accessGate = AccessGate(manager: manager)
    }

    /// Opens the pre-content group (taking over the one a guardian kept after an earlier `serve`
    /// died) and starts its guardian; files are served once ``serve(_:)`` mounted their domain
    /// and ``start()`` runs.
    /// - Throws: `permissionDenied` without `CAP_SYS_ADMIN`; `notSupported` on a kernel without
    ///   pre-content events; `noSuchItem` when `fileprovider-guard` is not installed;
    ///   `localIOFailure` otherwise.
    /// `synchronize` syncs a domain, comparing at least the folder of the file it names, when a
    /// file is accessed that was moved since the last sync, and after a program's write into a
    /// partly present file made it whole.
    public static func open(manager: ProviderManager, logger: Logger, synchronize: Synchronize? = nil) throws(FileProviderError)
        -> OnAccessHandler
    {
        let runFolder = manager.home.appendingPathComponent("run").path
        let opened: PreContentGuardian.Opened
        do { opened = try PreContentGuardian.open(runFolder: runFolder) } catch {
            if error.code == .permissionDenied {
                throw FileProviderError(
                    .permissionDenied, "dataless domains need serve to run as root (CAP_SYS_ADMIN for fanotify): \(error.message)")
            }
            throw error
        }
        if opened.adopted {
            logger.notice("took over the on-access group that an earlier serve left with its guardian")
        }
        return OnAccessHandler(
            manager: manager, logger: logger, synchronize: synchronize, group: opened.group, guardian: opened.guardian)
    }

    /// Mounts a dataless domain's backing folder at its replica path, marked, so programs see
    /// its files there. Leftovers of an earlier `serve` that died are replaced.
    /// - Throws: `invalidArgument` when the domain is not dataless, or its replica folder is not
    ///   empty or is a mount point of something else; what ``ReplicaMount/attach(backing:at:markedBy:)``
    ///   throws.
    /// `ranged`: the domain's backend has ranged reads (needed for progressive hydration).
    public func serve(_ domain: DomainRecord, ranged: Bool) throws(FileProviderError) {
        guard ReplicaLayouts.layout(of: domain).isGuardedOnAccess, let id = domain.id, let backing = try manager.backingURL(of: domain)
        else {
            throw FileProviderError(.invalidArgument, "\(domain.name) is not a dataless domain")
        }
        try OnAccessSupport.check(backing: backing.path)
        let mount = try ReplicaMount.attach(backing: backing.path, at: domain.replicaPath, markedBy: group)
        let prefix = (Self.resolvedPath(mount.replica) ?? mount.replica) + "/"
        let hydration: Hydration = domain.hydration == .progressive && ranged ? .progressive : .full
        served.withLock {
            $0.append(Served(name: domain.name, domainID: id, mount: mount, prefix: prefix, hydration: hydration))
        }
        let how = hydration == .progressive ? "progressive hydration" : "whole files"
        let fallback = domain.hydration == .progressive && !ranged ? " (its store has no ranged reads)" : ""
        logger.info("\(domain.name): files on access at \(mount.replica) (backing folder \(mount.backing)), \(how)\(fallback)")
    }

    /// Whether the file at `path` (relative) of `domain` is being filled now. Any thread.
    public func isFilling(domain: String, path: String) -> Bool {
        filling.withLock { $0.contains(domain + "/" + path) } || hydrator.isFetching(domain: domain, path: path)
            || readAhead.isFilling(domain: domain, path: path)
    }

    /// The names of the domains served.
    public var domains: [String] { served.withLock { $0.map(\.name) } }

    /// Starts the thread that answers events.
    public func start() {
        started.withLock { $0 = true }
        let thread = Thread { [self] in
            ThreadName.setCurrent("fileprovider-on-access")
            loop()
            finished.open()
        }
        thread.name = "fileprovider-on-access"
        thread.start()
    }

    /// Stops serving: takes the mounts away (programs then see the empty replica folders), lets
    /// fills in flight finish, and stops the event thread. Events from files still open through
    /// the detached mounts are answered by the guardian (EIO) once this process is gone.
    public func stop() async {
        for entry in served.withLock({ $0 }) {
            do { try entry.mount.detach() } catch { logger.warning("\(entry.name): \(error.message)") }
        }
        stopRequested.withLock { $0 = true }
        group.wake()
        if started.withLock({ $0 }) { await finished.wait() }
        await readAhead.stop()
        for task in running.withLock({ Array($0.values) }) { await task.value }
        await manager.useRecorder.flush()
        await accessGate.flush()
    }

    // MARK: Events

    private func loop() {
        while !stopRequested.withLock({ $0 }) {
            let events: [PreContentGroup.Event]
            do { events = try group.nextEvents() } catch {
                // No more answers from here: take the files away rather than let programs wait
                // (those already waiting get EIO from the guardian when serve ends).
                logger.error("on-access files: \(error.message); the replica folders are unmounted until serve restarts")
                for entry in served.withLock({ $0 }) { try? entry.mount.detach() }
                return
            }
            for event in events { dispatch(event) }
        }
    }

    /// Answers an event of a complete file here, on the event thread; hands a dataless one to a
    /// task.
    private func dispatch(_ event: PreContentGroup.Event) {
        switch event.kind {
        case .access, .opening: break
        case .modified:
            noteWrite(event)
            return
        case .opened:
            noteOpen(event)
            return
        case .other:
            if event.needsAnswer { answer(event, .allow) } else { group.dismiss(event) }
            return
        }
        let resolution = resolve(event)
        // Access rules by program: refused at once (EPERM), nothing fetched; an open by a
        // program that may not fetch fills nothing.
        if let decision = accessDecision(event, resolution) {
            if decision.refuses { return answer(event, .deny(.permission)) }
            if event.kind == .opening && !decision.mayFetch { return answer(event, .allow) }
        }
        // An open of a dataless file fetches nothing unless the file is filled on open.
        if event.kind == .opening, case .dataless(let served, _, _, let access) = resolution,
            !Self.fillsOnOpen(served.hydration, size: access.range.upperBound, program: event.processIdentifier)
        {
            answer(event, .allow)
            return
        }
        switch resolution {
        case .complete:
            try? group.ignore(event)
            answer(event, .allow)
        case .present:
            answer(event, .allow)
        case .refused(let reason):
            logger.warning("on-access: \(reason)")
            answer(event, .deny(.ioError))
        case .emptied, .dataless:
            let id = UUID()
            // Made under the lock, so the task's own removal comes after its insertion.
            running.withLock { running in
                running[id] = Task { [self] in
                    await PoolCheck.during("on-access fill") { await provide(event, resolution) }
                    _ = self.running.withLock { $0.removeValue(forKey: id) }
                }
            }
        }
    }

    /// Files up to this size are filled whole before a program's open of them returns (with
    /// progressive hydration; with full hydration every file is): the program's first `fstat`
    /// then sees the change time the file keeps. `tar` compares the change time after its open
    /// with the one after reading and says "file changed as we read it" (exit 1) when a fill
    /// ran in between. Larger files are fetched as they are read, so an open does not wait
    /// for gigabytes, except by the programs of ``wholeFileReaders``.
    static let fillOnOpenLimit: Int64 = 16 << 20

    /// Programs (their `comm`, as `/proc/PID/comm` names them) whose open of a dataless file
    /// waits until it is whole, whatever its size: archivers read every byte anyway, and a fill
    /// while they read changes the change time they compare after reading (`tar`: "file
    /// changed as we read it", exit 1) and leaves holes that `tar --sparse` maps (`SEEK_DATA`)
    /// and archives as zeros.
    static let wholeFileReaders: Set<String> = ["tar", "gtar", "bsdtar"]

    /// Whether an open of a dataless file of `size` bytes by the process `program` waits until
    /// it is filled whole. The process's name is read only for a large file of a progressive
    /// domain.
    static func fillsOnOpen(_ hydration: Hydration, size: Int64, program: Int32) -> Bool {
        if hydration == .full || size <= fillOnOpenLimit { return true }
        return ProcessScan.processName(program).map(wholeFileReaders.contains) ?? false
    }

    /// What the event's file is. Blocking (a few system calls); the event thread only.
    func resolve(_ event: PreContentGroup.Event) -> Resolution {
        var status = stat()
        guard fstat(event.fileDescriptor, &status) == 0 else {
            return .refused("cannot read the state of descriptor \(event.fileDescriptor) of process \(event.processIdentifier)")
        }
        let access = Self.access(event, status)
        // First, with no system call: most accesses of a partially present file (a sequential
        // reader's) are of bytes already present. An allow is right whether or not the file is
        // still dataless.
        if hydrator.isPresent(access.key, range: access.range, changeTime: access.changeTime) { return .present }
        guard let (key, filling) = Replica.datalessState(ofDescriptor: event.fileDescriptor) else { return .complete }
        guard let path = Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)") else {
            return .refused("cannot tell which file descriptor \(event.fileDescriptor) of process \(event.processIdentifier) is")
        }
        if path.hasSuffix(" (deleted)") {
            return .refused("\(path): a dataless file was deleted while process \(event.processIdentifier) had it open")
        }
        guard let entry = servedDomain(containing: path) else {
            return .refused("\(path) is in no served replica")
        }
        let relative = String(path.dropFirst(entry.prefix.count))
        // Empty but not from a fill (a fill truncates first, and one cut short by a crash
        // leaves its mark): the program opening it emptied it.
        if !filling, status.st_size == 0 {
            return .emptied(domain: entry.name, path: relative)
        }
        return .dataless(served: entry, path: relative, key: key, access: access)
    }

    /// What the access rules say of an event's access of a file not wholly present (``AccessGate``;
    /// an open needs no bytes), or `nil` when they have nothing to say: a complete or emptied
    /// file, or bytes present for a program no rule limits. Blocking; the event thread only.
    private func accessDecision(_ event: PreContentGroup.Event, _ resolution: Resolution) -> AccessDecision? {
        let pid = event.processIdentifier
        switch resolution {
        case .dataless(let entry, let path, _, let access):
            let present = event.kind == .opening || hydrator.holds(access.key, range: access.range, changeTime: access.changeTime)
            return accessGate.decide(pid: pid, domainID: entry.domainID, domain: entry.name, path: path, present: present)
        case .present:
            guard accessGate.mayLimit(pid: pid), let path = Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)"),
                let entry = servedDomain(containing: path)
            else { return nil }
            let relative = String(path.dropFirst(entry.prefix.count))
            return accessGate.decide(pid: pid, domainID: entry.domainID, domain: entry.name, path: relative, present: true)
        case .complete, .emptied, .refused: return nil
        }
    }

    /// The identity and change time of an event's file, and the bytes its access needs (the
    /// whole file when the kernel sent no range).
    static func access(_ event: PreContentGroup.Event, _ status: stat) -> Access {
        let size = Int64(status.st_size)
        let offset = Int64(clamping: event.offset)
        let (end, overflow) = offset.addingReportingOverflow(Int64(clamping: event.count))
        let range = event.count == 0 ? 0..<max(0, size) : offset..<(overflow ? Int64.max : end)
        return Access(
            key: ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)),
            changeTime: ProgressiveHydrator.changeTime(status), range: range)
    }

    /// Fills a dataless file, or turns an emptied one into an ordinary file, then answers.
    /// Its system calls go through the engine's executor, off the cooperative pool.
    private func provide(_ event: PreContentGroup.Event, _ resolution: Resolution) async {
        switch resolution {
        case .emptied(let domain, let path):
            // An empty item's file is empty anyway: filled (recorded as downloaded) as others.
            if let entry = served.withLock({ $0.first { $0.name == domain } }),
                let key = try? await manager.executor.run({ Replica.datalessKey(ofDescriptor: event.fileDescriptor) }),
                let record = try? await lookUp(entry, path: path), record.size == 0
            {
                var status = stat()
                _ = fstat(event.fileDescriptor, &status)
                await provide(event, .dataless(served: entry, path: path, key: key, access: Self.access(event, status)))
                return
            }
            // Nothing to fetch: the program replaces the contents. Without the mark the file is
            // an ordinary file at the item's path, which sync sends as an edit of the item.
            let failure: Int32?
            do {
                failure = try await manager.executor.run { () -> Int32? in
                    ExtendedAttribute.remove(Replica.datalessAttribute, of: event.fileDescriptor) == 0 || errno == ENODATA ? nil : errno
                }
            } catch {
                failure = ECANCELED
            }
            if let failure {
                logger.warning(
                    "\(domain): \(TerminalText.quoted(path)): cannot clear the dataless mark: \(String(cString: strerror(failure)))")
                await conclude(event, .deny(.ioError))
                return
            }
            logger.info("\(domain): \(TerminalText.quoted(path)) emptied by process \(event.processIdentifier); no download needed")
            await conclude(event, .allow)
        case .dataless(let entry, let path, let key, let access):
            // Filled meanwhile by a read-ahead of its folder; else counted towards one.
            if await readAhead.accessed(domain: entry.name, domainID: entry.domainID, path: path, program: event.processIdentifier) {
                await conclude(event, .allow)
                use(domainID: entry.domainID, path: path)
                return
            }
            do {
                if entry.hydration == .progressive {
                    let complete: Bool
                    do {
                        complete = try await fetch(entry, path: path, key: key, access: access, descriptor: event.fileDescriptor)
                    } catch where error.code == .notSupported {
                        // The store turned out to have no ranged reads: the whole file.
                        try await fill(entry, path: path, key: key, descriptor: event.fileDescriptor)
                        complete = true
                    }
                    await conclude(event, .allow, ignore: complete)
                } else {
                    try await fill(entry, path: path, key: key, descriptor: event.fileDescriptor)
                    await conclude(event, .allow)
                }
                use(domainID: entry.domainID, path: path)
                // The replica grew: a budget may be exceeded now.
                manager.requestEviction()
            } catch {
                // Filled meanwhile by another event's download: nothing left to do.
                let stillDataless =
                    (try? await manager.executor.run { Replica.datalessKey(ofDescriptor: event.fileDescriptor) != nil }) ?? true
                if !stillDataless {
                    await conclude(event, .allow)
                    return
                }
                logger.error(
                    "\(entry.name): \(TerminalText.quoted(path)): not fetched for process \(event.processIdentifier): \(error.message)")
                await recordFailure(error, domainID: entry.domainID, path: path)
                await conclude(event, .deny(error.code == .fileWriteOutOfSpace ? .noSpace : .ioError))
            }
        case .complete:
            await conclude(event, .allow)
        case .present:
            await conclude(event, .allow, ignore: false)
        case .refused:
            await conclude(event, .deny(.ioError))
        }
    }

    /// Answers an event from a task: an allowed access's file gets the ignore mark first (its
    /// contents are complete). Through the executor.
    private func conclude(_ event: PreContentGroup.Event, _ response: PreContentGroup.Response, ignore: Bool = true) async {
        do {
            try await manager.executor.run { [self] in
                if response == .allow && ignore { try? group.ignore(event) }
                answer(event, response)
            }
        } catch {
            // The executor is shut down (serve is ending): answer here rather than never.
            answer(event, response)
        }
    }

    /// Downloads the item at `path` of a served domain into its dataless file.
    /// - Throws: `noSuchItem` when the database knows no item at `path` whose identifier matches
    ///   the file's mark (a file moved since the last sync: the next sync records the move);
    ///   what ``Downloader/fillInPlace(_:)`` throws.
    private func fill(_ entry: Served, path: String, key: UInt64, descriptor: Int32) async throws(FileProviderError) {
        let controller = try await manager.controller(for: entry.name)
        let record = try await item(entry, path: path, key: key, descriptor: descriptor)
        let started = Date()
        let fillKey = entry.name + "/" + path
        filling.withLock { _ = $0.insert(fillKey) }
        defer { filling.withLock { _ = $0.remove(fillKey) } }
        _ = try await controller.downloader.fillInPlace(record)
        logger.info(
            "\(entry.name): \(TerminalText.quoted(path)): fetched on access (\(record.size) bytes in \(String(format: "%.2f", Date().timeIntervalSince(started))) s)"
        )
    }

    /// Fetches the bytes an access needs of the item at `path` (progressive hydration).
    /// Returns `true` when the file is complete now.
    /// - Throws: as ``fill(_:path:key:descriptor:)``.
    private func fetch(_ entry: Served, path: String, key: UInt64, access: Access, descriptor: Int32) async throws(FileProviderError)
        -> Bool
    {
        let controller = try await manager.controller(for: entry.name)
        let record = try await item(entry, path: path, key: key, descriptor: descriptor)
        logger.trace("\(entry.name): \(TerminalText.quoted(path)): access of bytes \(access.range.lowerBound)..<\(access.range.upperBound)")
        let fillKey = entry.name + "/" + path
        filling.withLock { _ = $0.insert(fillKey) }
        defer { filling.withLock { _ = $0.remove(fillKey) } }
        return try await hydrator.provide(
            record, key: access.key, changeTime: access.changeTime, range: access.range, downloader: controller.downloader)
    }

    /// The item whose dataless file is at `path` of a served domain, syncing first when the file
    /// was moved since the last sync.
    /// - Throws: `noSuchItem` when the database knows no item at `path` whose identifier matches
    ///   the file's mark (a file moved since the last sync: the next sync records the move).
    private func item(_ entry: Served, path: String, key: UInt64, descriptor: Int32) async throws(FileProviderError) -> ItemRecord {
        var record = try await lookUp(entry, path: path)
        var key = key
        if record.map({ PlaceholderOwner.key($0.identifier.rawValue) }) != key, let synchronize {
            // Moved or renamed since the last sync: a sync records the move, then the item is
            // at this path (and the file may carry the item's new identifier, where the store
            // names items by path).
            logger.info("\(entry.name): \(TerminalText.quoted(path)): moved since the last sync; syncing before fetching it")
            await synchronize(entry.name, path)
            record = try await lookUp(entry, path: path)
            key = (try? await manager.executor.run { Replica.datalessKey(ofDescriptor: descriptor) }) ?? key
        }
        guard let record, PlaceholderOwner.key(record.identifier.rawValue) == key else {
            throw FileProviderError(
                .noSuchItem, "no item is recorded at \(path) for this file (moved since the last sync?); it is fetched once sync records it"
            )
        }
        return record
    }

    // MARK: Writes and opens

    /// A program wrote into a file, or closed it after opening it for writing: a partially
    /// present file of a progressive domain is fetched whole around what the program wrote and
    /// becomes a local edit. Resolved here (the event's descriptor closes), handled by a task.
    private func noteWrite(_ event: PreContentGroup.Event) {
        defer { group.dismiss(event) }
        guard let (key, _) = Replica.datalessState(ofDescriptor: event.fileDescriptor),
            let path = Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)"), !path.hasSuffix(" (deleted)")
        else { return }
        var status = stat()
        guard fstat(event.fileDescriptor, &status) == 0, status.st_size > 0 else { return }
        guard let entry = servedDomain(containing: path), entry.hydration == .progressive
        else { return }
        let relative = String(path.dropFirst(entry.prefix.count))
        let access = Self.access(event, status)
        logger.debug(
            "\(entry.name): \(TerminalText.quoted(relative)): written by process \(event.processIdentifier) (mask 0x\(String(event.mask, radix: 16)))"
        )
        let id = UUID()
        running.withLock { running in
            running[id] = Task { [self] in
                await PoolCheck.during("on-access write") {
                    do throws(FileProviderError) {
                        let controller = try await manager.controller(for: entry.name)
                        let record = try await item(entry, path: relative, key: key, descriptor: -1)
                        try await hydrator.modified(
                            record, key: access.key, changeTime: access.changeTime, downloader: controller.downloader)
                        // Whole now, with the program's bytes: send the edit (the watcher ignored the
                        // file's writes while it was being fetched).
                        await synchronize?(entry.name, relative)
                    } catch {
                        logger.error(
                            "\(entry.name): \(TerminalText.quoted(relative)): written by process \(event.processIdentifier) while partly fetched; not completed: \(error.message)"
                        )
                        await recordFailure(error, domainID: entry.domainID, path: relative)
                    }
                }
                _ = self.running.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// A program opened a file of a served domain: remembered as its last use (eviction takes
    /// the least recently used files first).
    private func noteOpen(_ event: PreContentGroup.Event) {
        defer { group.dismiss(event) }
        var status = stat()
        if fstat(event.fileDescriptor, &status) == 0 {
            hydrator.opened(ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)))
        }
        guard let path = Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)") else { return }
        guard let entry = servedDomain(containing: path) else { return }
        use(domainID: entry.domainID, path: String(path.dropFirst(entry.prefix.count)))
        readAhead.opened(domainID: entry.domainID, path: String(path.dropFirst(entry.prefix.count)))
    }

    /// Remembers that a program used the file at `path` (the manager's ``UseRecorder`` writes
    /// it down).
    private func use(domainID: Int64, path: String) {
        manager.useRecorder.used(domainID: domainID, path: path)
    }

    /// The item the database knows at `path` of a served domain.
    /// - Throws: `localIOFailure` when the database cannot be read.
    private func lookUp(_ entry: Served, path: String) async throws(FileProviderError) -> ItemRecord? {
        let store = manager.store
        let domainID = entry.domainID
        return try await manager.executor.run { try store.item(domainID: domainID, path: path) }
    }

    /// Records why an access failed on the item at `path`, for `why`.
    private func recordFailure(_ error: FileProviderError, domainID: Int64, path: String) async {
        let store = manager.store
        let message = "fetch on access failed: \(error.message)"
        _ = try? await manager.executor.run {
            guard var record = try store.item(domainID: domainID, path: path) else { return }
            record.lastError = message
            try store.apply(domainID: domainID, upserts: [record], deletions: [])
        }
    }

    private func answer(_ event: PreContentGroup.Event, _ response: PreContentGroup.Response) {
        do { try group.respond(event, response) } catch { logger.warning("on-access: \(error.message)") }
    }

    /// The served domain whose replica path holds `path` (the deepest, when one is inside
    /// another), or `nil`. Any thread.
    private func servedDomain(containing path: String) -> Served? {
        served.withLock { $0 }.filter { path.hasPrefix($0.prefix) }.max { $0.prefix.count < $1.prefix.count }
    }

    /// The target of a link or the real path of a folder, or `nil`. Blocking.
    static func resolvedPath(_ path: String) -> String? {
        if path.hasPrefix("/proc/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlink(path, &buffer, buffer.count - 1)
            guard length > 0 else { return nil }
            return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }
}
