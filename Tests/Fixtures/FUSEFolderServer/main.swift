import FUSEFolder
import Foundation
import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

// fuse-folder-server: mounts a FolderFileSystem in a process of its own, for the tests that
// kill the serving process (`kill -9`) or mount as an ordinary user through fusermount3.
//
//   fuse-folder-server --backing FOLDER --mount FOLDER [--name NAME] [--allow-other] [--no-auto-unmount]
//                      [--dataless RELATIVE=SOURCE]... [--fetch-delay-us N] [--chunk BYTES]
//
// Prints "ready <pid>" once mounted, or "error <message>" and exits 1; on SIGTERM or SIGINT it
// unmounts, prints "unmounted" and exits 0.

var backing = ""
var mountPoint = ""
var name = "fuse-folder-server"
var allowOther = false
var autoUnmount = true
var dataless: [(String, String)] = []
var fetchDelay: UInt32 = 0
var chunk = 64 << 10
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    if argument == "--allow-other" {
        allowOther = true
        continue
    }
    if argument == "--no-auto-unmount" {
        autoUnmount = false
        continue
    }
    let value = arguments.next() ?? ""
    switch argument {
    case "--backing": backing = value
    case "--mount": mountPoint = value
    case "--name": name = value
    case "--dataless":
        let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
        dataless.append((parts[0], parts.count > 1 ? parts[1] : ""))
    case "--fetch-delay-us": fetchDelay = UInt32(value) ?? 0
    case "--chunk": chunk = Int(value) ?? chunk
    default:
        FileHandle.standardOutput.write(Data("error unknown argument \(argument)\n".utf8))
        exit(2)
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// SIGTERM and SIGINT are taken with sigwait on this thread: blocked before any other thread
// starts, so every thread inherits the mask.
var stopping = sigset_t()
sigemptyset(&stopping)
sigaddset(&stopping, SIGTERM)
sigaddset(&stopping, SIGINT)
pthread_sigmask(SIG_BLOCK, &stopping, nil)

let fileSystem = FolderFileSystem(backing: backing, chunkSize: chunk, fetchDelay: fetchDelay)
do {
    for (relative, source) in dataless { try fileSystem.addDataless(relative, source: source) }
    var options = FUSEMountOptions(name: name)
    options.allowOther = allowOther
    options.autoUnmount = autoUnmount
    let session = try FUSESession.mount(fileSystem, at: mountPoint, options: options)
    say("ready \(getpid())")
    var signal: Int32 = 0
    sigwait(&stopping, &signal)
    session.unmount()
    say("unmounted")
    exit(0)
} catch {
    say("error \(error)")
    exit(1)
}
