import ProviderCore

/// The D-Bus error names of serve's interface (Docs/CLI.md, "D-Bus interface").
enum BusErrorName {
    /// The prefix of every error name of the interface.
    static let prefix = FileProviderBus.interface + ".Error."

    /// The path is relative, or outside every domain this serve serves.
    static let outsideDomains = prefix + "OutsideDomains"

    /// A call without its string argument (D-Bus's own name).
    static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"

    /// The error of a ``FileProviderError/Code``: its name capitalized
    /// (`org.fileproviderkit.FileProvider1.Error.NoSuchItem`, `.NonEvictable`, `.UnsyncedEdits`).
    static func of(_ code: FileProviderError.Code) -> String {
        let name = code.name
        guard let first = name.first else { return prefix + "Failed" }
        return prefix + first.uppercased() + name.dropFirst()
    }
}
