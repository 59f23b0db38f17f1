import Foundation
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A staging file the engine places: its path and, while a batch is placed, a descriptor of its
/// folder through which it is dated, read and renamed by name alone instead of by its whole
/// path (``Replica/setModificationDate(_:of:)``, ``Replica/fingerprint(of:)``,
/// ``Replica/move(_:toPath:)``). Messages name the path.
struct StagedFile {
    let path: String
    /// An `O_PATH` descriptor of the folder holding it, or `nil`: then the path is used.
    let folder: Int32?
    /// The last component of `path`.
    let name: String

    init(path: String) {
        self.path = path
        folder = nil
        name = path
    }

    fileprivate init(path: String, folder: Int32, name: String) {
        self.path = path
        self.folder = folder
        self.name = name
    }

    /// Sets the extended attribute `attribute` of the file to `value`, through its folder's
    /// descriptor when it has one (only its name is looked up: `setxattrat`, falling back to
    /// the path on kernels before 6.13). Blocking. Returns 0, or -1 with errno.
    @discardableResult
    func setAttribute(_ attribute: String, to value: [UInt8]) -> Int32 {
        guard let folder else { return ExtendedAttribute.set(attribute, to: value, atPath: path) }
        return ExtendedAttribute.set(attribute, to: value, inFolder: folder, file: name, path: path)
    }
}

/// The folders of one placing job, each opened once (`O_PATH`): the staging folders of the
/// files placed from them, and the replica's folders they are renamed into; ``close()`` closes
/// them. Used by one job on one thread. Blocking.
final class StagingFolders {
    private var descriptors: [Substring: Int32] = [:]

    /// The staging file at `path`, with its folder's descriptor (`nil` when the folder cannot
    /// be opened: the file is then handled by its path).
    func file(atPath path: String) -> StagedFile {
        guard let (folder, name) = place(atPath: path) else { return StagedFile(path: path) }
        return StagedFile(path: path, folder: folder, name: name)
    }

    /// The descriptor of the folder of `path` (an absolute path), opened on first use, and
    /// the last component of `path`; `nil` when the folder cannot be opened (or `path` has no
    /// folder): then `path` is used.
    func place(atPath path: String) -> (folder: Int32, name: String)? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let folderPath = path[..<slash]
        let descriptor: Int32
        if let known = descriptors[folderPath] {
            descriptor = known
        } else {
            descriptor = SystemCalls.openFolderPath(String(folderPath))
            if descriptor < 0 { return nil }
            descriptors[folderPath] = descriptor
        }
        return (descriptor, String(path[path.index(after: slash)...]))
    }

    /// Closes the folders opened.
    func close() {
        for descriptor in descriptors.values { Glibc.close(descriptor) }
        descriptors.removeAll()
    }

    deinit { close() }
}
