import Foundation
import ProviderCore
import ProviderStore
import Thumbnails

/// Makes and caches thumbnails for `thumbnail`: asks a backend that makes them, else makes one
/// from the replica's copy (materializing it through the ``Materializer``). Built per
/// operation by ``DomainController``.
///
/// A backend with `supportsThumbnails` makes it (the media API's `/preview`). Otherwise —
/// or when that backend declines an image, for example a size its server cannot make — the
/// engine makes it from the file in the replica with the ``Thumbnails`` module,
/// materializing the file first if needed. A thumbnail of a file with local edits not yet
/// uploaded is made from those edits and not cached.
struct ThumbnailMaker: Sendable {
    let materializer: Materializer

    var context: DomainContext { materializer.context }
    var reader: RecordReader { materializer.reader }
    var domainID: Int64 { context.domainID }
    var backend: any Backend { context.backend }
    var replica: Replica { context.replica }
    var store: MetadataStore { context.store }
    var executor: BlockingExecutor { context.executor }
    func display(_ path: String) -> String { context.display(path) }
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws(FileProviderError) -> T) async throws(FileProviderError) -> T {
        try await context.blocking(body)
    }

    /// Writes the freedesktop.org thumbnails of `sizes` of the file at `path`
    /// (``FreedesktopThumbnail``: `large` 256 pixels, `normal` 128) into
    /// `cacheHome/thumbnails/<size>/`, named after the URI of the file where programs see it,
    /// dated with the item's modification time, all made from one source: the downloaded file,
    /// else one store thumbnail of the largest size. Never downloads the file, so a file manager
    /// shows a preview of a file that is not downloaded. Returns the paths written, in the
    /// order of `sizes`.
    /// - Throws: `notSupported` when the item is no file, or is not downloaded and its store
    ///   makes no thumbnails (a preview would need its bytes); what the backend's
    ///   `fetchThumbnail` throws; `localIOFailure` when the cache cannot be written.
    func freedesktopThumbnails(at path: String, sizes: [FreedesktopThumbnail.Size], cacheHome: URL) async throws(FileProviderError)
        -> [String]
    {
        try await PoolCheck.during("thumbnail") { () async throws(FileProviderError) -> [String] in
            let record = try await blocking { [self] () throws(FileProviderError) in try reader.record(at: path) }
            guard record.kind == .file else {
                throw FileProviderError(.notSupported, "\(display(path)) is a \(record.kind.rawValue); only files have thumbnails")
            }
            let file = replica.path(path)
            let source: Data
            if record.state == .materialized, !record.isOutdated,
                let bytes = try await blocking({ () throws(FileProviderError) in FileManager.default.contents(atPath: file) })
            {
                source = bytes
            } else if backend.capabilities.supportsThumbnails {
                source = try await thumbnail(at: path, size: sizes.map(\.pixels).max() ?? FreedesktopThumbnail.Size.normal.pixels)
            } else {
                throw FileProviderError(
                    .notSupported,
                    "\(display(path)) is not downloaded and its store makes no thumbnails; 'fileproviderctl materialize \(display(path))' first"
                )
            }
            let uri = FreedesktopThumbnail.uri(ofPath: (context.domain.replicaPath as NSString).appendingPathComponent(path))
            let seconds = FreedesktopThumbnail.modificationTime(of: record.modificationDate)
            var written: [String] = []
            for size in sizes {
                let png = try FreedesktopThumbnail.png(of: source, size: size, uri: uri, modificationTime: seconds)
                written.append(try await write(png, at: FreedesktopThumbnail.location(ofURI: uri, size: size, cacheHome: cacheHome)))
            }
            return written
        }
    }

    /// Writes a thumbnail into the cache atomically (a staging file renamed into place), the
    /// folders `0700` and the file `0600` as the standard asks; returns its path.
    /// - Throws: `localIOFailure` when the cache cannot be written.
    private func write(_ png: Data, at location: URL) async throws(FileProviderError) -> String {
        let folder = location.deletingLastPathComponent()
        let target = location.path
        try await blocking { () throws(FileProviderError) in
            do {
                try FileManager.default.createDirectory(
                    at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                let staging = target + ".fp-\(UInt32.random(in: 0...UInt32.max))"
                guard FileManager.default.createFile(atPath: staging, contents: png, attributes: [.posixPermissions: 0o600]) else {
                    throw FileProviderError(.localIOFailure, "cannot write \(staging)")
                }
                if rename(staging, target) != 0 {
                    unlink(staging)
                    throw FileProviderError(.localIOFailure, "cannot rename the thumbnail into \(target)")
                }
            } catch let error as FileProviderError {
                throw error
            } catch {
                throw FileProviderError(.localIOFailure, "cannot write the thumbnail cache \(folder.path): \(error.localizedDescription)")
            }
        }
        return target
    }

    /// Content types the engine makes thumbnails of itself when the backend cannot.
    static let imageContentTypes: Set<String> = ["public.jpeg", "public.png", "com.compuserve.gif", "org.webmproject.webp"]

    /// ``DomainController/thumbnail(at:size:)``.
    func thumbnail(at path: String, size: Int = Thumbnailer.defaultSize) async throws(FileProviderError) -> Data {
        try await PoolCheck.during("thumbnail") { () async throws(FileProviderError) -> Data in
            try await makingThumbnail(at: path, size: size)
        }
    }

    private func makingThumbnail(at path: String, size: Int) async throws(FileProviderError) -> Data {
        guard (1...Thumbnailer.maximumSize).contains(size) else {
            throw FileProviderError(.invalidArgument, "a thumbnail size must be 1 to \(Thumbnailer.maximumSize) pixels, not \(size)")
        }
        let target = try await blocking { [self] () throws(FileProviderError) in try reader.record(at: path) }
        guard target.kind == .file else {
            throw FileProviderError(.notSupported, "\(display(path)) is a \(target.kind.rawValue); only files have thumbnails")
        }
        let (store, domainID) = (self.store, self.domainID)
        if let cached = try await blocking({ () throws(FileProviderError) in
            try store.thumbnail(domainID: domainID, identifier: target.identifier, contentVersion: target.contentVersion, size: size)
        }) {
            return cached
        }
        if backend.capabilities.supportsThumbnails {
            let fetched = await fetchFromBackend(target, size: size)
            switch fetched {
            case .success(let data):
                try await cache(data, of: target, size: size)
                return data
            case .failure(let error):
                // The store may decline an image (a size its server cannot make): make it here.
                if error.code != .notSupported || !Self.looksLikeImage(target) { throw error }
            }
        }
        return try await localThumbnail(of: target, size: size)
    }

    private func fetchFromBackend(_ record: ItemRecord, size: Int) async -> Result<Data, FileProviderError> {
        do {
            return .success(try await backend.fetchThumbnail(for: record.identifier, size: size))
        } catch {
            return .failure(error)
        }
    }

    static func looksLikeImage(_ record: ItemRecord) -> Bool {
        imageContentTypes.contains(record.contentType) || record.filename.lowercased().hasSuffix(".webp")
    }

    private func cache(_ data: Data, of record: ItemRecord, size: Int) async throws(FileProviderError) {
        let thumbnail = ThumbnailRecord(
            domainID: domainID, identifier: record.identifier.rawValue, contentVersion: record.contentVersion, size: size, data: data)
        let store = self.store
        try await blocking { () throws(FileProviderError) in try store.saveThumbnail(thumbnail) }
    }

    /// Makes a thumbnail from the replica's copy, materializing it first.
    private func localThumbnail(of record: ItemRecord, size: Int) async throws(FileProviderError) -> Data {
        let path = record.path
        let (file, replica) = (self.replica.path(path), self.replica)
        let present = try await blocking { replica.fingerprint(atPath: file) }
        if record.state != .materialized || record.isOutdated || present == nil {
            if let failure = await materializer.materialize(paths: [path], recursive: false).compactMap(\.error).first {
                throw failure
            }
        }
        let current = try await blocking { [self] () throws(FileProviderError) in try reader.record(at: path) }
        let edited = try await executor.run {
            replica.fingerprint(atPath: file).map { replica.hasLocalChanges(current, $0) } ?? false
        }
        let label = display(path)
        let data = try await executor.run { () throws -> Data in
            let made = Result { () throws(FileProviderError) -> Data in try Thumbnailer.jpeg(fromFileAt: file, size: size) }
            if case .failure(let error) = made, error.code == .notSupported {
                throw FileProviderError(.notSupported, "\(label) is not a JPEG, PNG, GIF or WebP image; it has no thumbnail")
            }
            return try made.get()
        }
        if !edited { try await cache(data, of: current, size: size) }
        return data
    }
}
