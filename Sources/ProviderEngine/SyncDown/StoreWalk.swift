import Foundation
import ProviderCore
import ProviderStore

/// Sync down's walk of the whole store: lists folders several at once (each listing task also
/// reads what the database has of its folder, on the engine's threads), compares each listing
/// with the database as it arrives and hands the differences to the ``FolderPlacer``. Memory
/// is bounded by the folders in flight and the pass's batches, not by the store.
struct StoreWalk: Sendable {
    let context: DomainContext
    let placer: FolderPlacer
    /// How many folders are listed at once.
    let depth: Int

    var domainID: Int64 { context.domainID }
    var replica: Replica { context.replica }
    func display(_ path: String) -> String { context.display(path) }

    /// One folder listed during the walk.
    private struct Listing: Sendable {
        var visit: FolderVisit
        var result: Result<ItemListing, FileProviderError>
        /// What the database had of the folder when it was listed.
        var stored: Result<StoredChildren, FileProviderError>
        /// Whether it comes back from waiting for its folder to be made (it holds no listing's
        /// place any more).
        var waitedForFolder = false

        /// The listing, taken out (this value keeps an empty one), so that its items can be
        /// moved out of it rather than copied; `nil` when listing failed.
        mutating func takeListing() -> ItemListing? {
            guard case .success(let listing) = result else { return nil }
            result = .success(ItemListing(items: []))
            return listing
        }
    }

    /// Walks the store from `root`, placing each folder's listing. A folder that cannot be
    /// listed is reported and its stored items kept (`pass.failedFolders`). Returns the time
    /// spent waiting for listings.
    /// - Throws: what the backend throws when the root cannot be listed; what placing throws
    ///   (`localIOFailure` when the database fails).
    func run(from root: ItemRecord, pass: inout PullPass, report: inout SyncReport, events: EventHandler?)
        async throws(FileProviderError) -> Double
    {
        var queue = FolderQueue([FolderVisit(record: root, isOnDisk: true, isNew: false)])
        var foldersListed = 0
        var itemsSeen = 0
        var rootError: FileProviderError?
        let (backend, context, hadItems) = (self.context.backend, self.context, pass.hadItems)
        let rootLength = replica.root.path.utf8.count
        var failure: FileProviderError?
        var listingSeconds = 0.0
        // A store with a flat listing is listed at once into a spool, and each folder's listing
        // read from there (below the root, or when the flat listing fails: folder by folder).
        let flatStarted = Date()
        let spool = root.path.isEmpty ? await flatListing(report: &report, events: events) : nil
        listingSeconds += spool == nil ? 0 : Date().timeIntervalSince(flatStarted)
        defer { spool?.remove() }
        let rootIdentifier = root.identifier
        await withTaskGroup(of: Listing.self) { group in
            var running = 0
            while true {
                while failure == nil, running < depth, let visit = queue.pop() {
                    running += 1
                    let readsStored = hadItems || !visit.isNew
                    group.addTask {
                        let result: Result<ItemListing, FileProviderError>
                        do {
                            if let spool {
                                let identifier = visit.record.identifier
                                let parents = identifier == rootIdentifier ? [identifier, .rootContainer] : [identifier]
                                var listing = ItemListing(
                                    items: try await context.blocking { () throws(FileProviderError) in try spool.listing(of: parents) })
                                if identifier == rootIdentifier { listing.refused = spool.refused }
                                result = .success(listing)
                            } else {
                                result = .success(try await backend.listAllItems(in: visit.record.identifier))
                            }
                        } catch {
                            return Listing(visit: visit, result: .failure(FileProviderError.wrap(error)), stored: .success(.none))
                        }
                        // What the database has of the folder is read here, on the engine's
                        // threads, beside the other listings: the walk's loop only compares.
                        let stored = await StoredChildren.read(
                            of: visit, listing: try? result.get(), rootLength: rootLength, context,
                            children: readsStored, moves: hadItems)
                        return Listing(visit: visit, result: result, stored: stored)
                    }
                }
                let waitStarted = Date()
                guard var listing = await group.next() else { break }
                listingSeconds += Date().timeIntervalSince(waitStarted)
                if listing.waitedForFolder { listing.waitedForFolder = false } else { running -= 1 }
                if failure != nil { continue }
                if let slot = listing.visit.creation, !slot.isDone {
                    // Its folder is still being made: set aside until it is, without holding a
                    // listing's place, while the walk goes on with the listings that are ready.
                    let aside = listing
                    group.addTask {
                        _ = await slot.result()
                        var ready = aside
                        ready.waitedForFolder = true
                        return ready
                    }
                    continue
                }
                foldersListed += 1
                if let items = listing.takeListing() {
                    itemsSeen += items.items.count
                    do throws(FileProviderError) {
                        // Listed in path order (FolderQueue), so rows reach the database
                        // mostly in key order.
                        queue.push(
                            contentsOf: try await take(
                                listing.visit, listing: items, stored: try listing.stored.get(), pass: &pass, report: &report))
                    } catch {
                        failure = error
                    }
                } else if case .failure(let error) = listing.result {
                    guard await placer.settle(&listing.visit, pass: &pass, report: &report) else { continue }
                    let path = listing.visit.record.path
                    // A new folder not listed is still recorded (dataless, as found).
                    if listing.visit.recordPending { pass.queuePendingFolder(listing.visit.record) }
                    if path.isEmpty { rootError = error }
                    pass.failedFolders.append(path)
                    report.skip(path, "not listed: \(error.message)", notice: "\(display(path)): not listed: \(error.message)")
                    if error.code.reaction == .backOffDomain, report.unreachable == nil {
                        report.unreachable = "\(display(path)): not listed: \(error.message)"
                    }
                }
                events?(.listing(folders: foldersListed, items: itemsSeen))
            }
        }
        // The folders made while they were listed: none is left being made after the walk.
        await pass.lastCreation?.wait()
        pass.lastCreation = nil
        if let rootError { throw rootError }
        if let failure { throw failure }
        report.listedItems = itemsSeen
        return listingSeconds
    }

    /// Lists the whole store into a ``ListingSpool`` when it has a flat listing
    /// (``FlatListing``), page after page; `nil` when it has none or the flat listing fails (a
    /// notice says why: the walk then lists folder by folder).
    private func flatListing(report: inout SyncReport, events: EventHandler?) async -> ListingSpool? {
        guard let checked = context.backend as? CheckedBackend, checked.listsFlat else { return nil }
        let staging = replica.staging
        let spool: ListingSpool
        do {
            spool = try await context.blocking { () throws(FileProviderError) -> ListingSpool in
                ListingSpool.removeLeftovers(in: staging)
                return try ListingSpool(in: staging)
            }
        } catch {
            report.notices.append("\(display("")): listing folder by folder: \(error.message)")
            return nil
        }
        var page: Page? = .initialPageSortedByName
        var pages = 0
        do throws(FileProviderError) {
            while let current = page {
                let result = try await checked.enumerateAllItems(startingAt: current)
                let count = try await context.blocking { () throws(FileProviderError) -> Int in
                    try spool.add(result)
                    return spool.itemCount
                }
                pages += 1
                events?(.listing(folders: 0, items: count))
                page = result.nextPage
            }
        } catch {
            spool.remove()
            report.notices.append(
                "\(display("")): the flat listing failed after \(pages) pages (\(error.message)); listing folder by folder")
            return nil
        }
        report.flatListingPages = pages
        return spool
    }

    /// Applies one folder's listing: compares it with the folder's stored children, writes what
    /// changed into the replica (when the folder is populated) and queues the records. Returns
    /// the subfolders to list next.
    ///
    /// An entry the store sent with an impossible value, a folder listed inside itself, and an
    /// item deeper or with a longer path than ``WalkBounds`` allows are skipped with a notice; a
    /// stored item of the same identifier is kept as it was (with what is below it).
    ///
    /// A folder whose listing is the one its rows were last made to match
    /// (``StoredChildren/isUnchanged``) is not compared: only its subfolders are visited. When
    /// the listing is taken in full and leaves nothing aside (no notice, nothing gone or moved
    /// in, no folder that failed), its digest is kept with the pass's records.
    private func take(
        _ visit: FolderVisit, listing: consuming ItemListing, stored known: StoredChildren, pass: inout PullPass,
        report: inout SyncReport
    )
        async throws(FileProviderError) -> [FolderVisit]
    {
        var visit = visit
        guard await placer.settle(&visit, pass: &pass, report: &report) else { return [] }
        let folder = visit.record
        pass.listedFolders.insert(folder.identifier)
        let inRoot = folder.path.isEmpty
        let ancestors = visit.ancestors + [folder.identifier]
        let rootLength = replica.root.path.utf8.count
        var known = known
        if known.isUnchanged {
            // A pinned folder still dataless is populated by the full comparison. (A folder new
            // in this sync is never read as unchanged: StoredChildren trusts no digest for it.)
            if !folder.isDataless || !pass.isPinned(folder),
                let subfolders = Self.unchangedSubfolders(of: visit, listing: listing, stored: known.children, ancestors: ancestors)
            {
                report.unchangedFolders += 1
                return subfolders
            }
            known = try await StoredChildren.read(
                of: visit, listing: listing, rootLength: rootLength, context, children: true, moves: pass.hadItems,
                trustsDigest: false
            ).get()
        }
        var stored = [ItemIdentifier: ItemRecord](minimumCapacity: known.children.count)
        for child in known.children { stored[child.identifier] = child }
        // Whether the listing is taken in full, with nothing left aside: then its digest is kept.
        let noticesBefore = report.notices.count
        let failedBefore = pass.failedFolders.count
        var leftAside = !listing.refused.isEmpty || !known.elsewhere.isEmpty
        /// Skips an entry: reported, and what the database has of it stays as it is.
        func skip(_ identifier: ItemIdentifier?, _ problem: String) {
            report.skip(folder.path, problem, notice: "\(display(folder.path)): skipped an item: \(problem)")
            guard let identifier, let kept = stored.removeValue(forKey: identifier) else { return }
            if kept.kind == .folder { pass.failedFolders.append(kept.path) }
        }
        for refused in listing.refused { skip(refused.identifier, refused.message) }

        // What the listing holds, matched with what the database knows.
        // The items are moved out of the listing one by one, in order (reversed, then taken
        // from the end), not copied and released: a first sync takes a million.
        var items: [Item] = []
        swap(&items, &listing.items)
        items.reverseByMoving()
        var entries: [FolderPlacer.Entry] = []
        entries.reserveCapacity(items.count)
        var names = Set<String>(minimumCapacity: items.count)
        var opaqueIdentifiers = false
        var mustHold = false
        while var item = items.popLast() {
            let name = item.filename
            if let problem = Replica.problem(withRemoteName: name, inRoot: inRoot) {
                report.skip(
                    inRoot ? name : folder.path + "/" + name, problem, notice: "\(display(folder.path)): skipped an item: \(problem)")
                continue
            }
            // String equality is canonical (NFC and NFD spellings are equal) while names are
            // bytes: only a name equal by bytes is a second item.
            if !names.insert(name).inserted, entries.contains(where: { $0.item.filename.utf8.elementsEqual(name.utf8) }) {
                report.skip(
                    folder.path, "a second item named \(name.debugDescription)",
                    notice: "\(display(folder.path)): skipped a second item named \(name.debugDescription)")
                continue
            }
            let path = inRoot ? name : Self.childPath(name, in: folder.path, identifier: item.identifier.rawValue)
            // An identifier that is the item's path is unique with its name (the usual case for
            // stores that name items by path); others are checked below.
            if !opaqueIdentifiers, path != item.identifier.rawValue { opaqueIdentifiers = true }
            if let problem = WalkBounds.problem(listing: item, inside: ancestors)
                ?? WalkBounds.problem(placing: item.kind, at: path, rootLength: rootLength)
            {
                // The folder itself (listed inside itself) is not skipped from its own place.
                skip(ancestors.contains(item.identifier) ? nil : item.identifier, problem)
                continue
            }
            item.parentIdentifier = folder.identifier
            // (Nothing stored, as in a first sync: no key is hashed.)
            var old = stored.isEmpty ? nil : stored.removeValue(forKey: item.identifier)
            if old == nil, !known.elsewhere.isEmpty, let elsewhere = known.elsewhere[item.identifier] {
                // Moved here from another folder under the same identifier.
                old = elsewhere
                pass.movedIn.insert(item.identifier)
            }
            if let known = old, known.kind != item.kind {
                pass.gone.append(known)
                pass.movedIn.remove(item.identifier)
                old = nil
                leftAside = true
            }
            if let known = old, FolderPlacer.mustHold(known) { mustHold = true }
            entries.append((item, path, old))
        }
        if opaqueIdentifiers {
            // Two items of one identifier: the database would keep one record and the replica
            // both placeholders. The first is taken, the others skipped.
            var identifiers = Set<ItemIdentifier>(minimumCapacity: entries.count)
            var unique: [FolderPlacer.Entry] = []
            unique.reserveCapacity(entries.count)
            entries.reverseByMoving()
            while let entry = entries.popLast() {
                if identifiers.insert(entry.item.identifier).inserted {
                    unique.append(entry)
                } else {
                    let problem =
                        "\(entry.item.filename.debugDescription) has the identifier \(TerminalText.quoted(entry.item.identifier.rawValue)) of another item of the listing"
                    report.skip(folder.path, problem, notice: "\(display(folder.path)): skipped an item: \(problem)")
                }
            }
            entries = unique
        }
        // (Nothing stored, as in a first sync: no entry is looked at again.)
        if !stored.isEmpty, entries.contains(where: { $0.old == nil }) {
            let pairing = FolderPlacer.pairReplaced(&entries, gone: Array(stored.values))
            for identifier in pairing.paired { stored[identifier] = nil }
            if pairing.mustHold { mustHold = true }
        }
        if !stored.isEmpty { leftAside = true }
        pass.gone += stored.values
        var placed = visit
        let replacedBefore = pass.replaced.count
        let subfolders = try await placer.place(
            consume entries, mustHold: mustHold, in: &placed, complete: true, pass: &pass, report: &report)
        try await placer.reparentReplacedFolders(pass.replaced[replacedBefore...])
        if !leftAside, report.notices.count == noticesBefore, pass.failedFolders.count == failedBefore,
            let digest = known.entriesDigest
        {
            // Kept after the records just queued, in the same or a later transaction. A digest
            // says the folder's rows match its listing: while the records of new subfolders
            // wait for their own listings, it waits for the last of them (a crash before
            // would leave them unrecorded under a folder taken for unchanged).
            let sealed = ListingDigest.seal(digest, folder: placed.record, ancestors: visit.ancestors, rootLength: rootLength)
            let kept = FolderListing(identifier: folder.identifier, digest: sealed)
            let pending = subfolders.count { $0.recordPending }
            if pending > 0 {
                pass.digestsAwaitingSubfolders[folder.identifier] = (kept, pending)
            } else {
                pass.listings.append(kept)
            }
        }
        return subfolders.map { subfolder in
            var subfolder = subfolder
            subfolder.ancestors = ancestors
            return subfolder
        }
    }

    /// The visits of an unchanged folder's subfolders, from their stored records in the order
    /// listed; `nil` when the stored subfolders are not exactly the listed ones (then the folder
    /// is compared in full).
    private static func unchangedSubfolders(
        of visit: FolderVisit, listing: ItemListing, stored: [ItemRecord], ancestors: [ItemIdentifier]
    ) -> [FolderVisit]? {
        var byIdentifier = [ItemIdentifier: ItemRecord](minimumCapacity: stored.count)
        for record in stored { byIdentifier[record.identifier] = record }
        var visits: [FolderVisit] = []
        visits.reserveCapacity(stored.count)
        for item in listing.items where item.kind == .folder {
            guard let record = byIdentifier.removeValue(forKey: item.identifier) else { return nil }
            visits.append(FolderVisit(record: record, isOnDisk: !visit.record.isDataless, isNew: false, ancestors: ancestors))
        }
        return byIdentifier.isEmpty ? visits : nil
    }

    /// `folder/name`; the item's identifier itself when it is that path (stores that name items
    /// by path), so the record holds one string for both instead of a second one made per item.
    static func childPath(_ name: String, in folder: String, identifier: String) -> String {
        let reused = identifier.utf8.withContiguousStorageIfAvailable { id in
            folder.utf8.withContiguousStorageIfAvailable { parent in
                name.utf8.withContiguousStorageIfAvailable { child in
                    id.count == parent.count + 1 + child.count && id[parent.count] == UInt8(ascii: "/")
                        && id[..<parent.count].elementsEqual(parent) && id[(parent.count + 1)...].elementsEqual(child)
                }
            }
        }
        if reused == true { return identifier }
        return folder + "/" + name
    }
}
