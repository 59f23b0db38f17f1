import Foundation
import LocalAdapter
import ProviderCore
import ProviderEngine
import ProviderStore
import Testing

/// Two "machines" (two homes, two managers) with a domain each on the same local store folder,
/// and a third hand editing the store folder directly. A seeded random sequence of edits on all
/// three, synced at random moments, must converge: both replicas equal the store, no temporary
/// files are left, and every byte string a user ever wrote still exists somewhere unless a user
/// knowingly replaced or deleted it.
@Suite struct ConvergenceTests {
    /// `CHAOS_SEEDS=5,6,7` runs others (`CHAOS_STEPS` sets the steps). 13 and 17 once left
    /// placeholders no item owned (a placeholder moved away or copied, one left beside a file
    /// that took over its item) and stay as regression seeds.
    static let seeds = chaosSeeds(default: [1, 2, 3, 4, 13, 17])

    @Test(arguments: seeds)
    func twoDevicesOnALocalStoreConverge(seed: UInt64) async throws {
        try await ChaosWorld.experiment(seed: seed, steps: chaosSetting("CHAOS_STEPS", default: 220))
    }
}

/// The store of one experiment: a folder the store actor edits directly, and how the two
/// devices' domains reach it.
struct ChaosStore {
    /// `local`, `sftp`: names the log file.
    var label: String
    /// The folder the store serves.
    var root: URL
    var kind: String
    var options: [String: String]
    var registry: BackendRegistry
    /// A backend on the store, to read the versions placeholders carry.
    var backend: any Backend
    /// The store's versions see only whole seconds and sizes (SFTP version 3 has no inode and
    /// no sub-second times): a direct edit of the store then gets a modification time later
    /// than any the file had, as a second edit in the same second would be invisible to any
    /// size-and-time sync tool.
    var secondsOnlyVersions = false

    /// A local folder under `folder`, served by the local backend.
    static func local(in folder: URL) throws -> ChaosStore {
        let root = folder.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return ChaosStore(
            label: "local", root: root, kind: "local", options: ["root": root.path], registry: BackendRegistry([LocalBackend.descriptor]),
            backend: try LocalBackend(rootPath: root.path, threads: 1))
    }
}

/// The experiment of one seed.
final class ChaosWorld {
    enum Actor: CustomStringConvertible {
        case device(Int)
        case store

        var description: String {
            switch self {
            case .device(let index): return index == 0 ? "A" : "B"
            case .store: return "S"
            }
        }
    }

    /// What is at a path, as a user sees it.
    enum Kind {
        case file, placeholder, folder
    }

    struct Device {
        let name: String
        let home: URL
        let manager: ProviderManager
        let controller: DomainController
        var root: URL { controller.replica.root }
    }

    let seed: UInt64
    var rng: SeededGenerator
    let folder: URL
    let store: ChaosStore
    var storeRoot: URL { store.root }
    var storeBackend: any Backend { store.backend }
    /// The latest modification time (seconds) given to a direct store edit (``ChaosStore/secondsOnlyVersions``).
    var storeClock = 0
    var devices: [Device] = []
    /// Every byte string a user wrote, with where and when.
    var written: [Data: String] = [:]
    /// Byte strings a user replaced or deleted while looking at them: these may be gone.
    var discarded = Set<Data>()
    /// Contents of every file version the store ever listed, by path and content version (hex)
    /// and by content version alone, so a placeholder's contents are known. (Versions made of a
    /// size and a time in seconds are not unique across paths; the path tells them apart.)
    var versions: [String: Data] = [:]
    var log: [String] = []
    /// The first moment each lost byte string vanished from the store and both replicas.
    var vanished: [Data: String] = [:]
    var writes = 0
    var syncs = 0

    /// A world over the store `makeStore` makes in the experiment's folder (default: a local one).
    init(seed: UInt64, store makeStore: (URL) throws -> ChaosStore = ChaosStore.local(in:)) async throws {
        self.seed = seed
        rng = SeededGenerator(seed: seed)
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-chaos-\(seed)-\(UUID().uuidString)")
            .resolvingSymlinksInPath()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        store = try makeStore(folder)
        for name in ["A", "B"] {
            let home = folder.appendingPathComponent("machine-\(name)")
            let manager = try ProviderManager(home: home, registry: store.registry)
            try await manager.addDomain(name: "shared", kind: store.kind, options: store.options)
            let controller = try await manager.controller(for: "shared")
            devices.append(Device(name: name, home: home, manager: manager, controller: controller))
        }
    }

    /// Runs one seed: the random steps, then the checks; an error is recorded with the seed and
    /// the last steps.
    static func experiment(seed: UInt64, steps: Int, store: (URL) throws -> ChaosStore = ChaosStore.local(in:)) async throws {
        let world = try await ChaosWorld(seed: seed, store: store)
        do {
            try await world.run(steps: steps)
            try await world.settleAndCheck()
        } catch {
            Issue.record("seed \(seed): \(error)\n\(world.tail())")
        }
        await world.tearDown()
    }

    func tearDown() async {
        for device in devices { await device.manager.close() }
        await storeBackend.close()
        try? FileManager.default.removeItem(at: folder)
    }

    func tail(_ count: Int = 12) -> String {
        let full = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-chaos-\(store.label)-seed-\(seed).log")
        try? log.joined(separator: "\n").write(to: full, atomically: true, encoding: .utf8)
        return "full log: \(full.path)\nlast steps of seed \(seed) (replay with CHAOS_SEEDS=\(seed)):\n" + log.suffix(count).joined(separator: "\n")
    }

    func note(_ line: String) { log.append(line) }

    // MARK: The random steps

    func run(steps: Int) async throws {
        for step in 0..<steps {
            let actor: Actor = [Actor.device(0), .device(1), .store][rng.weighted([4, 4, 2])]
            try await perform(step: step, actor: actor)
            checkPresence(after: "step \(step)")
            if rng.chance(35) {
                switch rng.weighted([2, 2, 3]) {
                case 0: try await sync(0)
                case 1: try await sync(1)
                default:
                    let first = Int.random(in: 0...1, using: &rng)
                    try await sync(first)
                    try await sync(1 - first)
                }
            }
        }
    }

    func root(of actor: Actor) -> URL {
        switch actor {
        case .device(let index): return devices[index].root
        case .store: return storeRoot
        }
    }

    /// What a user of `actor` sees: files, placeholders (replicas only) and folders.
    func entries(of actor: Actor) -> [(path: String, kind: Kind)] {
        var result: [(String, Kind)] = []
        let isReplica: Bool
        if case .store = actor { isReplica = false } else { isReplica = true }
        func walk(_ url: URL, _ prefix: String) {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
            for name in names {
                if name.hasPrefix(".fp-tmp-") || name.hasPrefix(".fileprovider-staging") || name.hasPrefix(".chaos-") { continue }
                let child = url.appendingPathComponent(name)
                let relative = prefix.isEmpty ? name : prefix + "/" + name
                switch entry(at: child) {
                case .folder:
                    result.append((relative, .folder))
                    walk(child, relative)
                case .file:
                    if isReplica && name.hasSuffix(".placeholder") {
                        result.append((String(relative.dropLast(".placeholder".count)), .placeholder))
                    } else {
                        result.append((relative, .file))
                    }
                default: continue
                }
            }
        }
        walk(root(of: actor), "")
        return result
    }

    func url(_ actor: Actor, _ path: String, _ kind: Kind) -> URL {
        let base = root(of: actor).appendingPathComponent(path)
        return kind == .placeholder ? URL(fileURLWithPath: base.path + ".placeholder") : base
    }

    /// The bytes a user of `actor` sees at an entry (all files below a folder).
    func seenContents(_ actor: Actor, _ path: String, _ kind: Kind) -> [Data] {
        switch kind {
        case .file:
            return (try? Data(contentsOf: url(actor, path, .file))).map { [$0] } ?? []
        case .placeholder:
            guard let metadata = try? placeholder(at: url(actor, path, .placeholder)) else { return [] }
            return (versions[path + "\u{0}" + metadata.contentVersion] ?? versions[metadata.contentVersion]).map { [$0] } ?? []
        case .folder:
            return entries(of: actor).filter { $0.path.hasPrefix(path + "/") && $0.kind != .folder }
                .flatMap { seenContents(actor, $0.path, $0.kind) }
        }
    }

    static let stems = ["a", "notes", "my file", "résumé", "日本語", "emoji 🎉", "x y", "Ωmega"]
    static let extensions = [".txt", ".bin", "", ".md"]
    static let folderNames = ["dir", "sub folder", "Ordner ä", "文件夹"]

    func randomFileName() -> String {
        Self.stems.randomElement(using: &rng)! + Self.extensions.randomElement(using: &rng)!
    }

    /// A new byte string, unique by its first line.
    func newContents(_ actor: Actor, _ step: Int, _ path: String) -> Data {
        writes += 1
        let size = rng.chance(10) ? Int.random(in: 40_000...200_000, using: &rng) : Int.random(in: 0...3000, using: &rng)
        let data = Data("w\(writes) by \(actor) at step \(step)\n".utf8) + randomBytes(size, using: &rng)
        written[data] = "w\(writes) by \(actor) at step \(step) to \(path)"
        return data
    }

    func exists(_ actor: Actor, _ path: String) -> Bool {
        let base = root(of: actor).appendingPathComponent(path)
        return entry(at: base) != .none || entry(at: URL(fileURLWithPath: base.path + ".placeholder")) != .none
    }

    /// A folder (or the root, "") of `actor`.
    func randomFolder(_ actor: Actor) -> String {
        let folders = [""] + entries(of: actor).filter { $0.kind == .folder }.map(\.path)
        return folders.randomElement(using: &rng)!
    }

    func join(_ parent: String, _ name: String) -> String { parent.isEmpty ? name : parent + "/" + name }

    /// Writes bytes: atomically (a new inode, as editors save) or in place.
    func write(_ data: Data, to target: URL, atomically: Bool) throws {
        if atomically {
            let temporary = target.deletingLastPathComponent().appendingPathComponent(".chaos-\(UUID().uuidString)")
            try data.write(to: temporary)
            guard rename(temporary.path, target.path) == 0 else { throw POSIXError(.EIO) }
        } else {
            let handle = try FileHandle(forWritingTo: target)
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: data)
            try handle.close()
        }
    }

    /// A file's modification time in whole seconds, or `nil`.
    func modificationSeconds(_ target: URL) -> Int? {
        var info = stat()
        return lstat(target.path, &info) == 0 ? Int(info.st_mtim.tv_sec) : nil
    }

    /// Gives a direct store edit a modification time later than the file's previous one and
    /// than every earlier store edit, where the store's versions see only seconds.
    func stampStoreEdit(_ target: URL, previous: Int?) throws {
        guard store.secondsOnlyVersions else { return }
        storeClock = max(storeClock + 1, (previous ?? 0) + 1, Int(Date().timeIntervalSince1970))
        var times = [timespec(tv_sec: storeClock, tv_nsec: 0), timespec(tv_sec: storeClock, tv_nsec: 0)]
        guard utimensat(AT_FDCWD, target.path, &times, 0) == 0 else { throw POSIXError(.EIO) }
    }

    func perform(step: Int, actor: Actor) async throws {
        let all = entries(of: actor)
        let files = all.filter { $0.kind != .folder }
        let realFiles = all.filter { $0.kind == .file }
        let folders = all.filter { $0.kind == .folder }
        let isStore: Bool
        if case .store = actor { isStore = true } else { isStore = false }
        // create, overwrite, append, move, delete file, mkdir, delete folder, materialize, evict, pin
        let weights = [7, 4, 2, 4, 3, 2, 1, isStore ? 0 : 3, isStore ? 0 : 2, isStore ? 0 : 1]
        switch rng.weighted(weights) {
        case 0:
            let path = join(randomFolder(actor), randomFileName())
            if exists(actor, path) { return }
            let data = newContents(actor, step, path)
            try data.write(to: url(actor, path, .file))
            if isStore { try stampStoreEdit(url(actor, path, .file), previous: nil) }
            note("\(step) \(actor) create \(path) \(describe(data))")
        case 1:
            guard let target = files.randomElement(using: &rng) else { return }
            if target.kind == .placeholder, entry(at: url(actor, target.path, .file)) != .none { return }
            let old = seenContents(actor, target.path, target.kind)
            let data = newContents(actor, step, target.path)
            let atomically = target.kind == .placeholder || rng.chance(60)
            let previous = modificationSeconds(url(actor, target.path, .file))
            try write(data, to: url(actor, target.path, .file), atomically: atomically)
            if isStore { try stampStoreEdit(url(actor, target.path, .file), previous: previous) }
            discarded.formUnion(old)
            note("\(step) \(actor) overwrite \(target.path) (\(target.kind)\(atomically ? ", atomic" : "")) \(describe(data)) replacing \(old.map(describe))")
        case 2:
            guard let target = realFiles.randomElement(using: &rng) else { return }
            let fileURL = url(actor, target.path, .file)
            let old = try Data(contentsOf: fileURL)
            let extra = randomBytes(Int.random(in: 1...500, using: &rng), using: &rng)
            let previous = modificationSeconds(fileURL)
            let handle = try FileHandle(forWritingTo: fileURL)
            try handle.seekToEnd()
            try handle.write(contentsOf: extra)
            try handle.close()
            if isStore { try stampStoreEdit(fileURL, previous: previous) }
            let data = old + extra
            writes += 1
            written[data] = "append w\(writes) by \(actor) at step \(step) to \(target.path)"
            discarded.insert(old)
            note("\(step) \(actor) append \(target.path) \(describe(old)) +\(extra.count)")
        case 3:
            guard let source = all.randomElement(using: &rng) else { return }
            let parent = randomFolder(actor)
            if source.kind == .folder && (parent == source.path || parent.hasPrefix(source.path + "/")) { return }
            let name = source.kind == .folder ? Self.folderNames.randomElement(using: &rng)! : randomFileName()
            let destination = join(parent, name)
            if exists(actor, destination) { return }
            let to = url(actor, destination, source.kind)
            guard rename(url(actor, source.path, source.kind).path, to.path) == 0 else { throw POSIXError(.EIO) }
            note("\(step) \(actor) move \(source.path) (\(source.kind)) -> \(destination)")
        case 4:
            guard let target = files.randomElement(using: &rng) else { return }
            discarded.formUnion(seenContents(actor, target.path, target.kind))
            try FileManager.default.removeItem(at: url(actor, target.path, target.kind))
            note("\(step) \(actor) delete \(target.path) (\(target.kind))")
        case 5:
            let path = join(randomFolder(actor), Self.folderNames.randomElement(using: &rng)!)
            if exists(actor, path) { return }
            try FileManager.default.createDirectory(at: url(actor, path, .folder), withIntermediateDirectories: false)
            note("\(step) \(actor) mkdir \(path)")
        case 6:
            guard let target = folders.randomElement(using: &rng) else { return }
            discarded.formUnion(seenContents(actor, target.path, .folder))
            try FileManager.default.removeItem(at: url(actor, target.path, .folder))
            note("\(step) \(actor) rm -r \(target.path)")
        case 7:
            guard case .device(let index) = actor, let target = all.randomElement(using: &rng) else { return }
            let outcomes = await devices[index].controller.materialize(paths: [target.path], recursive: rng.chance(50))
            note("\(step) \(actor) materialize \(target.path): \(outcomes.compactMap { $0.error?.code.name })")
        case 8:
            guard case .device(let index) = actor, let target = all.randomElement(using: &rng) else { return }
            let outcomes = await devices[index].controller.evict(paths: [target.path], recursive: rng.chance(50))
            note("\(step) \(actor) evict \(target.path): \(outcomes.compactMap { $0.error?.code.name })")
        default:
            guard case .device(let index) = actor, let target = all.randomElement(using: &rng) else { return }
            let outcomes = await devices[index].controller.pin(paths: [target.path])
            note("\(step) \(actor) pin \(target.path): \(outcomes.compactMap { $0.error?.code.name })")
        }
    }

    // MARK: Syncing

    @discardableResult
    func sync(_ index: Int) async throws -> SyncReport {
        syncs += 1
        let report = try await devices[index].controller.sync()
        note(
            "   sync \(devices[index].name): up \(report.uploaded) added \(report.added) updated \(report.updated) moved \(report.moved) "
                + "deleted \(report.deleted) down \(report.downloaded) conflicts \(report.conflicts)"
                + (report.notices.isEmpty ? "" : " notices \(report.notices)"))
        try await recordStoreVersions()
        checkPresence(after: "sync \(devices[index].name) #\(syncs)")
        return report
    }

    /// Remembers the contents of every file version now in the store.
    func recordStoreVersions() async throws {
        for (path, data) in snapshot(of: storeRoot) {
            guard let data, !path.split(separator: "/").last!.hasPrefix(".fileprovider-staging") else { continue }
            let item = try await storeBackend.item(for: ItemIdentifier(path))
            versions[item.version.content.hexString] = data
            versions[path + "\u{0}" + item.version.content.hexString] = data
        }
    }

    /// Notes byte strings that are now nowhere (store or either replica) though nobody
    /// discarded them, so a failure points at the step or sync that lost them.
    func checkPresence(after event: String) {
        var present = Set<Data>()
        for root in [storeRoot] + devices.map(\.root) {
            for case let data? in snapshot(of: root).values { present.insert(data) }
        }
        for (data, origin) in written where vanished[data] == nil && !discarded.contains(data) && !present.contains(data) {
            vanished[data] = event
            note("!! \(origin) vanished after \(event)")
        }
    }

    static func isQuiet(_ report: SyncReport) -> Bool {
        report.uploaded == 0 && report.added == 0 && report.updated == 0 && report.moved == 0 && report.deleted == 0
            && report.downloaded == 0 && report.conflicts == 0 && report.pendingLocal.isEmpty
    }

    /// Syncs both devices until a round changes nothing; returns whether that happened.
    func converge(rounds: Int = 12) async throws -> Bool {
        for _ in 0..<rounds {
            let a = try await sync(0)
            let b = try await sync(1)
            if Self.isQuiet(a) && Self.isQuiet(b) { return true }
        }
        return false
    }

    func settleAndCheck() async throws {
        note("-- settle")
        let quiet = try await converge()
        #expect(quiet, "seed \(seed): no quiet round after 12 rounds of syncing\n\(tail())")
        for device in devices {
            let outcomes = await device.controller.materialize(paths: [""], recursive: true)
            let failed = outcomes.filter { $0.error != nil }
            #expect(failed.isEmpty, "seed \(seed): materializing \(device.name) failed: \(failed.map { "\($0.path): \($0.error!.message)" })")
        }
        let quietAgain = try await converge()
        #expect(quietAgain, "seed \(seed): no quiet round after materializing everything\n\(tail())")

        let store = snapshot(of: storeRoot)
        for device in devices {
            let replica = snapshot(of: device.root)
            let missing = Set(store.keys).subtracting(replica.keys).sorted()
            let extra = Set(replica.keys).subtracting(store.keys).sorted()
            let differing = store.keys.filter { replica[$0] != nil && replica[$0]! != store[$0]! }.sorted()
            if !(missing.isEmpty && extra.isEmpty && differing.isEmpty) {
                print("seed \(seed): replica \(device.name): missing \(missing), extra \(extra), different \(differing)")
            }
            #expect(
                missing.isEmpty && extra.isEmpty && differing.isEmpty,
                "seed \(seed): replica \(device.name) differs from the store: missing \(missing), extra \(extra), different \(differing)\n\(tail())")
            #expect(strayTemporaryFiles(in: device.root).isEmpty, "seed \(seed): temporary files in replica \(device.name): \(strayTemporaryFiles(in: device.root))")
            let left = device.controller.replica.stagedFiles()
            #expect(left.isEmpty, "seed \(seed): staging files left on \(device.name): \(left)")
            #expect(try device.manager.store.integrityCheck() == "ok", "seed \(seed)")
            let unfinished = try device.manager.store.unfinishedOperations(domainID: device.controller.domainID)
            #expect(unfinished.isEmpty, "seed \(seed): unfinished journal entries on \(device.name): \(unfinished.map(\.templateIdentifier))")
        }
        #expect(strayTemporaryFiles(in: storeRoot).isEmpty, "seed \(seed): temporary files in the store: \(strayTemporaryFiles(in: storeRoot))")

        let present = Set(store.values.compactMap { $0 })
        let lost = written.filter { !discarded.contains($0.key) && !present.contains($0.key) }
            .map { "\($0.value) (vanished after \(vanished[$0.key] ?? "?"))" }.sorted()
        #expect(lost.isEmpty, "seed \(seed): \(lost.count) written contents are nowhere: \(lost)\n\(tail())")
        let conflicted = store.keys.filter { $0.contains("conflicted copy") }.count
        print("convergence seed \(seed): \(log.count) log lines, \(writes) writes, \(syncs) syncs, \(store.count) items, \(conflicted) conflicted copies, \(discarded.count) discarded")
    }
}
