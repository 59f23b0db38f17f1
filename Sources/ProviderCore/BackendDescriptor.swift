import Foundation

/// One option of a backend: the CLI's flags, its help, validation and the docs come from it.
public struct BackendOption: Hashable, Sendable {
    /// The type of an option's value.
    public enum ValueType: String, Hashable, Sendable {
        case string, integer, boolean, url
        /// A path on this machine (a folder, a key file, a CA bundle). The engine stores it
        /// absolute: `~` and `~/…` become the user's home, a relative path is taken from the
        /// current directory (``BackendDescriptor/normalizingPaths(_:relativeTo:)``).
        case path
        /// The name of an environment variable (`[A-Za-z_][A-Za-z0-9_]*`) that holds a secret,
        /// read when the backend connects; never the secret itself.
        case environmentVariable = "variable"
    }

    /// The name, in kebab case (`root`, `known-hosts`); the CLI flag is `--NAME`.
    public var name: String
    public var help: String
    public var type: ValueType
    public var defaultValue: String?
    public var isRequired: Bool
    /// The value is sensitive: it is never written to the database or a log. Built-in backends
    /// take secrets only indirectly (the name of an environment variable, a key file), so this
    /// marks options whose *value* must still be redacted in output.
    public var isSecret: Bool
    /// The value (a ``ValueType/path``) is where the store itself keeps its data on this machine
    /// (the `local` backend's `root`): the engine refuses a replica folder (or a dataless
    /// domain's backing folder) inside it or around it, since syncing a folder into itself
    /// would copy it without end.
    public var isStoreLocation: Bool

    public init(
        name: String, help: String, type: ValueType = .string, defaultValue: String? = nil,
        isRequired: Bool = false, isSecret: Bool = false, isStoreLocation: Bool = false
    ) {
        self.name = name
        self.help = help
        self.type = type
        self.defaultValue = defaultValue
        self.isRequired = isRequired
        self.isSecret = isSecret
        self.isStoreLocation = isStoreLocation
    }
}

/// The validated option values of one domain.
public struct BackendConfiguration: Hashable, Sendable, Codable {
    public var values: [String: String]
    /// The name of the domain the backend is made for (the engine sets it; `nil` for a backend
    /// made outside a domain). Backends find a domain's secrets by it (the systemd credential
    /// `fileprovider.NAME`, the Secret Service item with `domain=NAME`); it is not an option.
    public var domainName: String?

    public init(_ values: [String: String] = [:], domainName: String? = nil) {
        self.values = values
        self.domainName = domainName
    }

    public subscript(name: String) -> String? { values[name] }

    /// The value of a string option.
    /// - Throws: `invalidArgument` when it is missing.
    public func string(_ name: String) throws(FileProviderError) -> String {
        guard let value = values[name] else {
            throw FileProviderError(.invalidArgument, "option --\(name) is required")
        }
        return value
    }

    /// The value of an integer option, or `nil` when it is not set.
    /// - Throws: `invalidArgument` when it is not a whole number.
    public func integer(_ name: String) throws(FileProviderError) -> Int? {
        guard let value = values[name] else { return nil }
        guard let number = Int(value) else {
            throw FileProviderError(.invalidArgument, "option --\(name) takes a whole number, not '\(value)'")
        }
        return number
    }

    /// The value of a boolean option (`true`/`false`/`yes`/`no`/`1`/`0`); `false` when not set.
    public func boolean(_ name: String) -> Bool {
        guard let value = values[name]?.lowercased() else { return false }
        return ["true", "yes", "1", "on"].contains(value)
    }
}

/// Describes one kind of backend: its name, its options and how to make one.
public struct BackendDescriptor: Sendable {
    /// Makes a backend from validated options. Throws `FileProviderError`.
    public typealias Factory = @Sendable (BackendConfiguration) async throws -> any Backend

    /// The kind name users type (`local`, `sftp`, `media`).
    public var kind: String
    /// One line saying what the backend talks to.
    public var summary: String
    public var options: [BackendOption]
    public var factory: Factory
    /// The C libraries the backend talks through and their versions as the loaded library
    /// reports them at run time (`libssh2`: `1.11.0`); `fileproviderctl version` lists them.
    public var libraryVersions: @Sendable () -> [String: String]
    /// Whether every backend of this kind keeps the executable bit
    /// (``BackendCapabilities/supportsFileSystemFlags``), for what must know it without making
    /// a backend (which may contact the store or start a program): `pending` and automatic
    /// eviction, which count a local `chmod` as a change not sent yet only where the store
    /// keeps the bit. `nil` when only a backend knows (an external program declares it when
    /// it starts).
    public var keepsFileSystemFlags: Bool?

    public init(
        kind: String, summary: String, options: [BackendOption],
        libraryVersions: @escaping @Sendable () -> [String: String] = { [:] }, keepsFileSystemFlags: Bool? = nil,
        factory: @escaping Factory
    ) {
        self.kind = kind
        self.summary = summary
        self.options = options
        self.libraryVersions = libraryVersions
        self.keepsFileSystemFlags = keepsFileSystemFlags
        self.factory = factory
    }

    /// Checks option values against the descriptor and fills in defaults.
    ///
    /// - Throws: `invalidArgument` naming the option for an unknown option, a missing required
    ///   option, or a value of the wrong type.
    public func validate(_ values: [String: String]) throws(FileProviderError) -> BackendConfiguration {
        var result: [String: String] = [:]
        let known = Dictionary(uniqueKeysWithValues: options.map { ($0.name, $0) })
        for (name, value) in values {
            guard let option = known[name] else {
                let list = options.map { "--\($0.name)" }.joined(separator: ", ")
                throw FileProviderError(
                    .invalidArgument, "the \(kind) backend has no option --\(name); its options are \(list)")
            }
            try Self.check(value, of: option)
            result[name] = value
        }
        for option in options where result[option.name] == nil {
            if let value = option.defaultValue {
                result[option.name] = value
            } else if option.isRequired {
                throw FileProviderError(
                    .invalidArgument, "the \(kind) backend needs --\(option.name): \(option.help)")
            }
        }
        return BackendConfiguration(result)
    }

    /// `values` with the value of every ``BackendOption/ValueType/path`` option made absolute:
    /// `~` and `~/…` (and `~user/…`) become the home folder, a relative path is taken from
    /// `directory` (the current directory by default), `.` and `..` are resolved. Other values,
    /// and defaults not given, are left as they are (a backend may read a default such as
    /// `~/.ssh/known_hosts` in its own way).
    public func normalizingPaths(
        _ values: [String: String], relativeTo directory: String = FileManager.default.currentDirectoryPath
    ) -> [String: String] {
        var result = values
        for option in options where option.type == .path {
            guard let value = values[option.name], !value.isEmpty else { continue }
            let expanded = (value as NSString).expandingTildeInPath
            let absolute = expanded.hasPrefix("/") ? expanded : (directory as NSString).appendingPathComponent(expanded)
            result[option.name] = URL(fileURLWithPath: absolute).standardizedFileURL.path
        }
        return result
    }

    /// The configuration with secret values replaced, for storing and printing.
    public func redacted(_ configuration: BackendConfiguration) -> BackendConfiguration {
        var values = configuration.values
        for option in options where option.isSecret && values[option.name] != nil {
            values[option.name] = "<redacted>"
        }
        return BackendConfiguration(values)
    }

    private static func check(_ value: String, of option: BackendOption) throws(FileProviderError) {
        switch option.type {
        case .integer where Int(value) == nil:
            throw FileProviderError(.invalidArgument, "option --\(option.name) takes a whole number, not '\(value)'")
        case .boolean where !["true", "false", "yes", "no", "1", "0", "on", "off"].contains(value.lowercased()):
            throw FileProviderError(.invalidArgument, "option --\(option.name) takes true or false, not '\(value)'")
        case .url where URL(string: value)?.scheme == nil:
            throw FileProviderError(.invalidArgument, "option --\(option.name) takes a URL, not '\(value)'")
        case .path where value.isEmpty:
            throw FileProviderError(.invalidArgument, "option --\(option.name) takes a path")
        case .environmentVariable where !isEnvironmentVariableName(value):
            // Not the value: it may well be the secret itself, given by mistake.
            throw FileProviderError(
                .invalidArgument,
                "option --\(option.name) takes the name of an environment variable (letters, digits and _, not starting with a digit), not a value: put the secret in a variable and give its name, as --\(option.name) MY_SECRET"
            )
        default:
            break
        }
    }
}

/// Whether `name` can name an environment variable: `[A-Za-z_][A-Za-z0-9_]*`, as POSIX shells
/// accept them.
public func isEnvironmentVariableName(_ name: String) -> Bool {
    guard let first = name.utf8.first, first == UInt8(ascii: "_") || isASCIILetter(first) else { return false }
    return name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || isASCIILetter($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
}

private func isASCIILetter(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
}

/// The backends a program knows, by kind name.
public struct BackendRegistry: Sendable {
    /// Finds the descriptor of a kind that is not registered, or returns `nil` (for example an
    /// external backend program found on `PATH`, described when first asked for). Throws a
    /// `FileProviderError` when it finds the kind but cannot describe it.
    public typealias Resolver = @Sendable (_ kind: String) throws(FileProviderError) -> BackendDescriptor?

    public private(set) var descriptors: [String: BackendDescriptor] = [:]
    /// Asked for kinds that are not registered; `nil` when there is nothing else to find.
    public var resolver: Resolver?

    public init(_ descriptors: [BackendDescriptor] = [], resolver: Resolver? = nil) {
        for descriptor in descriptors { register(descriptor) }
        self.resolver = resolver
    }

    /// Adds a backend kind; a later registration of the same kind replaces the earlier one.
    public mutating func register(_ descriptor: BackendDescriptor) {
        descriptors[descriptor.kind] = descriptor
    }

    /// The kinds, sorted.
    public var kinds: [String] { descriptors.keys.sorted() }

    /// The descriptor of a kind: a registered one, else the one ``resolver`` finds.
    /// - Throws: `invalidArgument` listing the known kinds when `kind` is not one of them; what
    ///   ``resolver`` throws.
    public func descriptor(for kind: String) throws(FileProviderError) -> BackendDescriptor {
        var found = descriptors[kind]
        if found == nil, let resolver { found = try resolver(kind) }
        guard let descriptor = found else {
            throw FileProviderError(
                .invalidArgument, "unknown backend '\(kind)'; known backends: \(kinds.joined(separator: ", "))")
        }
        return descriptor
    }

    /// Makes a backend of a kind from raw option values.
    /// - Throws: what ``BackendDescriptor/validate(_:)`` and the factory throw, as
    ///   `FileProviderError`.
    public func makeBackend(kind: String, values: [String: String]) async throws(FileProviderError)
        -> any Backend
    {
        let descriptor = try descriptor(for: kind)
        let configuration = try descriptor.validate(values)
        do {
            return try await descriptor.factory(configuration)
        } catch {
            throw FileProviderError.wrap(error, as: .invalidArgument)
        }
    }
}
