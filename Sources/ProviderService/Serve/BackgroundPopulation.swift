import Foundation
import Logging
import ProviderCore
import ProviderEngine
import ProviderStore

/// `serve`'s background population of a domain's dataless folders: once the domain's first
/// sync is done, and whenever it has nothing else to do, the remaining dataless folders are
/// populated a few at a time, so a path used by name (`cat R/big/f1`) works in every folder
/// once serve has caught up, although the kernel raises no event for a lookup (see
/// Docs/Sync.md, "Dataless folders").
///
/// Nearest the root first, then the most recently used
/// (``MetadataStore/datalessFolderPaths(domainID:nearestFirst:)``); at most
/// ``foldersPerStep`` folders per step, read from the database per step, so memory stays bounded
/// whatever the domain's size. Each folder is one ``DomainController/populate(paths:recursive:)``:
/// the same locks as every population (a program's open, a sync waiting meanwhile, goes next),
/// one transaction per folder, so a `serve` that stops halfway leaves populated and dataless
/// folders, never a half-recorded one, and the next `serve` goes on where it stopped. Not for a
/// FUSE domain: its mount lists dataless folders from the database.
struct BackgroundPopulation: Sendable {
    /// The most folders one step populates before the domain's loop looks at its other work.
    static let foldersPerStep = 16

    let manager: ProviderManager
    let logger: Logger

    /// What one step did.
    enum Outcome: Sendable, Equatable {
        /// Dataless folders are left (populated `count` folders, maybe none when work came first).
        case more(populated: Int)
        /// No dataless folder is left.
        case done
        /// A folder could not be populated (logged); try again after the next sync.
        case failed
    }

    /// Populates up to ``foldersPerStep`` dataless folders of `controller`'s domain, one at a
    /// time; stops before the next folder as soon as `otherWork` says something else is due
    /// (a sync, a stop). Populated folders are told to `serve`'s ``DatalessWatcher`` through
    /// ``NewDatalessFolders``, which takes their marks away. Never throws: a failure is logged.
    func step(_ controller: DomainController, otherWork: @Sendable () -> Bool) async -> Outcome {
        // A FUSE domain's mount answers names and listings of dataless folders from the
        // database: writing them would only cost the disk (Docs/FUSE.md).
        if ReplicaLayouts.layout(of: controller.domain).listsDatalessFoldersFromDatabase { return .done }
        let (store, domainID, name) = (manager.store, controller.domainID, controller.domain.name)
        let paths: [String]
        do {
            paths = try await manager.blocking { () throws(FileProviderError) in
                try store.datalessFolderPaths(domainID: domainID, nearestFirst: Self.foldersPerStep)
            }
        } catch {
            logger.warning("\(name): cannot read its dataless folders: \(error.message)")
            return .failed
        }
        if paths.isEmpty { return .done }
        var populated = 0
        for path in paths {
            if otherWork() || Task.isCancelled { break }
            for outcome in await controller.populate(paths: [path], recursive: false) {
                if let error = outcome.error {
                    logger.warning(
                        "\(TerminalText.quoted(outcome.path)): not populated in the background: \(error.message); trying again after the next sync"
                    )
                    return .failed
                }
            }
            populated += 1
            let folders = manager.newDatalessFolders
            _ = try? await manager.blocking { () throws(FileProviderError) in folders.filled(domain: name, paths: [path]) }
        }
        return .more(populated: populated)
    }
}
