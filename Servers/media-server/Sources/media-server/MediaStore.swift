import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A refusal with an HTTP status: JSON `{"error": …}` or, where the original API answers so,
/// plain text.
struct MediaError: Error {
    var status: Int
    var message: String
    var plainText = false

    static func badRequest(_ message: String) -> MediaError { MediaError(status: 400, message: message) }
    static func notFound(_ message: String) -> MediaError { MediaError(status: 404, message: message) }
}

/// One listing entry. The original API has `name` and `size` only; the extended listing adds
/// `type`, `modified` (nanoseconds since 1970) and `etag`.
struct Entry: Codable, Sendable {
    var name: String
    var size: Int64
    var type: String?
    var modified: Int64?
    var etag: String?
}

/// What `lstat` says about a file or folder of the store.
struct Status: Sendable {
    enum Kind: Sendable { case file, folder }
    var kind: Kind
    var size: Int64
    var modifiedNanos: Int64
    var inode: UInt64

    /// Changes with the bytes (size, modification time, inode: a replaced file is a new inode),
    /// survives renames. A folder's depends on its inode only.
    var etag: String {
        switch kind {
        case .folder: return "d" + String(inode, radix: 16)
        case .file:
            return "f" + String(inode, radix: 16) + "-" + String(UInt64(bitPattern: size), radix: 16) + "-"
                + String(UInt64(bitPattern: modifiedNanos), radix: 16)
        }
    }
}

/// The served folder: path checks, listings, and the file system operations of the API.
///
/// Every path from a request is split into names that must each be safe (not empty, `.`,
/// `..`, without NUL); an absolute path is refused. Every folder on the way is checked with
/// `lstat` to be a real folder, so a symlink inside the root never leads outside it.
final class MediaStore: Sendable {
    let root: String
    let compat: Bool
    /// Serializes the check-then-rename steps of conditional writes, moves and deletions.
    let lock = NSLock()

    static let uploadPrefix = ".media-upload-"
    static let compatUploadLimit = 25 << 20
    static let imageSuffixes = [".jpg", ".jpeg", ".png"]

    init(root: String, compat: Bool) {
        self.root = root
        self.compat = compat
    }

    /// Runs `body` holding the lock.
    func locked<T>(_ body: () throws(MediaError) -> T) throws(MediaError) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: Paths

    /// The names of a folder path relative to the root; `""` and `"."` are the root.
    func components(_ path: String) throws(MediaError) -> [String] {
        if path.isEmpty || path == "." { return [] }
        if path.utf8.first == UInt8(ascii: "/") { throw .badRequest("absolute paths are not allowed: \(path.debugDescription)") }
        var names: [String] = []
        for part in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            names.append(try name(String(decoding: part, as: UTF8.self)))
        }
        return names
    }

    /// Checks one name.
    func name(_ name: String) throws(MediaError) -> String {
        if name.isEmpty { throw .badRequest("empty names are not allowed") }
        if name == "." || name == ".." { throw .badRequest("'.' and '..' are not allowed") }
        if name.utf8.contains(0) { throw .badRequest("names may not contain NUL") }
        if name.utf8.contains(UInt8(ascii: "/")) { throw .badRequest("a name may not contain '/'") }
        if name.utf8.count > 255 { throw .badRequest("names are at most 255 bytes") }
        return name
    }

    func fullPath(_ names: [String]) -> String {
        names.isEmpty ? root : root + "/" + names.joined(separator: "/")
    }

    static func isImageName(_ name: String) -> Bool {
        imageSuffixes.contains { name.utf8.count > $0.utf8.count && name.utf8.reversed().starts(with: $0.utf8.reversed()) }
    }

    static func isUploadName(_ name: String) -> Bool { name.utf8.starts(with: uploadPrefix.utf8) }

    // MARK: Status

    private static func status(of info: stat) -> Status? {
        let kind: Status.Kind
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .folder
        default: return nil
        }
        let nanos = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        return Status(kind: kind, size: Int64(info.st_size), modifiedNanos: nanos, inode: UInt64(info.st_ino))
    }

    /// The status of the item at `names`, or `nil` when it is missing, a symlink, something
    /// other than a file or folder, or below something that is not a real folder.
    func status(_ names: [String]) -> Status? {
        var path = root
        var info = stat()
        if lstat(path, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR { return nil }
        for name in names {
            if info.st_mode & S_IFMT != S_IFDIR { return nil }
            path += "/" + name
            if lstat(path, &info) != 0 { return nil }
        }
        return Self.status(of: info)
    }

    func entry(name: String, status: Status, typed: Bool) -> Entry {
        if !typed { return Entry(name: name, size: status.size) }
        return Entry(
            name: name, size: status.kind == .folder ? 0 : status.size,
            type: status.kind == .folder ? "folder" : "file", modified: status.modifiedNanos, etag: status.etag)
    }

    // MARK: Listing

    /// The entries of a folder sorted by the bytes of their names.
    ///
    /// The original listing shows folders and `.jpg`/`.jpeg`/`.png` files with their on-disk
    /// size; the extended one every file and folder, typed. Symlinks, other kinds, names that
    /// are not UTF-8 and unfinished uploads are never listed.
    func list(_ names: [String], after: String?, limit: Int?) throws(MediaError) -> [Entry] {
        guard let folder = status(names) else {
            if compat { throw MediaError(status: 500, message: "open \(fullPath(names)): no such file or directory") }
            throw .notFound("no folder \(names.joined(separator: "/").debugDescription)")
        }
        guard folder.kind == .folder else {
            if compat { throw MediaError(status: 500, message: "readdirent \(fullPath(names)): not a directory") }
            throw .badRequest("\(names.joined(separator: "/").debugDescription) is not a folder")
        }
        let path = fullPath(names)
        guard let directory = opendir(path) else {
            throw MediaError(status: 500, message: "open \(path): \(String(cString: strerror(errno)))")
        }
        defer { closedir(directory) }
        let descriptor = dirfd(directory)
        var found: [(name: String, status: Status)] = []
        while let pointer = readdir(directory) {
            let raw: [UInt8] = withUnsafeBytes(of: &pointer.pointee.d_name) { buffer in
                Array(buffer.prefix { $0 != 0 })
            }
            if raw == [UInt8(ascii: ".")] || raw == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            guard let name = String(validating: raw, as: UTF8.self) else { continue }
            if let after, !after.utf8.lexicographicallyPrecedes(name.utf8) { continue }
            if Self.isUploadName(name) { continue }
            var info = stat()
            guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0, let status = Self.status(of: info) else {
                continue
            }
            if compat && status.kind == .file && !Self.isImageName(name) { continue }
            found.append((name, status))
        }
        found.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        if let limit, found.count > limit { found.removeLast(found.count - limit) }
        return found.map { entry(name: $0.name, status: $0.status, typed: !compat) }
    }

    // MARK: Changes

    /// Creates a folder; with `parents`, the missing folders on the way too.
    func makeFolder(_ names: [String], parents: Bool) throws(MediaError) {
        if !parents && !parentExists(names) { throw .notFound("the parent folder does not exist") }
        var path = root
        for (index, name) in names.enumerated() {
            path += "/" + name
            if mkdir(path, 0o755) == 0 { continue }
            let code = errno
            if code == EEXIST, let status = status(Array(names[0...index])), status.kind == .folder { continue }
            if code == EEXIST {
                throw MediaError(status: compat ? 500 : 409, message: "mkdir \(path): a file is in the way")
            }
            if code == ENOENT && !parents { throw .notFound("the parent folder does not exist") }
            throw MediaError(status: 500, message: "mkdir \(path): \(String(cString: strerror(code)))")
        }
    }

    /// Whether every folder above `names` exists.
    func parentExists(_ names: [String]) -> Bool {
        status(Array(names.dropLast()))?.kind == .folder
    }

    /// Removes a file, or a folder with everything in it, never following symlinks.
    func remove(_ names: [String]) throws(MediaError) {
        let path = fullPath(names)
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            if status(names) == nil { return }
            throw MediaError(status: 500, message: "remove \(path): \(error.localizedDescription)")
        }
    }

    /// Whether a folder has any entry.
    func hasChildren(_ names: [String]) -> Bool {
        guard let directory = opendir(fullPath(names)) else { return false }
        defer { closedir(directory) }
        while let pointer = readdir(directory) {
            let raw: [UInt8] = withUnsafeBytes(of: &pointer.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if raw != [UInt8(ascii: ".")] && raw != [UInt8(ascii: "."), UInt8(ascii: ".")] { return true }
        }
        return false
    }

    func rename(from source: [String], to target: [String]) throws(MediaError) {
        if Glibc.rename(fullPath(source), fullPath(target)) != 0 {
            throw MediaError(status: 500, message: "rename: \(String(cString: strerror(errno)))")
        }
    }
}

/// A file being written by an upload: closes its descriptor once.
final class UploadFile {
    let path: String
    private(set) var descriptor: Int32

    init(path: String, exclusive: Bool) throws(MediaError) {
        self.path = path
        descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), 0o644)
        if descriptor < 0 {
            throw MediaError(status: 500, message: "open \(path): \(String(cString: strerror(errno)))")
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(MediaError) {
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw MediaError(status: code == ENOSPC ? 507 : 500, message: "write: \(String(cString: strerror(code)))")
            }
            offset += count
        }
    }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    deinit { close() }
}

/// `Last-Modified` text: an HTTP date in seconds.
func httpDate(nanos: Int64) -> String {
    var seconds = time_t(nanos / 1_000_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    var buffer = [CChar](repeating: 0, count: 64)
    let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
