import Foundation
import ProviderCore

#if canImport(Glibc)
    import Glibc
#endif

/// Finds external backend programs (`fileprovider-backend-NAME`) and describes them.
///
/// Programs are looked for in `$XDG_DATA_HOME/fileprovider/backends` (by default
/// `~/.local/share/fileprovider/backends`), then in each folder of `PATH`; the first
/// executable file of a name wins.
public enum ExternalBackends {
    /// What the name of every backend program starts with.
    public static let programPrefix = "fileprovider-backend-"

    /// One program found.
    public struct Program: Sendable, Hashable {
        /// The kind name: what follows the prefix.
        public var kind: String
        /// The program's absolute path.
        public var path: String

        public init(kind: String, path: String) {
            self.kind = kind
            self.path = path
        }
    }

    /// Whether `kind` can name an external backend: 1 to 64 of `a-z`, `0-9`, `-`, `_` and `.`,
    /// starting with a letter or a digit.
    public static func isValidKind(_ kind: String) -> Bool {
        let bytes = Array(kind.utf8)
        guard !bytes.isEmpty, bytes.count <= 64 else { return false }
        func allowed(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        return allowed(bytes[0])
            && bytes.allSatisfy { allowed($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") }
    }

    /// The folders searched, in order.
    public static func searchFolders(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var folders: [String] = []
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            folders.append(data + "/fileprovider/backends")
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            folders.append(home + "/.local/share/fileprovider/backends")
        }
        for folder in (environment["PATH"] ?? "").split(separator: ":", omittingEmptySubsequences: true) where folder.hasPrefix("/") {
            folders.append(String(folder))
        }
        return folders
    }

    private static func isExecutableFile(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return false }
        return access(path, X_OK) == 0
    }

    /// The program of a kind, or `nil`.
    public static func find(_ kind: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Program? {
        guard isValidKind(kind) else { return nil }
        for folder in searchFolders(environment: environment) {
            let path = folder + "/" + programPrefix + kind
            if isExecutableFile(path) { return Program(kind: kind, path: path) }
        }
        return nil
    }

    /// Every program found, one per kind (the first found), sorted by kind.
    public static func all(environment: [String: String] = ProcessInfo.processInfo.environment) -> [Program] {
        var found: [String: Program] = [:]
        for folder in searchFolders(environment: environment) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { continue }
            for name in names.sorted() where name.hasPrefix(programPrefix) {
                let kind = String(name.dropFirst(programPrefix.count))
                guard isValidKind(kind), found[kind] == nil else { continue }
                let path = folder + "/" + name
                if isExecutableFile(path) { found[kind] = Program(kind: kind, path: path) }
            }
        }
        return found.values.sorted { $0.kind < $1.kind }
    }

    /// Starts a program, asks for its descriptor (`hello`, then `describe`) and stops it.
    ///
    /// With `remember`, the description is also written to the cache of descriptions on disk
    /// (`$XDG_CACHE_HOME/fileprovider/backends`), which ``resolver`` reads instead of starting
    /// the program while its file stays the same (`backend list` refreshes it this way).
    /// Blocks the calling thread: call it on a thread of its own.
    ///
    /// - Throws: `serverUnreachable` when it cannot be started, dies or does not answer within
    ///   `timeout` seconds; `notSupported` when it speaks another protocol version;
    ///   `corruptData` for a malformed reply or option.
    public static func describe(_ program: Program, timeout: TimeInterval = 30, remember: Bool = false) throws(FileProviderError)
        -> BackendDescriptor
    {
        try describe(program, timeout: timeout, park: false, remember: remember)
    }

    /// ``describe(_:timeout:remember:)``; with `park`, the program is kept running afterwards
    /// for the first ``ExternalBackend`` of its path in this process (``ParkedPrograms``).
    static func describe(_ program: Program, timeout: TimeInterval, park: Bool, remember: Bool) throws(FileProviderError)
        -> BackendDescriptor
    {
        // The file's identity before the program starts: a file replaced meanwhile is not
        // remembered under the new one's identity.
        let key = remember ? DescriptionCache.key(of: program.path) : nil
        do {
            return try describe(program, timeout: timeout, park: park, key: key)
        } catch {
            // What it said before is no longer what it says: no command takes it from the cache.
            if remember { DescriptionCache()?.remove(kind: program.kind) }
            throw error
        }
    }

    private static func describe(_ program: Program, timeout: TimeInterval, park: Bool, key: DescriptionCache.Key?)
        throws(FileProviderError) -> BackendDescriptor
    {
        let process = try BackendProgram(path: program.path, displayName: ExternalBackend.displayName(kind: program.kind))
        var parked = false
        defer { if !parked { process.stop(kill: true) } }
        let hello = try wait(process, "hello", HelloParams(versions: WireCoding.versions), HelloResult.self, timeout: timeout)
        guard WireCoding.versions.contains(hello.version) else {
            throw FileProviderError(.notSupported, "\(process.displayName) speaks protocol version \(hello.version), not 1")
        }
        let described = try wait(process, "describe", [String: String](), DescribeResult.self, timeout: timeout)
        let descriptor = try descriptor(program, described, name: process.displayName)
        if let key, DescriptionCache.key(of: program.path) == key {
            DescriptionCache()?.store(described, kind: program.kind, key: key)
        }
        if park {
            ParkedPrograms.shared.park(process, hello: hello)
            parked = true
        }
        return descriptor
    }

    /// Sends one request and blocks the calling thread until its reply.
    private static func wait<R: Decodable>(
        _ process: BackendProgram, _ method: String, _ params: some Encodable, _ type: R.Type, timeout: TimeInterval
    ) throws(FileProviderError) -> R {
        let done = DispatchSemaphore(value: 0)
        let box = ReplyBox()
        process.send(method: method, params: params) { result in
            box.set(result)
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success, let outcome = box.value else {
            throw FileProviderError(
                .serverUnreachable,
                "\(process.displayName) is not answering: no reply to \(method) within \(String(format: "%g", timeout)) s")
        }
        let line = try outcome.get()
        return try WireCoding.result(type, from: line, program: process.displayName, method: method)
    }

    private static func descriptor(_ program: Program, _ described: DescribeResult, name: String) throws(FileProviderError)
        -> BackendDescriptor
    {
        var options: [BackendOption] = []
        var seen: Set<String> = []
        for wire in (described.options ?? []).prefix(65) {
            guard options.count < 64 else { throw FileProviderError(.corruptData, "\(name) describes more than 64 options") }
            guard isValidKind(wire.name), !wire.name.contains("."), !wire.name.contains("_"), seen.insert(wire.name).inserted else {
                throw FileProviderError(
                    .corruptData,
                    "\(name) describes an option with a bad or repeated name '\(TerminalText.escaped(String(wire.name.prefix(64))))'")
            }
            guard !reservedOptionNames.contains(wire.name) else {
                throw FileProviderError(
                    .corruptData,
                    "\(name) describes an option --\(wire.name), which 'fileproviderctl domain add' has itself, so it could never be set; rename the option in the program (reserved: \(reservedOptionNames.sorted().joined(separator: ", ")))"
                )
            }
            let type = BackendOption.ValueType(rawValue: wire.type ?? "string")
            guard let type else {
                throw FileProviderError(
                    .corruptData,
                    "\(name) gives option \(wire.name) the unknown type '\(TerminalText.escaped(String((wire.type ?? "").prefix(32))))'")
            }
            if let value = wire.default, value.utf8.count > 4096 {
                throw FileProviderError(.corruptData, "\(name) gives option \(wire.name) a default over 4096 bytes")
            }
            let option = BackendOption(
                name: wire.name, help: oneLine(String((wire.help ?? "").prefix(1000))), type: type, defaultValue: wire.default,
                isRequired: wire.required ?? false, isSecret: wire.secret ?? false)
            if let value = wire.default {
                // The checks `domain add` makes of a value given for the option.
                let alone = BackendDescriptor(kind: program.kind, summary: "", options: [option]) { _ in
                    throw FileProviderError(.notSupported, "not started")
                }
                do {
                    _ = try alone.validate([wire.name: value])
                } catch {
                    throw FileProviderError(
                        .corruptData,
                        "\(name) gives option --\(wire.name) a default of the wrong type: \(error.message); fix the default in the program")
                }
            }
            options.append(option)
        }
        let summary = oneLine(String((described.summary ?? "external backend").prefix(200)))
        return descriptor(program, summary: summary, options: options)
    }

    /// The names of the options `fileproviderctl domain add` has itself (and its global ones):
    /// a program's option of one of these names could never be given, so a description that
    /// declares one is refused.
    public static let reservedOptionNames: Set<String> = [
        "backend", "replica", "ignore", "mode", "on-access", "cache-budget", "hydration", "adopt-replica", "sync", "progress",
        "no-progress", "home", "verbose", "quiet", "log-level", "log-file", "json", "help", "version",
    ]

    /// Text from a program for one line of output: line breaks and tabs become spaces (a
    /// summary or a help holding a line break would forge a line of `backend list`), other
    /// characters that must not reach a terminal are escaped.
    static func oneLine(_ text: String) -> String {
        let flat = String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    ["\n", "\r", "\t", "\u{0B}", "\u{0C}", "\u{85}", "\u{2028}", "\u{2029}"].contains(scalar) ? " " : scalar
                }))
        return TerminalText.escaped(flat)
    }

    /// The descriptor of a program, whose factory starts it with the options.
    public static func descriptor(_ program: Program, summary: String, options: [BackendOption]) -> BackendDescriptor {
        BackendDescriptor(kind: program.kind, summary: summary, options: options) { configuration in
            try await ExternalBackend.start(kind: program.kind, programPath: program.path, options: configuration.values)
        }
    }

    private static let cache = DescriptorCache()

    /// For ``BackendRegistry/resolver``: the descriptor of an external program of `kind` found
    /// on the search path (described once per process), or `nil` when there is none.
    ///
    /// It answers from the cache of descriptions on disk when that holds the description of
    /// the program's file as it is now (``DescriptionCache``); else it starts the program and
    /// waits for its description on the calling thread (a program start, once per kind and
    /// process; a program that could not describe itself is not started again for
    /// ``failureRetrySeconds``) and remembers it on disk. Either way it blocks on files or the
    /// program: callers on Swift's cooperative pool describe the kinds they need first, on a
    /// thread of their own. A program started to describe itself is kept running for
    /// ``parkedProgramSeconds``: the first ``ExternalBackend`` of it in this process opens its
    /// store there instead of starting it again.
    public static let resolver: BackendRegistry.Resolver = { (kind: String) throws(FileProviderError) -> BackendDescriptor? in
        try resolve(kind, timeout: 30)
    }

    /// What ``resolver`` does, waiting for a program at most `timeout` seconds for each of
    /// `hello` and `describe`: commands that only show domains (`status`, `domain list`) call it
    /// first with ``showingTimeout``, so a program that does not answer holds them that long
    /// at most, and ``resolver`` then answers from what this found (the program's failure too)
    /// for ``failureRetrySeconds``. Blocks the calling thread.
    /// - Throws: what ``describe(_:timeout:remember:)`` throws.
    public static func resolve(_ kind: String, timeout: TimeInterval) throws(FileProviderError) -> BackendDescriptor? {
        guard let program = find(kind) else { return nil }
        if let cached = cache.get(program) { return try cached.get() }
        do throws(FileProviderError) {
            let descriptor = try rememberedOrDescribed(program, timeout: timeout)
            cache.set(program, .success(descriptor))
            return descriptor
        } catch {
            cache.set(program, .failure(error))
            throw error
        }
    }

    /// How long `status` and `domain list` wait for a program that is not described on disk
    /// to answer each of `hello` and `describe`, in seconds (``resolve(_:timeout:)``).
    public static let showingTimeout: TimeInterval = 3

    /// Why the program of `kind` could not describe itself in this process, if it could not
    /// (``resolve(_:timeout:)`` or ``resolver`` tried), for a command to say so.
    public static func failure(of kind: String) -> FileProviderError? {
        guard let program = find(kind), case .failure(let error) = cache.get(program) else { return nil }
        return error
    }

    /// The description of `program` from the disk cache when it holds one for the program's
    /// file as it is now and that passes the checks of a program's reply; else the program's
    /// own (it is kept running and its description remembered).
    /// - Throws: what ``describe(_:timeout:remember:)`` throws.
    private static func rememberedOrDescribed(_ program: Program, timeout: TimeInterval) throws(FileProviderError) -> BackendDescriptor {
        if let disk = DescriptionCache(), let key = DescriptionCache.key(of: program.path),
            let stored = disk.description(kind: program.kind, key: key),
            let descriptor = try? descriptor(program, stored, name: ExternalBackend.displayName(kind: program.kind))
        {
            return descriptor
        }
        return try describe(program, timeout: timeout, park: true, remember: true)
    }

    /// How long a program that failed to describe itself is taken as failing before it is
    /// started again.
    public static let failureRetrySeconds = 60.0

    /// Stops the programs started to describe themselves and not taken by a domain (they are
    /// kept for ``parkedProgramSeconds``), and returns once they have ended: a command calls it
    /// before it exits, so that a program that ignores the end of its input is not left
    /// running (it gets SIGTERM after ``ExternalBackend/defaultStopGrace``, then SIGKILL).
    public static func stopParkedPrograms() async {
        await ParkedPrograms.shared.stopAll()
    }

    /// How long a program started by ``resolver`` to describe itself is kept running for the
    /// first ``ExternalBackend`` of it to take over, in seconds.
    public static let parkedProgramSeconds = 60.0
}

private final class ReplyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<Data, FileProviderError>?

    func set(_ value: Result<Data, FileProviderError>) { lock.withLock { result = value } }
    var value: Result<Data, FileProviderError>? { lock.withLock { result } }
}

private final class DescriptorCache: @unchecked Sendable {
    private let lock = NSLock()
    private var descriptors: [ExternalBackends.Program: (result: Result<BackendDescriptor, FileProviderError>, at: Date)] = [:]

    /// A description, or a failure younger than ``ExternalBackends/failureRetrySeconds``.
    func get(_ program: ExternalBackends.Program) -> Result<BackendDescriptor, FileProviderError>? {
        lock.withLock {
            guard let entry = descriptors[program] else { return nil }
            if case .failure = entry.result, Date().timeIntervalSince(entry.at) >= ExternalBackends.failureRetrySeconds { return nil }
            return entry.result
        }
    }

    func set(_ program: ExternalBackends.Program, _ result: Result<BackendDescriptor, FileProviderError>) {
        lock.withLock { descriptors[program] = (result, Date()) }
    }
}
