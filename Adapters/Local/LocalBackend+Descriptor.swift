import ProviderCore

extension LocalBackend {
    /// The `local` backend kind: a folder of the local file system.
    ///
    /// Options: `root` (required, an existing folder) and `page-size` (items per listing page,
    /// default 2000). The factory throws `invalidArgument` when the root does not exist or is
    /// not a folder.
    public static let descriptor = BackendDescriptor(
        kind: "local",
        summary: "a folder of the local file system",
        options: [
            BackendOption(
                name: "root", help: "the folder to serve; it must exist", type: .path, isRequired: true, isStoreLocation: true),
            BackendOption(
                name: "page-size", help: "the most items one listing page holds", type: .integer,
                defaultValue: "2000"),
        ],
        keepsFileSystemFlags: true,
        factory: { configuration in
            let root = try configuration.string("root")
            let pageSize = try configuration.integer("page-size") ?? 2000
            return try LocalBackend(rootPath: root, pageSize: pageSize)
        })
}
