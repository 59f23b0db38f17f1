// precontent-listener: the smallest on-access provider, for the kill -9 tests. It takes over
// (or starts) a guarded pre-content group, mounts --backing at --replica marked by it, and
// fills a file from --store (same name) whenever a program accesses it. It prints one line,
// "ready adopted=<0|1> guardian=<pid> mount=<id>", once programs may come, and logs every
// event to --events.
//
//   precontent-listener --backing DIR --replica DIR --store DIR --run DIR --events FILE
//                       [--delay-ms N] [--no-ignore] [--no-guardian] [--raise-fds N]
//
// --delay-ms waits that long before answering each event (a slow store), so a kill lands
// while programs wait. --no-guardian runs without fileprovider-guard: the control case of the
// tests, where a kill lets programs read zeros. --raise-fds raises the descriptor limit after
// the guardian started (without telling it) and opens N descriptors, so event descriptors get
// numbers above the limit the guardian knows. Killing it (any signal) is what the tests do; nothing to stop it cleanly.
import Foundation
import ProviderCore
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("precontent-listener: \(message)\n".utf8))
    exit(1)
}

var options: [String: String] = [:]
var flags: Set<String> = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--no-ignore" || argument == "--no-guardian" {
        flags.insert(argument)
    } else if let value = arguments.popFirst() {
        options[argument] = value
    } else {
        fail("\(argument) needs a value")
    }
}
guard let backing = options["--backing"], let replica = options["--replica"], let store = options["--store"],
    let run = options["--run"], let eventLog = options["--events"]
else {
    fail(
        "usage: --backing DIR --replica DIR --store DIR --run DIR --events FILE [--delay-ms N] [--no-ignore] [--no-guardian] [--raise-fds N]"
    )
}
let delay = UInt32(options["--delay-ms"] ?? "0") ?? 0
let ignoreComplete = !flags.contains("--no-ignore")

let group: PreContentGroup
let mount: ReplicaMount
var guardian: PreContentGuardian?
var adopted = false
do {
    if flags.contains("--no-guardian") {
        group = try PreContentGroup(writableEvents: true)
    } else {
        let opened = try PreContentGuardian.open(runFolder: run, writableEvents: true)
        (group, guardian, adopted) = (opened.group, opened.guardian, opened.adopted)
    }
    mount = try ReplicaMount.attach(backing: backing, at: replica, markedBy: group)
} catch {
    fail(error.message)
}
if let raise = options["--raise-fds"].flatMap({ Int($0) }), raise > 0 {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = min(limit.rlim_max, rlim_t(raise + 256))
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { fail("cannot raise the descriptor limit") }
    for _ in 0..<raise where open("/dev/null", O_RDONLY | O_CLOEXEC) < 0 { fail("cannot open /dev/null") }
}
FileHandle.standardOutput.write(
    Data("ready adopted=\(adopted ? 1 : 0) guardian=\(guardian?.processIdentifier ?? 0) mount=\(mount.mountID)\n".utf8))
if !FileManager.default.fileExists(atPath: eventLog) { _ = FileManager.default.createFile(atPath: eventLog, contents: nil) }
guard let log = FileHandle(forWritingAtPath: eventLog) else { fail("cannot open \(eventLog)") }
log.seekToEndOfFile()

/// Fills files from the store when programs access them.
struct Provider {
    let group: PreContentGroup
    let log: FileHandle
    let backing: String
    let store: String
    let delay: UInt32
    let ignoreComplete: Bool
    /// Backing file names by inode (the event's descriptor may come through a detached mount,
    /// whose paths say nothing about the backing folder).
    var names: [UInt64: String] = [:]

    mutating func name(ofInode inode: UInt64) -> String? {
        if let name = names[inode] { return name }
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: backing)) ?? [] {
            var status = stat()
            if stat(backing + "/" + entry, &status) == 0 { names[UInt64(status.st_ino)] = entry }
        }
        return names[inode]
    }

    mutating func answer(_ event: PreContentGroup.Event) {
        // Notifications (opens, writes) need no answer.
        guard event.needsAnswer else {
            group.dismiss(event)
            return
        }
        // Opens go on at once: the accesses are what this listener fills (and delays).
        if event.kind == .opening {
            try? group.respond(event, .allow)
            return
        }
        var status = stat()
        fstat(event.fileDescriptor, &status)
        let inode = UInt64(status.st_ino)
        log.write(Data("\(inode) \(event.kind) \(event.offset) \(event.count) \(event.processIdentifier)\n".utf8))
        if delay > 0 { usleep(delay * 1000) }
        var response = PreContentGroup.Response.deny(.ioError)
        if let name = name(ofInode: inode), let contents = FileManager.default.contents(atPath: store + "/" + name) {
            if event.needsNoBytes || Int(status.st_size) != contents.count {
                // Nothing to fetch, or the file was truncated or extended since: not the
                // store's contents any more.
                response = .allow
            } else {
                var failure: FileProviderError?
                contents.withUnsafeBytes { bytes in
                    do throws(FileProviderError) { try group.write(bytes, at: 0, through: event) } catch { failure = error }
                }
                if let failure {
                    FileHandle.standardError.write(Data("precontent-listener: \(failure.message)\n".utf8))
                } else {
                    response = .allow
                    if ignoreComplete { try? group.ignore(event) }
                }
            }
        }
        try? group.respond(event, response)
    }
}

var provider = Provider(
    group: group, log: log, backing: backing, store: store, delay: delay, ignoreComplete: ignoreComplete)
while true {
    let events: [PreContentGroup.Event]
    do { events = try group.nextEvents() } catch { fail(error.message) }
    for event in events { provider.answer(event) }
}
