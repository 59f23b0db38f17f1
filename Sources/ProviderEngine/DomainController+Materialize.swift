import Foundation
import ProviderCore
import ProviderStore

extension DomainController {
    /// Downloads files (`startProvidingItem`): each into a staging file, checked for size, dated,
    /// renamed into place; the placeholder is removed and the new state recorded. Folders stand
    /// for the files directly in them, or below them with `recursive`.
    ///
    /// When the task is cancelled, no new download starts; running ones stop (a partial file is
    /// kept with a checkpoint where the store can resume it), what finished is recorded, and
    /// every file not downloaded gets a `cancelled` outcome.
    ///
    /// Never throws: each item's outcome says whether it worked; every item gets
    /// `providerDomainTemporarilyUnavailable` while the domain is disconnected (`domain
    /// disconnect`: nothing is fetched from its store until it is connected again).
    public func materialize(paths: [String], recursive: Bool, events: EventHandler? = nil) async -> [ItemOutcome] {
        do {
            _ = try await executor.run { () throws(FileProviderError) -> Bool in
                try self.checkConnected()
                return true
            }
        } catch {
            return paths.map { ItemOutcome(path: location($0), error: error) }
        }
        var outcomes: [ItemOutcome] = []
        var files: [ItemRecord] = []
        // Folders to show in the replica: the folders named and, with `recursive`, every folder
        // below them (empty ones too), besides the folders of the files.
        var folders: [String] = []
        for path in paths {
            do {
                let target = try record(at: path)
                if target.kind == .folder {
                    let inside =
                        recursive
                        ? try store.descendants(domainID: domainID, of: path)
                        : try store.children(domainID: domainID, parent: target.identifier)
                    files += inside.filter { $0.kind == .file }
                    folders.append(path)
                    if recursive { folders += inside.filter { $0.kind == .folder && $0.isDataless }.map(\.path) }
                } else if target.kind == .symlink {
                    outcomes.append(
                        ItemOutcome(
                            path: location(path),
                            error: FileProviderError(
                                .notSupported,
                                "a symlink to \(target.symlinkTarget ?? "?"); symlinks stay placeholders and are never followed")))
                } else {
                    files.append(target)
                }
            } catch {
                outcomes.append(ItemOutcome(path: location(path), error: error))
            }
        }
        // The folders are made first and populated after the downloads: a file about to be
        // downloaded then never gets a placeholder just to have it replaced (two new files on
        // disk per download instead of one; on a busy ext4 creating them cost as much as the
        // downloads). Populating adopts what was downloaded and writes placeholders for the rest.
        let parents = folders + files.map { Self.split($0.path).parent }
        do {
            try await makeFolders(parents)
        } catch {
            return outcomes + files.map { ItemOutcome(path: location($0.path), error: error) }
        }
        let downloaded = await downloader.download(files, events: events)
        // A file asked for is a file used: the newest for least-recently-used eviction.
        let identifiers = Dictionary(files.map { (location($0.path), $0.identifier) }, uniquingKeysWith: { first, _ in first })
        for outcome in downloaded where outcome.error == nil {
            if let identifier = identifiers[outcome.path] { useRecorder.used(domainID: domainID, identifier: identifier) }
        }
        outcomes += downloaded
        // Interrupted: the next run (or sync) populates the folders, adopting what was downloaded.
        if Task.isCancelled { return outcomes }
        do {
            try await populateFolders(parents)
        } catch {
            outcomes.append(ItemOutcome(path: location(parents.first ?? ""), error: error))
        }
        return outcomes
    }

    /// Makes these folders (relative paths) and the ones above them in the replica, so files
    /// can be downloaded into them; their records are not changed (a dataless folder stays
    /// dataless until it is populated).
    /// - Throws: `localIOFailure` naming the folder that could not be made.
    private func makeFolders(_ paths: [String]) async throws(FileProviderError) {
        let replica = self.replica
        let all = Set(
            paths.flatMap { path -> [String] in
                var prefixes: [String] = []
                var current = path
                while !current.isEmpty {
                    prefixes.append(current)
                    current = Self.split(current).parent
                }
                return prefixes
            }
        ).sorted { $0.utf8.count < $1.utf8.count }
        try await executor.run {
            for path in all { try replica.makeFolder(path) }
        }
    }

    /// The error of work a cancellation stopped before it started (or, for a batch, before it
    /// was done): code `cancelled`.
    public static let notStarted = FileProviderError(.cancelled, "interrupted before it was done")
}
