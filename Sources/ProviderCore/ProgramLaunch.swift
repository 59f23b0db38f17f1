import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Starts a program with `posix_spawn` the way every part of the project starts one (an SSH
/// `ProxyCommand`, an external backend, a test server): it gets the three standard descriptors
/// it is given and none other of this process's, starts with no signal blocked and every
/// signal's default action (a thread of this process may block some, and a child inherits its
/// mask), and, with `ownSession`, leads a session and process group of its own, so a Ctrl-C at
/// the terminal does not reach it and `kill(-pid, …)` reaches what it forks.
public struct ProgramLaunch {
    /// Where one of the program's standard descriptors comes from.
    public enum Stream {
        /// `/dev/null`.
        case null
        /// A descriptor of this process (the same one may be given for several streams).
        case descriptor(Int32)
        /// A file opened for appending, created (mode 0600) when missing.
        case appending(String)
        /// What the program's standard output is (for its standard error).
        case standardOutput
    }

    /// The program: an absolute path, not looked up on `PATH`.
    public var path: String
    /// Its arguments after its name.
    public var arguments: [String] = []
    /// Its environment; this process's when `nil`.
    public var environment: [String: String]?
    public var standardInput = Stream.null
    public var standardOutput = Stream.null
    public var standardError = Stream.null
    /// Whether it leads a session of its own.
    public var ownSession = true
    /// Whether it leads a process group of its own in this process's session (as Foundation's
    /// `Process` starts programs); only without ``ownSession``, which makes a group too.
    public var ownProcessGroup = false

    public init(path: String, arguments: [String] = []) {
        self.path = path
        self.arguments = arguments
    }

    /// Why a program could not be started: the `errno` of `posix_spawn`.
    public struct Failure: Error, CustomStringConvertible {
        public let errno: Int32
        /// What the error number says (`No such file or directory`).
        public var description: String { String(cString: strerror(errno)) }
    }

    /// Starts the program and returns its pid at once, for the caller to wait for.
    /// - Returns: the pid, or why `posix_spawn` failed (`ENOENT`, `EACCES`, …).
    public func start() -> Result<pid_t, Failure> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            switch stream {
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            case .appending(let file):
                posix_spawn_file_actions_addopen(&actions, target, file, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, target)
            }
        }
        // Nothing else of this process's descriptors (glibc's closefrom action, looked up:
        // Swift does not import it).
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // POSIX_SPAWN_SETSID (glibc 2.26), which Swift's Glibc module does not import.
        let setSession: Int32 = 0x80
        let group = !ownSession && ownProcessGroup ? Int32(POSIX_SPAWN_SETPGROUP) : 0
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (ownSession ? setSession : 0) | group))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        if result != 0 { return .failure(Failure(errno: result)) }
        return .success(pid)
    }
}
