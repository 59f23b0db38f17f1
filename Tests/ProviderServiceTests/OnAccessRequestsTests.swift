import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore
import Testing

@testable import ProviderService

/// ``OnAccessRequests``, the on-access path without the kernel: which served domain and item an
/// accessed file is, the bytes an access needs, what is fetched and recorded, and how each
/// access is answered, through a fake engine (``FakeEngine``) and fake descriptors. Needs no
/// root, no fanotify, no kernel 6.14: these are the decisions the root-only suites
/// (OnAccessTests, ProgressiveHydrationTests, OnAccessReadAheadTests) see through real programs.
@Suite struct OnAccessRequestsTests {
    static let photos = OnAccessRequests.Served(name: "photos", domainID: 1, prefix: "/srv/photos/", hydration: .full)
    /// A domain whose replica is inside another's.
    static let nested = OnAccessRequests.Served(name: "nested", domainID: 2, prefix: "/srv/photos/mounted/", hydration: .full)
    static let films = OnAccessRequests.Served(name: "films", domainID: 3, prefix: "/srv/films/", hydration: .progressive)

    let engine = FakeEngine()
    let requests: OnAccessRequests

    init() {
        requests = OnAccessRequests(engine: engine, logger: Logger(label: "test"), synchronize: nil)
        for domain in [Self.photos, Self.nested, Self.films] { requests.add(domain) }
    }

    static func access(size: Int64 = 100, offset: UInt64 = 0, count: UInt64 = 0, inode: UInt64 = 7) -> OnAccessRequests.Access {
        OnAccessRequests.Access(device: 1, inode: inode, changeTime: 42, size: size, offset: offset, count: count)
    }

    /// A mark for the item at `path` as the engine writes it (its identifier is the path here).
    static func mark(_ path: String, filling: Bool = false) -> (key: UInt64, filling: Bool)? {
        (PlaceholderOwner.key(path), filling)
    }

    // MARK: Ranges

    @Test func theAccessOfARangeNeedsThoseBytesAndAnOpenTheWholeFile() {
        #expect(Self.access(size: 100, offset: 10, count: 20).range == 10..<30)
        // No range from the kernel (an open, a truncate, an exec): the whole file.
        #expect(Self.access(size: 100, offset: 0, count: 0).range == 0..<100)
        #expect(Self.access(size: 0, count: 0).range == 0..<0)
        // A hostile or huge range ends at Int64.max instead of wrapping around.
        #expect(Self.access(size: 100, offset: UInt64(Int64.max) - 5, count: 100).range == (Int64.max - 5)..<Int64.max)
        #expect(Self.access(size: 100, offset: UInt64.max, count: UInt64.max).range == Int64.max..<Int64.max)
    }

    @Test func opensWaitForSmallFilesAndForArchiversOnly() {
        let never: (Int32) -> String? = { _ in
            Issue.record("the program's name was read for a small file")
            return nil
        }
        #expect(OnAccessRequests.fillsOnOpen(.full, size: 1 << 40, program: 1, programName: never))
        #expect(OnAccessRequests.fillsOnOpen(.progressive, size: OnAccessRequests.fillOnOpenLimit, program: 1, programName: never))
        let large = OnAccessRequests.fillOnOpenLimit + 1
        #expect(!OnAccessRequests.fillsOnOpen(.progressive, size: large, program: 1) { _ in "cat" })
        #expect(OnAccessRequests.fillsOnOpen(.progressive, size: large, program: 1) { _ in "tar" })
        // A process gone before its name was read: fetched as it reads.
        #expect(!OnAccessRequests.fillsOnOpen(.progressive, size: large, program: 1) { _ in nil })
    }

    // MARK: Resolution

    @Test func aFileWithoutDatalessMarkIsCompleteAndItsPathIsNotRead() {
        let resolution = requests.resolve(
            Self.access(), size: 100, program: 9, mark: { nil },
            path: {
                Issue.record("the path of a complete file was read")
                return nil
            })
        #expect(resolution == .complete)
    }

    @Test func bytesKnownPresentAreAllowedWithoutAnySystemCall() {
        let access = Self.access(size: 1000, offset: 0, count: 100)
        engine.state.withLock { $0.present = [access.key: 0..<500] }
        let resolution = requests.resolve(
            access, size: 1000, program: 9,
            mark: {
                Issue.record("the mark was read although the bytes are present")
                return nil
            }, path: { nil })
        #expect(resolution == .present)
        // Bytes past what is present: resolved as usual.
        let later = Self.access(size: 1000, offset: 400, count: 200)
        #expect(requests.resolve(later, size: 1000, program: 9, mark: { Self.mark("a") }, path: { "/srv/films/a" }) != .present)
    }

    @Test func theDeepestServedDomainOwnsAFile() {
        let access = Self.access()
        let outer = requests.resolve(access, size: 100, program: 9, mark: { Self.mark("x/a.jpg") }, path: { "/srv/photos/x/a.jpg" })
        #expect(outer == .dataless(served: Self.photos, path: "x/a.jpg", key: PlaceholderOwner.key("x/a.jpg"), access: access))
        let inner = requests.resolve(access, size: 100, program: 9, mark: { Self.mark("b") }, path: { "/srv/photos/mounted/b" })
        #expect(inner == .dataless(served: Self.nested, path: "b", key: PlaceholderOwner.key("b"), access: access))
        // A name that only starts like a served folder is not in it.
        let beside = requests.resolve(access, size: 100, program: 9, mark: { Self.mark("c") }, path: { "/srv/photos2/c" })
        #expect(beside == .refused("/srv/photos2/c is in no served replica"))
    }

    @Test func unknownAndDeletedFilesAreRefused() {
        let access = Self.access()
        guard case .refused = requests.resolve(access, size: 100, program: 9, mark: { Self.mark("a") }, path: { nil }) else {
            Issue.record("a file whose path cannot be read was not refused")
            return
        }
        let deleted = requests.resolve(access, size: 100, program: 9, mark: { Self.mark("a") }, path: { "/srv/photos/a (deleted)" })
        #expect(deleted == .refused("/srv/photos/a (deleted): a dataless file was deleted while process 9 had it open"))
    }

    @Test func anEmptyDatalessFileWasEmptiedUnlessAFillIsUnderWay() {
        let access = Self.access(size: 0)
        let emptied = requests.resolve(access, size: 0, program: 9, mark: { Self.mark("a") }, path: { "/srv/photos/a" })
        #expect(emptied == .emptied(served: Self.photos, path: "a", access: access))
        // A fill truncates first: an empty file in the middle of one is not the program's.
        let filling = requests.resolve(access, size: 0, program: 9, mark: { Self.mark("a", filling: true) }, path: { "/srv/photos/a" })
        #expect(filling == .dataless(served: Self.photos, path: "a", key: PlaceholderOwner.key("a"), access: access))
    }

    // MARK: Providing

    @Test func aDatalessFileIsFilledRecordedAsUsedAndAllowedForGood() async {
        engine.add(record("x/a.jpg", size: 100), domainID: 1)
        let resolution = requests.resolve(
            Self.access(), size: 100, program: 9, mark: { Self.mark("x/a.jpg") }, path: { "/srv/photos/x/a.jpg" })
        let answer = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: PlaceholderOwner.key("x/a.jpg")))
        #expect(answer == .allow(ignore: true))
        let state = engine.state.withLock { $0 }
        #expect(state.fills == ["photos:x/a.jpg"])
        #expect(state.uses == ["1:x/a.jpg"])
        #expect(state.evictionRequests == 1)
        #expect(state.failures.isEmpty)
    }

    @Test func failuresDenyWithTheirErrnoAndAreRecordedForWhy() async {
        engine.add(record("a", size: 100), domainID: 1)
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.photos, path: "a", key: PlaceholderOwner.key("a"), access: Self.access())
        let file = FakeDescriptor(key: PlaceholderOwner.key("a"))

        engine.state.withLock { $0.fillError = FileProviderError(.serverUnreachable, "connection refused") }
        #expect(await requests.provide(resolution, program: 9, file: file) == .deny(.ioError))
        #expect(engine.state.withLock { $0.failures } == ["1:a": "fetch on access failed: connection refused"])

        engine.state.withLock { $0.fillError = FileProviderError(.fileWriteOutOfSpace, "disk full") }
        #expect(await requests.provide(resolution, program: 9, file: file) == .deny(.noSpace))
        // Nothing was used, nothing grew.
        #expect(engine.state.withLock { $0.uses.isEmpty && $0.evictionRequests == 0 })
    }

    @Test func aFailedFillOfAFileAnotherFillCompletedIsAllowed() async {
        engine.add(record("a", size: 100), domainID: 1)
        engine.state.withLock { $0.fillError = FileProviderError(.serverUnreachable, "gone") }
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.photos, path: "a", key: PlaceholderOwner.key("a"), access: Self.access())
        // The mark is gone by the time the failure is looked at: another event's download won.
        let answer = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: nil))
        #expect(answer == .allow(ignore: true))
        #expect(engine.state.withLock { $0.failures.isEmpty })
    }

    @Test func aFileMovedSinceTheLastSyncIsNotFilledWithAnotherItemsBytes() async {
        // The database has another item at the path the file is at now.
        engine.add(record("b", size: 100), domainID: 1, at: "a")
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.photos, path: "a", key: PlaceholderOwner.key("a"), access: Self.access())
        let answer = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: PlaceholderOwner.key("a")))
        #expect(answer == .deny(.ioError))
        #expect(engine.state.withLock { $0.fills.isEmpty })
        #expect(engine.state.withLock { $0.failures["1:a"]?.contains("no item is recorded at a for this file") == true })
    }

    @Test func aFileMovedSinceTheLastSyncIsFetchedOnceASyncRecordedTheMove() async {
        let engine = self.engine
        let synced = Mutex<[String]>([])
        let requests = OnAccessRequests(
            engine: engine, logger: Logger(label: "test"),
            synchronize: { domain, path in
                synced.withLock { $0.append("\(domain):\(path)") }
                // The sync records the move: the item is at the new path now.
                engine.add(record("a", size: 100), domainID: 1, at: "moved/a")
            })
        requests.add(Self.photos)
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.photos, path: "moved/a", key: PlaceholderOwner.key("a"), access: Self.access())
        let answer = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: PlaceholderOwner.key("a")))
        #expect(answer == .allow(ignore: true))
        #expect(synced.withLock { $0 } == ["photos:moved/a"])
        #expect(engine.state.withLock { $0.fills } == ["photos:moved/a"])
    }

    @Test func progressiveDomainsFetchTheRangeAndKeepWatchingAPartlyPresentFile() async {
        engine.add(record("film.mkv", size: 1 << 30), domainID: 3)
        let access = Self.access(size: 1 << 30, offset: 4096, count: 8192)
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.films, path: "film.mkv", key: PlaceholderOwner.key("film.mkv"), access: access)
        let file = FakeDescriptor(key: PlaceholderOwner.key("film.mkv"))

        engine.state.withLock { $0.fetchCompletes = false }
        #expect(await requests.provide(resolution, program: 9, file: file) == .allow(ignore: false))
        #expect(engine.state.withLock { $0.fetches } == ["films:film.mkv:4096..<12288"])

        engine.state.withLock { $0.fetchCompletes = true }
        #expect(await requests.provide(resolution, program: 9, file: file) == .allow(ignore: true))
        #expect(engine.state.withLock { $0.fills.isEmpty })
    }

    @Test func aStoreWithoutRangedReadsGetsTheWholeFileFilled() async {
        engine.add(record("film.mkv", size: 1 << 30), domainID: 3)
        engine.state.withLock { $0.fetchError = FileProviderError(.notSupported, "no ranged reads") }
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.films, path: "film.mkv", key: PlaceholderOwner.key("film.mkv"),
            access: Self.access(size: 1 << 30, offset: 0, count: 10))
        let answer = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: PlaceholderOwner.key("film.mkv")))
        #expect(answer == .allow(ignore: true))
        #expect(engine.state.withLock { $0.fills } == ["films:film.mkv"])
    }

    @Test func anEmptiedFileLosesItsMarkAndAnEmptyItemIsFilled() async {
        // The program emptied a 100-byte item's file: nothing to fetch, the mark goes.
        engine.add(record("a", size: 100), domainID: 1)
        let file = FakeDescriptor(key: PlaceholderOwner.key("a"))
        let emptied = OnAccessRequests.Resolution.emptied(served: Self.photos, path: "a", access: Self.access(size: 0))
        #expect(await requests.provide(emptied, program: 9, file: file) == .allow(ignore: true))
        #expect(file.cleared.withLock { $0 } == 1)
        #expect(engine.state.withLock { $0.fills.isEmpty })

        // An empty item's file is empty anyway: filled, so it is recorded as downloaded.
        engine.add(record("e", size: 0), domainID: 1)
        let empty = OnAccessRequests.Resolution.emptied(served: Self.photos, path: "e", access: Self.access(size: 0))
        let other = FakeDescriptor(key: PlaceholderOwner.key("e"))
        #expect(await requests.provide(empty, program: 9, file: other) == .allow(ignore: true))
        #expect(other.cleared.withLock { $0 } == 0)
        #expect(engine.state.withLock { $0.fills } == ["photos:e"])

        // A mark that cannot be taken away: the access fails rather than show a dataless file.
        let stuck = FakeDescriptor(key: PlaceholderOwner.key("a"), clearFailure: EACCES)
        #expect(await requests.provide(emptied, program: 9, file: stuck) == .deny(.ioError))
    }

    @Test func refusedAndCompleteFilesAreAnsweredWithoutTheEngine() async {
        let file = FakeDescriptor(key: nil)
        #expect(await requests.provide(.refused("no"), program: 9, file: file) == .deny(.ioError))
        #expect(await requests.provide(.complete, program: 9, file: file) == .allow(ignore: true))
        #expect(await requests.provide(.present, program: 9, file: file) == .allow(ignore: false))
        #expect(engine.state.withLock { $0.calls } == 0)
    }

    // MARK: Concurrency

    @Test func aFileBeingFilledIsTheEnginesWriteUntilTheFillEnds() async throws {
        engine.add(record("a", size: 100), domainID: 1)
        let gate = Gate()
        engine.state.withLock { $0.fillGate = gate }
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.photos, path: "a", key: PlaceholderOwner.key("a"), access: Self.access())
        #expect(!requests.isFilling(domain: "photos", path: "a"))
        let requests = self.requests
        let fill = requests.track("test fill") {
            _ = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: PlaceholderOwner.key("a")))
        }
        await gate.waitUntilEntered()
        // The watcher asks this for every write it sees: the fill's writes are not a user's.
        #expect(requests.isFilling(domain: "photos", path: "a"))
        #expect(!requests.isFilling(domain: "photos", path: "b"))
        #expect(!requests.isFilling(domain: "nested", path: "a"))
        gate.open()
        await fill.value
        #expect(!requests.isFilling(domain: "photos", path: "a"))
    }

    @Test func finishWaitsForTheWorkInFlightAndWritesDownTheUses() async {
        engine.add(record("a", size: 100), domainID: 1)
        let gate = Gate()
        engine.state.withLock { $0.fillGate = gate }
        let requests = self.requests
        let resolution = OnAccessRequests.Resolution.dataless(
            served: Self.photos, path: "a", key: PlaceholderOwner.key("a"), access: Self.access())
        let answered = Mutex<OnAccessRequests.Answer?>(nil)
        requests.track("test fill") {
            let answer = await requests.provide(resolution, program: 9, file: FakeDescriptor(key: PlaceholderOwner.key("a")))
            answered.withLock { $0 = answer }
        }
        await gate.waitUntilEntered()
        let finishing = Task { await requests.finish() }
        gate.open()
        await finishing.value
        #expect(answered.withLock { $0 } == .allow(ignore: true))
        #expect(engine.state.withLock { $0.flushes } == 1)
    }

    // MARK: Writes and opens

    @Test func aWriteIntoAPartlyPresentFileCompletesItAsAnEditOfProgressiveDomainsOnly() async {
        engine.add(record("film.mkv", size: 1 << 30), domainID: 3)
        engine.add(record("a", size: 100), domainID: 1)
        let access = Self.access(size: 1 << 30, offset: 0, count: 10)
        #expect(requests.written(path: "/srv/photos/a", key: PlaceholderOwner.key("a"), access: access, program: 9) == nil)
        #expect(requests.written(path: "/elsewhere/a", key: PlaceholderOwner.key("a"), access: access, program: 9) == nil)
        let task = requests.written(path: "/srv/films/film.mkv", key: PlaceholderOwner.key("film.mkv"), access: access, program: 9)
        await task?.value
        #expect(engine.state.withLock { $0.completions } == ["films:film.mkv"])
    }

    @Test func opensOfServedFilesCountAsUses() {
        requests.opened(ProgressiveHydrator.FileKey(device: 1, inode: 5), path: "/srv/photos/mounted/x/b")
        requests.opened(nil, path: "/tmp/elsewhere")
        requests.opened(nil, path: nil)
        let state = engine.state.withLock { $0 }
        #expect(state.uses == ["2:x/b"])
        #expect(state.opened == [ProgressiveHydrator.FileKey(device: 1, inode: 5)])
    }

    // MARK: Read-ahead

    @Test func threeFilesReadInARowFetchTheRestOfTheFolderInABatch() async {
        let gate = Gate()
        engine.state.withLock {
            $0.candidates = ["f5", "f0", "f3", "f1", "f4", "f2"].map { record("d/" + $0) }
            $0.batchGate = gate
        }
        let clock = Mutex(0.0)
        let readAhead = FolderReadAhead(engine: engine, logger: Logger(label: "test"), now: { clock.withLock { $0 } })
        for (index, name) in ["f0", "f1", "f2"].enumerated() {
            clock.withLock { $0 = Double(index) * 0.1 }
            // Each is fetched by its reader, the usual way.
            #expect(await !readAhead.accessed(domain: "photos", domainID: 1, path: "d/" + name, program: 5))
        }
        // The third started a read-ahead: one batch of the files after f2, none a program
        // asked for.
        await gate.waitUntilEntered()
        #expect(engine.state.withLock { $0.batches } == [["d/f3", "d/f4", "d/f5"]])
        #expect(readAhead.isRunning(domainID: 1, folder: "d"))
        // Its writes are the engine's.
        #expect(readAhead.isFilling(domain: "photos", path: "d/f4"))
        #expect(!readAhead.isFilling(domain: "photos", path: "d/f0"))
        gate.open()
        await readAhead.settle()
        #expect(!readAhead.isFilling(domain: "photos", path: "d/f4"))
        // The replica grew: eviction is asked for a pass.
        #expect(engine.state.withLock { $0.evictionRequests } == 1)
    }

    @Test func filesReadOneByOneOrByAProgramARuleLimitsStartNoReadAhead() async {
        engine.state.withLock { $0.candidates = (0..<6).map { record("d/f\($0)") } }
        let clock = Mutex(0.0)
        let readAhead = FolderReadAhead(
            engine: engine, logger: Logger(label: "test"), now: { clock.withLock { $0 } }, mayReadAhead: { program, _ in program != 7 })
        // A shell loop of cats: one file per program.
        for index in 0..<3 {
            clock.withLock { $0 = Double(index) * 0.1 }
            #expect(await !readAhead.accessed(domain: "photos", domainID: 1, path: "d/f\(index)", program: Int32(100 + index)))
        }
        // An indexer a rule limits reads three in a row.
        for index in 3..<6 {
            clock.withLock { $0 = Double(index) * 0.1 }
            #expect(await !readAhead.accessed(domain: "photos", domainID: 1, path: "d/f\(index)", program: 7))
        }
        await readAhead.settle()
        #expect(engine.state.withLock { $0.batches.isEmpty })
    }

    // MARK: Read-ahead order

    @Test func aReadAheadTakesTheFilesAfterTheOneAskedForFirst() {
        let files = ["c", "a", "e", "b", "d"].map { record($0) }
        #expect(FolderReadAhead.order(files, after: "b").map(\.filename) == ["c", "d", "e", "a", "b"])
        #expect(FolderReadAhead.order(files, after: "e").map(\.filename) == ["a", "b", "c", "d", "e"])
        #expect(FolderReadAhead.order([], after: "x").isEmpty)
    }
}

/// A record of a file at `path` whose identifier is `path`.
func record(_ path: String, size: Int64 = 10) -> ItemRecord {
    let name = path.split(separator: "/").last.map(String.init) ?? path
    let item = Item(
        identifier: ItemIdentifier(path), parentIdentifier: .rootContainer, filename: name, kind: .file, size: size,
        version: ItemVersion(content: Data([1]), metadata: Data([1])))
    return ItemRecord(domainID: 1, item: item, path: path)
}

/// A descriptor whose dataless mark carries `key` (`nil`: none), and which counts the times
/// its mark was cleared.
struct FakeDescriptor: AccessedDescriptor {
    let key: UInt64?
    var clearFailure: Int32?
    let cleared = Mutex(0)

    init(key: UInt64?, clearFailure: Int32? = nil) {
        self.key = key
        self.clearFailure = clearFailure
    }

    func datalessKey() async throws(FileProviderError) -> UInt64? { key }

    func clearDatalessMark() async -> Int32? {
        cleared.withLock { $0 += 1 }
        return clearFailure
    }
}

/// Holds a task until opened, and tells when it got there.
final class Gate: Sendable {
    private let state = Mutex<
        (entered: Bool, open: Bool, waiters: [CheckedContinuation<Void, Never>], entry: [CheckedContinuation<Void, Never>])
    >(
        (false, false, [], []))

    /// Waits until ``open()``; the caller is "entered" meanwhile.
    func pass() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (resume, entry) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                state.entered = true
                defer { state.entry = [] }
                if state.open { return (true, state.entry) }
                state.waiters.append(continuation)
                return (false, state.entry)
            }
            for waiter in entry { waiter.resume() }
            if resume { continuation.resume() }
        }
    }

    /// Returns once a task is waiting in ``pass()``.
    func waitUntilEntered() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let entered = state.withLock { state -> Bool in
                if state.entered { return true }
                state.entry.append(continuation)
                return false
            }
            if entered { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// The engine's side of on-access, in memory: records by domain and path, and what was asked.
final class FakeEngine: OnAccessResolving {
    struct State: Sendable {
        var records: [String: ItemRecord] = [:]
        var present: [ProgressiveHydrator.FileKey: Range<Int64>] = [:]
        var fillError: FileProviderError?
        var fetchError: FileProviderError?
        var fetchCompletes = true
        var fillGate: Gate?
        var candidates: [ItemRecord] = []
        var batchGate: Gate?
        var batches: [[String]] = []
        var fills: [String] = []
        var fetches: [String] = []
        var completions: [String] = []
        var uses: [String] = []
        var opened: [ProgressiveHydrator.FileKey] = []
        var failures: [String: String] = [:]
        var evictionRequests = 0
        var flushes = 0
        /// Calls of anything but the read-only questions.
        var calls = 0
    }

    let state = Mutex(State())

    /// Puts `record` into the database of `domainID` at `path` (its own path by default).
    func add(_ record: ItemRecord, domainID: Int64, at path: String? = nil) {
        var record = record
        record.domainID = domainID
        if let path { record.path = path }
        state.withLock { $0.records["\(domainID):\(record.path)"] = record }
    }

    func item(domainID: Int64, path: String) async throws(FileProviderError) -> ItemRecord? {
        state.withLock {
            $0.calls += 1
            return $0.records["\(domainID):\(path)"]
        }
    }

    func fill(_ record: ItemRecord, domain: String) async throws(FileProviderError) {
        let gate = state.withLock { $0.fillGate }
        await gate?.pass()
        let error = state.withLock { state -> FileProviderError? in
            state.calls += 1
            if state.fillError == nil { state.fills.append("\(domain):\(record.path)") }
            return state.fillError
        }
        if let error { throw error }
    }

    func fetch(_ record: ItemRecord, domain: String, file: ProgressiveHydrator.FileKey, changeTime: Int64, range: Range<Int64>)
        async throws(FileProviderError) -> Bool
    {
        let (error, complete) = state.withLock { state -> (FileProviderError?, Bool) in
            state.calls += 1
            if state.fetchError == nil { state.fetches.append("\(domain):\(record.path):\(range)") }
            return (state.fetchError, state.fetchCompletes)
        }
        if let error { throw error }
        return complete
    }

    func complete(written record: ItemRecord, domain: String, file: ProgressiveHydrator.FileKey, changeTime: Int64)
        async throws(FileProviderError)
    {
        state.withLock {
            $0.calls += 1
            $0.completions.append("\(domain):\(record.path)")
        }
    }

    func isPresent(_ file: ProgressiveHydrator.FileKey, range: Range<Int64>, changeTime: Int64) -> Bool {
        state.withLock { $0.present[file].map { $0.lowerBound <= range.lowerBound && range.upperBound <= $0.upperBound } ?? false }
    }

    func isFetching(domain: String, path: String) -> Bool { false }

    func opened(_ file: ProgressiveHydrator.FileKey) { state.withLock { $0.opened.append(file) } }

    func readAheadCandidates(domainID: Int64, path: String) async throws(FileProviderError) -> (files: [ItemRecord], room: Int64) {
        (state.withLock { $0.candidates }, .max)
    }

    func fill(batch records: [ItemRecord], domain: String) async -> [Result<ItemRecord, FileProviderError>] {
        let gate = state.withLock { state in
            state.batches.append(records.map(\.path))
            return state.batchGate
        }
        await gate?.pass()
        return records.map { .success($0) }
    }

    func used(domainID: Int64, path: String) {
        state.withLock {
            $0.calls += 1
            $0.uses.append("\(domainID):\(path)")
        }
    }

    func recordFailure(_ message: String, domainID: Int64, path: String) async {
        state.withLock {
            $0.calls += 1
            $0.failures["\(domainID):\(path)"] = message
        }
    }

    func requestEviction() {
        state.withLock {
            $0.calls += 1
            $0.evictionRequests += 1
        }
    }

    func flushUses() async { state.withLock { $0.flushes += 1 } }
}
