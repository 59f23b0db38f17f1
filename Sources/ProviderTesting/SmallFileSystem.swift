import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// A small memory file system (`tmpfs`) mounted on a fresh folder, for tests of a full disk.
/// Needs root (the tests run as root in CI); ``unmount()`` removes it and its folder.
public final class SmallFileSystem: Sendable {
    /// The folder it is mounted on.
    public let root: URL
    /// Its size in bytes.
    public let size: Int

    /// Mounts a `tmpfs` of `size` bytes (rounded to pages by the kernel) on a new folder.
    /// - Throws: `permissionDenied` when not run as root; `localIOFailure` for other failures.
    public init(size: Int) throws(FileProviderError) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fpk-tmpfs-\(UUID().uuidString)")
            .resolvingSymlinksInPath()
        if mkdir(folder.path, 0o755) != 0 { throw POSIXError.error("cannot create", path: folder.path) }
        if mount("tmpfs", folder.path, "tmpfs", 0, "size=\(size),mode=0755") != 0 {
            let error = POSIXError.error("cannot mount a tmpfs (the disk-full tests need root) on", path: folder.path)
            rmdir(folder.path)
            throw error
        }
        root = folder
        self.size = size
    }

    /// Unmounts it (lazily, so a file still open does not keep it) and removes the folder.
    public func unmount() {
        umount2(root.path, Int32(MNT_DETACH))
        rmdir(root.path)
    }

    /// Bytes an unprivileged program may still write on it (`f_bavail`).
    public var available: Int64 {
        var info = statvfs()
        guard statvfs(root.path, &info) == 0 else { return 0 }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Runs `body` with a mounted file system of `size` bytes, unmounting it afterwards.
    public static func with<T>(size: Int, _ body: (SmallFileSystem) async throws -> T) async throws -> T {
        let fileSystem = try SmallFileSystem(size: size)
        defer { fileSystem.unmount() }
        return try await body(fileSystem)
    }

    /// What a backend throws when the local disk fills up during a download: fetches
    /// `identifier` (a file larger than 1 MiB) into a 1 MiB file system. Returns the error
    /// (`nil` when none was thrown) and the destination's path.
    public static func fetchError(of identifier: ItemIdentifier, from backend: any Backend) async throws -> (
        error: FileProviderError?, destination: String
    ) {
        try await with(size: 1 << 20) { disk in
            let destination = disk.root.appendingPathComponent("big.bin.part")
            do {
                _ = try await backend.fetchContents(for: identifier, version: nil, to: destination, offset: 0, progress: nil)
                return (nil, destination.path)
            } catch {
                return (FileProviderError.wrap(error), destination.path)
            }
        }
    }

    /// What a backend throws when the local disk fills up during a ranged read: reads the whole
    /// of `identifier` (a file larger than 1 MiB) with `fetchPartialContents` into a sparse file
    /// of its size on a 1 MiB file system. Returns the error (`nil` when none was thrown).
    public static func partialFetchError(of identifier: ItemIdentifier, from backend: any Backend) async throws
        -> FileProviderError?
    {
        let item = try await backend.item(for: identifier)
        return try await with(size: 1 << 20) { disk in
            let destination = disk.root.appendingPathComponent("big.bin.part")
            _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
            let handle = try FileHandle(forWritingTo: destination)
            try handle.truncate(atOffset: UInt64(item.size))
            try handle.close()
            do {
                _ = try await backend.fetchPartialContents(
                    for: identifier, version: item.version, range: 0..<item.size, into: destination)
                return nil
            } catch {
                return FileProviderError.wrap(error)
            }
        }
    }

    /// Fills it with a file `name` until at most `leaving` bytes are free; returns the file.
    @discardableResult
    public func fill(leaving: Int64, name: String = "filler") throws -> URL {
        let url = root.appendingPathComponent(name)
        let size = max(0, available - leaving)
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        let chunk = Data(repeating: 0x5a, count: 1 << 16)
        var written: Int64 = 0
        while written < size {
            let piece = chunk.prefix(Int(min(Int64(chunk.count), size - written)))
            try handle.write(contentsOf: piece)
            written += Int64(piece.count)
        }
        return url
    }
}
