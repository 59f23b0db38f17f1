import Foundation
import Logging
import ProviderCore
import ProviderEngine
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
/// a file there waits for an event, which this handler answers as ``OnAccessRequests``
/// decides (the kernel-free part, tested with fakes):
/// - a file that is not dataless (complete) gets an ignore mark, so its later accesses run at
///   native speed, and the access goes on;
/// - a dataless file is filled where it stands (one download per item however many programs
///   wait), recorded as materialized, then gets the ignore mark and the access goes on;
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
    /// Runs a sync of a domain (upload included) that compares at least the folder of the file
    /// at `path` (relative), so that a local move or edit there is recorded or sent.
    public typealias Synchronize = @Sendable (_ domain: String, _ path: String) async -> Void

    let manager: ProviderManager
    let logger: Logger
    let group: PreContentGroup
    let guardian: PreContentGuardian
    /// What each access is, and fetching it: everything but the kernel.
    let requests: OnAccessRequests
    /// The mounts of the served domains, by name.
    private let mounts = Mutex<[(name: String, mount: ReplicaMount)]>([])
    private let stopRequested = Mutex(false)
    private let finished = Latch()
    private let started = Mutex(false)
    /// Access rules by program: asked before anything is fetched for a program.
    let accessGate: AccessGate

    private init(
        manager: ProviderManager, logger: Logger, synchronize: Synchronize?, group: PreContentGroup, guardian: PreContentGuardian
    ) {
        self.manager = manager
        self.logger = logger
        self.group = group
        self.guardian = guardian
        requests = OnAccessRequests(engine: OnAccessContents(manager: manager, logger: logger), logger: logger, synchronize: synchronize)
        self.accessGate = AccessGate(manager: manager)
    }

    /// Opens the pre-content group (taking over the one a guardian kept after an earlier `serve`
    /// died) and starts its guardian; files are served once ``serve(_:ranged:)`` mounted their
    /// domain and ``start()`` runs.
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
        mounts.withLock { $0.append((domain.name, mount)) }
        requests.add(OnAccessRequests.Served(name: domain.name, domainID: id, prefix: prefix, hydration: hydration))
        let how = hydration == .progressive ? "progressive hydration" : "whole files"
        let fallback = domain.hydration == .progressive && !ranged ? " (its store has no ranged reads)" : ""
        logger.info("\(domain.name): files on access at \(mount.replica) (backing folder \(mount.backing)), \(how)\(fallback)")
    }

    /// Whether the file at `path` (relative) of `domain` is being filled now. Any thread.
    public func isFilling(domain: String, path: String) -> Bool { requests.isFilling(domain: domain, path: path) }

    /// The names of the domains served.
    public var domains: [String] { requests.domains.map(\.name) }

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
        for entry in mounts.withLock({ $0 }) {
            do { try entry.mount.detach() } catch { logger.warning("\(entry.name): \(error.message)") }
        }
        stopRequested.withLock { $0 = true }
        group.wake()
        if started.withLock({ $0 }) { await finished.wait() }
        await requests.finish()
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
                for entry in mounts.withLock({ $0 }) { try? entry.mount.detach() }
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
            !OnAccessRequests.fillsOnOpen(
                served.hydration, size: access.range.upperBound, program: event.processIdentifier, programName: ProcessScan.processName)
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
            requests.track("on-access fill") { [self] in
                let file = EventDescriptor(descriptor: event.fileDescriptor, executor: manager.executor)
                await conclude(event, await requests.provide(resolution, program: event.processIdentifier, file: file))
            }
        }
    }

    /// What the event's file is. Blocking (a few system calls); the event thread only.
    func resolve(_ event: PreContentGroup.Event) -> OnAccessRequests.Resolution {
        var status = stat()
        guard fstat(event.fileDescriptor, &status) == 0 else {
            return .refused("cannot read the state of descriptor \(event.fileDescriptor) of process \(event.processIdentifier)")
        }
        return requests.resolve(
            Self.access(event, status), size: Int64(status.st_size), program: event.processIdentifier,
            mark: { Replica.datalessState(ofDescriptor: event.fileDescriptor) },
            path: { Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)") })
    }

    /// What the access rules say of an event's access of a file not wholly present (``AccessGate``;
    /// an open needs no bytes), or `nil` when they have nothing to say: a complete or emptied
    /// file, or bytes present for a program no rule limits. Blocking; the event thread only.
    private func accessDecision(_ event: PreContentGroup.Event, _ resolution: OnAccessRequests.Resolution) -> AccessDecision? {
        let pid = event.processIdentifier
        switch resolution {
        case .dataless(let entry, let path, _, let access):
            let present =
                event.kind == .opening || requests.engine.isPresent(access.key, range: access.range, changeTime: access.changeTime)
            return accessGate.decide(pid: pid, domainID: entry.domainID, domain: entry.name, path: path, present: present)
        case .present:
            guard accessGate.mayLimit(pid: pid), let path = Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)"),
                let entry = requests.servedDomain(containing: path)
            else { return nil }
            let relative = String(path.dropFirst(entry.prefix.count))
            return accessGate.decide(pid: pid, domainID: entry.domainID, domain: entry.name, path: relative, present: true)
        case .complete, .emptied, .refused: return nil
        }
    }

    /// The identity and change time of an event's file, and the bytes its access needs (the
    /// whole file when the kernel sent no range).
    static func access(_ event: PreContentGroup.Event, _ status: stat) -> OnAccessRequests.Access {
        OnAccessRequests.Access(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), changeTime: ProgressiveHydrator.changeTime(status),
            size: Int64(status.st_size), offset: event.offset, count: event.count)
    }

    /// Answers an event from a task: an allowed access's file gets the ignore mark first (its
    /// contents are complete). Through the executor.
    private func conclude(_ event: PreContentGroup.Event, _ answer: OnAccessRequests.Answer) async {
        let (response, ignore): (PreContentGroup.Response, Bool)
        switch answer {
        case .allow(let complete): (response, ignore) = (.allow, complete)
        case .deny(let reason): (response, ignore) = (.deny(reason), false)
        }
        do {
            try await manager.executor.run { [self] in
                if ignore { try? group.ignore(event) }
                self.answer(event, response)
            }
        } catch {
            // The executor is shut down (serve is ending): answer here rather than never.
            self.answer(event, response)
        }
    }

    // MARK: Writes and opens

    /// A program wrote into a file, or closed it after opening it for writing: handed to
    /// ``OnAccessRequests/written(path:key:access:program:)`` (the event's descriptor closes).
    private func noteWrite(_ event: PreContentGroup.Event) {
        defer { group.dismiss(event) }
        guard let (key, _) = Replica.datalessState(ofDescriptor: event.fileDescriptor),
            let path = Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)"), !path.hasSuffix(" (deleted)")
        else { return }
        var status = stat()
        guard fstat(event.fileDescriptor, &status) == 0, status.st_size > 0 else { return }
        if let entry = requests.servedDomain(containing: path), entry.hydration == .progressive {
            logger.debug(
                "\(entry.name): \(TerminalText.quoted(String(path.dropFirst(entry.prefix.count)))): written by process \(event.processIdentifier) (mask 0x\(String(event.mask, radix: 16)))"
            )
        }
        requests.written(path: path, key: key, access: Self.access(event, status), program: event.processIdentifier)
    }

    /// A program opened a file of a served domain: remembered as its last use (eviction takes
    /// the least recently used files first).
    private func noteOpen(_ event: PreContentGroup.Event) {
        defer { group.dismiss(event) }
        var status = stat()
        let file =
            fstat(event.fileDescriptor, &status) == 0
            ? ProgressiveHydrator.FileKey(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)) : nil
        requests.opened(file, path: Self.resolvedPath("/proc/self/fd/\(event.fileDescriptor)"))
    }

    private func answer(_ event: PreContentGroup.Event, _ response: PreContentGroup.Response) {
        do { try group.respond(event, response) } catch { logger.warning("on-access: \(error.message)") }
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

/// An event's descriptor, read and changed through the engine's executor (off the cooperative
/// pool).
struct EventDescriptor: AccessedDescriptor {
    let descriptor: Int32
    let executor: BlockingExecutor

    func datalessKey() async throws(FileProviderError) -> UInt64? {
        let descriptor = self.descriptor
        return try await executor.run { Replica.datalessKey(ofDescriptor: descriptor) }
    }

    func clearDatalessMark() async -> Int32? {
        let descriptor = self.descriptor
        do {
            return try await executor.run { () -> Int32? in
                ExtendedAttribute.remove(Replica.datalessAttribute, of: descriptor) == 0 || errno == ENODATA ? nil : errno
            }
        } catch {
            return ECANCELED
        }
    }
}
