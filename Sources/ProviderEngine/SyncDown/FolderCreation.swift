import ProviderCore

/// The new subfolders one populated folder's listing brought, being made in the replica on the
/// engine's threads while the walk goes on. The walk lists them meanwhile (listing the store
/// needs nothing on disk) and places a folder's items once it is made
/// (``FolderPlacer/settle(_:pass:report:)``). One creation runs at a time, in the order they
/// were started (a folder's parent is made before it). On an ext4 without a journal (this
/// project's test machines) a `mkdir` costs 130–300 µs: the kernel skips every free inode
/// deleted in the last minute. Waited for in the walk, the 250 folders a first sync makes within
/// its population budget left the store's listings idle for a tenth of a first sync of 100,000
/// items, the first levels of a tree having few folders to list.
struct FolderCreation: Sendable {
    /// The folders' inode numbers (`nil` when the folder could not be read back), or why one
    /// could not be made, in the order of the paths given.
    typealias Made = [Result<Int64?, FileProviderError>]

    /// One folder of a creation: the visit carries it until the folder is placed.
    struct Slot: Sendable {
        let creation: FolderCreation
        let index: Int

        /// The folder's inode, or why it could not be made; waits for the creation to end.
        func result() async -> Result<Int64?, FileProviderError> { await creation.task.value[index] }

        /// Whether the creation has ended.
        var isDone: Bool { creation.done.withLock { $0 } }
    }

    let task: Task<Made, Never>
    /// Set when the creation ends.
    let done: Mutex<Bool>

    /// Starts making the folders at `paths` (each folder's parent exists), each stamped with its
    /// status when the layout writes one; serve's watcher learns those made (dataless until
    /// visited: a program opening one from now on waits for its items).
    static func start(
        _ paths: [String], statuses: [ReplicaStatus], in context: DomainContext, after previous: FolderCreation? = nil
    ) -> FolderCreation {
        let (replica, watchers, name, executor) = (context.replica, context.newDatalessFolders, context.domain.name, context.executor)
        let done = Mutex(false)
        let task = Task<Made, Never> {
            await previous?.wait()
            defer { done.withLock { $0 = true } }
            do throws(FileProviderError) {
                return try await executor.run { () -> Made in
                    let made = paths.map { path -> Result<Int64?, FileProviderError> in
                        do {
                            try replica.makeFolder(path)
                            return .success(replica.fingerprint(atPath: replica.path(path))?.inode)
                        } catch {
                            return .failure(FileProviderError.wrap(error))
                        }
                    }
                    watchers.made(
                        domain: name,
                        paths: zip(paths, made).compactMap { path, result in
                            if case .success = result { return path }
                            return nil
                        })
                    if replica.layout.writesFolderStatus {
                        for (index, path) in paths.enumerated() {
                            if case .success = made[index] { FolderStatus.stamp(statuses[index], on: path, in: replica, domain: name) }
                        }
                    }
                    return made
                }
            } catch {
                // The executor is shut down: nothing was made.
                return paths.map { _ in .failure(error) }
            }
        }
        return FolderCreation(task: task, done: done)
    }

    /// The slot of the folder at `index` of the paths started.
    func slot(_ index: Int) -> Slot { Slot(creation: self, index: index) }

    /// Waits for every folder to be made (or refused).
    func wait() async { _ = await task.value }
}
