import Foundation
import Logging
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A backend over a folder of the local file system.
///
/// Identifiers are paths relative to the root (`docs/a.txt`); the root folder is
/// ``ItemIdentifier/rootContainer``. Symlinks are reported as symlinks and never followed: every
/// path is resolved one component at a time with `O_NOFOLLOW`, so nothing outside the root is
/// reachable. All file I/O runs on the backend's own threads.
public final class LocalBackend: Backend {
    /// The root folder, as given.
    public let rootPath: String
    /// The most items one page of a listing holds.
    public let pageSize: Int

    let root: FileHandleFD
    let executor: BlockingExecutor
    let listings = ListingCache()
    /// The change feed (``ChangeFeed``); it watches nothing until the first anchor is asked for.
    let feed: ChangeFeed
    /// Where the backend tells what it did on its own (abandoned staging files it removed).
    static let logger = Logger(label: "fileprovider.local")

    public let capabilities = BackendCapabilities(
        hasChangeFeed: true, supportsThumbnails: false, supportsRangedReads: true,
        supportsServerSideMove: true, supportsConditionalWrites: false, supportsSymlinks: true,
        creatableKinds: [.file, .folder, .symlink], identifiersArePathDerived: true,
        // The feed is this process's inotify watches: a later process cannot use its anchors.
        anchorsOutliveProcess: false,
        // A fetch opens its destination with O_CREAT.
        createsFetchDestinations: true,
        // The executable bit: `chmod`.
        supportsFileSystemFlags: true)

    /// Opens a backend over the folder at `rootPath`.
    ///
    /// The backend's threads unless told otherwise: one per core, at most 4. Its work is mostly
    /// CPU in the kernel (`getdents`, `fstatat`), so more threads than cores only wait their
    /// turn and take the cores from the sync's database writer: on 2 cores a first sync of a
    /// million items took 8% longer with 4 threads than with 2.
    public static let defaultThreads = min(4, max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// - Parameters:
    ///   - rootPath: an existing folder; a symlink to a folder is accepted here (only paths
    ///     inside the root are never followed).
    ///   - pageSize: the most items per listing page, at least 1.
    ///   - threads: how many threads run the file I/O; by default as many as the machine has
    ///     cores, at most 4 (``defaultThreads``).
    /// - Throws: `invalidArgument` when `rootPath` does not exist, is not a folder, or cannot be
    ///   opened, or when `pageSize` is less than 1.
    public init(rootPath: String, pageSize: Int = 2000, threads: Int = LocalBackend.defaultThreads) throws(FileProviderError) {
        guard pageSize >= 1 else {
            throw FileProviderError(.invalidArgument, "the page size must be at least 1, not \(pageSize)")
        }
        var info = stat()
        if Glibc.fstatat(AT_FDCWD, rootPath, &info, 0) == -1 {
            let reason = String(cString: strerror(errno))
            throw FileProviderError(.invalidArgument, "the local root \(rootPath) cannot be used: \(reason)")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw FileProviderError(.invalidArgument, "the local root \(rootPath) is not a folder")
        }
        let fd = Glibc.open(rootPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd == -1 {
            let reason = String(cString: strerror(errno))
            throw FileProviderError(.invalidArgument, "the local root \(rootPath) cannot be opened: \(reason)")
        }
        self.rootPath = rootPath
        self.pageSize = pageSize
        let root = FileHandleFD(fd)
        self.root = root
        self.feed = ChangeFeed(root: root, rootPath: rootPath)
        self.executor = BlockingExecutor(name: "local-backend", threads: max(1, threads))
    }

    deinit {
        executor.shutDown()
        feed.stop()
    }

    /// Stops the backend's threads once queued work is done, and the change feed's watches.
    public func close() async {
        executor.shutDown()
        feed.stop()
    }

    /// Runs file I/O on the backend's threads.
    func io<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T)
        async throws(FileProviderError) -> T
    {
        try await executor.run { () throws -> T in try body() }
    }

    // MARK: Backend

    /// Returns the current metadata of one item.
    ///
    /// - Throws: `noSuchItem` when nothing is at the identifier's path, or a path component on
    ///   the way is a symlink or not a folder.
    public func item(for identifier: ItemIdentifier) async throws(FileProviderError) -> Item {
        let path = try LocalPath(identifier)
        return try await io { () throws(FileProviderError) -> Item in try self.currentItem(at: path).item }
    }
}
