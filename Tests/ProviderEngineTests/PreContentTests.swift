import Foundation
import ProviderCore
import ProviderTesting
import Testing

@testable import ProviderEngine
@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel layer of on-access files with the real kernel (root, ext4): a pre-content group
/// marks a bind mount of a folder of sparse files, and programs that are not ours read them
/// through it while a listener in this process fills them.
@Suite struct PreContentTests {
    /// A listener thread in this process: answers every event with `handler` and records it.
    final class Listener: @unchecked Sendable {
        struct Seen: Sendable {
            var inode: UInt64
            var kind: PreContentGroup.Event.Kind
            var offset: UInt64
            var count: UInt64
            /// The file's size when the event came.
            var size: Int
        }

        let group: PreContentGroup
        private let lock = NSLock()
        private var seen: [Seen] = []
        private var stopped = false
        private let ended = DispatchSemaphore(value: 0)
        private let handler: @Sendable (PreContentGroup, PreContentGroup.Event, UInt64) -> PreContentGroup.Response

        init(
            group: PreContentGroup,
            handler: @escaping @Sendable (PreContentGroup, PreContentGroup.Event, UInt64) -> PreContentGroup.Response
        ) {
            self.group = group
            self.handler = handler
            let thread = Thread { [self] in
                while !lock.withLock({ stopped }) {
                    guard let events = try? group.nextEvents() else { break }
                    for event in events {
                        // Notifications (opens, writes) need no answer and are not what these
                        // tests count.
                        guard event.needsAnswer else {
                            group.dismiss(event)
                            continue
                        }
                        // Opens wait too (`serve` fills small files then); these tests count
                        // and fill the accesses.
                        if event.kind == .opening {
                            try? group.respond(event, .allow)
                            continue
                        }
                        var status = stat()
                        fstat(event.fileDescriptor, &status)
                        let inode = UInt64(status.st_ino)
                        lock.withLock {
                            seen.append(
                                Seen(inode: inode, kind: event.kind, offset: event.offset, count: event.count, size: Int(status.st_size)))
                        }
                        let response = handler(group, event, inode)
                        try? group.respond(event, response)
                    }
                }
                ended.signal()
            }
            thread.name = "precontent-test-listener"
            thread.start()
        }

        /// The events seen for one inode so far.
        func events(of inode: UInt64) -> [Seen] { lock.withLock { seen.filter { $0.inode == inode } } }

        /// Ends the thread.
        func stop() async throws {
            lock.withLock { stopped = true }
            group.wake()
            _ = try await offThePool { [ended] in ended.wait(timeout: .now() + 30) }
        }
    }

    /// A handler that fills a file from the lab's store (by the backing file's inode), then
    /// allows; `ignoreComplete` adds the ignore mark after filling. A file whose size is not the
    /// store's any more (truncated) is let through unfilled.
    static func filler(_ lab: PreContentLab, ignoreComplete: Bool = false)
        -> @Sendable (
            PreContentGroup, PreContentGroup.Event, UInt64
        ) -> PreContentGroup.Response
    {
        var names: [UInt64: String] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: lab.backing)) ?? [] {
            names[lab.inode(name)] = name
        }
        let store = lab.store
        return { [names] group, event, inode in
            guard let name = names[inode], let contents = FileManager.default.contents(atPath: store + "/" + name) else {
                return .deny(.ioError)
            }
            var status = stat()
            guard fstat(event.fileDescriptor, &status) == 0 else { return .deny(.ioError) }
            if event.needsNoBytes || Int(status.st_size) != contents.count { return .allow }
            var failed = false
            contents.withUnsafeBytes { bytes in
                do throws(FileProviderError) { try group.write(bytes, at: 0, through: event) } catch { failed = true }
            }
            if failed { return .deny(.ioError) }
            if ignoreComplete { try? group.ignore(event) }
            return .allow
        }
    }

    /// Runs `body` with a lab whose backing folder is mounted at the replica, marked by a new
    /// group a listener answers with `handler`; always detaches and removes everything.
    static func withMountedLab(
        prepare: (PreContentLab) throws -> Void,
        handler: (PreContentLab) -> @Sendable (PreContentGroup, PreContentGroup.Event, UInt64) -> PreContentGroup.Response,
        _ body: (PreContentLab, Listener, ReplicaMount) async throws -> Void
    ) async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        try prepare(lab)
        let group = try PreContentGroup(writableEvents: true)
        let mount = try ReplicaMount.attach(backing: lab.backing, at: lab.replica, markedBy: group)
        let listener = Listener(group: group, handler: handler(lab))
        do {
            try await body(lab, listener, mount)
        } catch {
            try? mount.detach()
            try await listener.stop()
            throw error
        }
        try mount.detach()
        try await listener.stop()
    }

    @Test func programsThatAreNotOursReadEveryByteOfSparseFiles() async throws {
        let sizes = [0, 1, 4096, 5 * 1024 * 1024 + 123]
        var files: [(name: String, contents: Data, reader: Reader)] = []
        for (index, size) in sizes.enumerated() {
            for reader in Reader.allCases {
                files.append(("\(reader.rawValue)-\(size)", patterned(size, seed: UInt8(index * 7 + 1)), reader))
            }
        }
        try await Self.withMountedLab(
            prepare: { lab in for file in files { try lab.makeDataless(file.name, file.contents) } },
            handler: { Self.filler($0) }
        ) { lab, listener, mount in
            #expect(mount.isAttached)
            for file in files {
                // stat shows the real size before any read, and nothing is on disk yet.
                let before = try #require(lab.status(lab.replica + "/" + file.name))
                #expect(Int(before.st_size) == file.contents.count, "\(file.name)")
                #expect(before.st_blocks == 0, "\(file.name)")
            }
            for file in files {
                let outcome = try await runProgram(
                    file.reader.command(path: lab.replica + "/" + file.name, expected: lab.store + "/" + file.name))
                #expect(outcome.succeeded, "\(file.name): \(outcome)")
                #expect(outcome.output == file.reader.expectedOutput(file.contents), "\(file.name): \(outcome)")
                let backing = FileManager.default.contents(atPath: lab.backing + "/" + file.name)
                #expect(backing == file.contents || file.reader == .tail, "\(file.name): the backing file holds the contents")
            }
            // Every non-empty file raised events for page-aligned ranges; `mmap` asked for the
            // whole range at once.
            for file in files where !file.contents.isEmpty {
                let events = listener.events(of: lab.inode(file.name))
                #expect(!events.isEmpty, "\(file.name)")
                #expect(events.allSatisfy { $0.kind == .access && $0.offset % 4096 == 0 }, "\(file.name): \(events)")
            }
            let mapped = listener.events(of: lab.inode("mmap-\(5 * 1024 * 1024 + 123)"))
            #expect(mapped.contains { $0.offset == 0 && $0.count >= UInt64(5 * 1024 * 1024 + 123) }, "\(mapped)")
        }
    }

    @Test func anIgnoreMarkStopsEventsAndRemovingItRearmsTheFile() async throws {
        let contents = patterned(64 * 1024 + 5, seed: 3)
        let ignoring = Mutex(false)
        try await Self.withMountedLab(
            prepare: { try $0.makeDataless("file", contents) },
            handler: { lab in
                let fill = Self.filler(lab)
                return { group, event, inode in
                    let response = fill(group, event, inode)
                    if ignoring.withLock({ $0 }) { try? group.ignore(event) }
                    return response
                }
            }
        ) { lab, listener, _ in
            let path = lab.replica + "/file"
            let inode = lab.inode("file")
            // Without an ignore mark, every read raises events, even of a complete file.
            #expect(try await runProgram(["cat", path]).output == contents)
            let first = listener.events(of: inode).count
            #expect(first > 0)
            #expect(try await runProgram(["cat", path]).output == contents)
            let second = listener.events(of: inode).count
            #expect(second > first)
            // With one, the next read raises none and reads the same bytes.
            ignoring.withLock { $0 = true }
            #expect(try await runProgram(["cat", path]).output == contents)
            let marked = listener.events(of: inode).count
            ignoring.withLock { $0 = false }
            for _ in 0..<3 { #expect(try await runProgram(["cat", path]).output == contents) }
            #expect(listener.events(of: inode).count == marked)

            // Eviction: re-arm, then punch the contents out (through the backing path).
            try listener.group.unignore(lab.backing + "/file")
            // The length rounded up to whole blocks: a partial last block would stay allocated.
            let length = (contents.count + 4095) / 4096 * 4096
            let punch = try await runProgram(["fallocate", "--punch-hole", "--offset", "0", "--length", "\(length)", lab.backing + "/file"])
            #expect(punch.succeeded, "\(punch)")
            #expect(lab.status(lab.backing + "/file")?.st_blocks == 0)
            #expect(Int(lab.status(path)?.st_size ?? 0) == contents.count)
            #expect(try await runProgram(["cat", path]).output == contents)
            #expect(listener.events(of: inode).count > marked)
            // Removing a mark that is not there is fine.
            try listener.group.unignore(lab.backing + "/file")
        }
    }

    @Test func aTruncateToZeroRaisesAnEventThatNeedsNoBytes() async throws {
        try await Self.withMountedLab(
            prepare: { lab in
                try lab.makeDataless("truncated", patterned(10_000, seed: 4))
                try lab.makeDataless("opened-with-trunc", patterned(10_000, seed: 5))
            },
            handler: { Self.filler($0) }
        ) { lab, listener, _ in
            let truncate = try await runProgram(["truncate", "-s", "0", lab.replica + "/truncated"])
            #expect(truncate.succeeded, "\(truncate)")
            let events = listener.events(of: lab.inode("truncated"))
            #expect(events.count == 1, "\(events)")
            #expect(events.first.map { $0.kind == .access && $0.count == 0 && $0.offset == 0 } == true, "\(events)")
            #expect(lab.status(lab.backing + "/truncated")?.st_size == 0)

            // `> file` (open with O_TRUNC) truncates without an event of its own: the write's
            // event finds the file empty already, and a handler that fetched now would write the
            // old contents under the new ones.
            let shell = try await runProgram(["sh", "-c", "printf new > \"$1\"", "sh", lab.replica + "/opened-with-trunc"])
            #expect(shell.succeeded, "\(shell)")
            let written = listener.events(of: lab.inode("opened-with-trunc"))
            #expect(written.first.map { $0.size == 0 && $0.offset == 0 && $0.count > 0 } == true, "\(written)")
            #expect(FileManager.default.contents(atPath: lab.backing + "/opened-with-trunc") == Data("new".utf8))
        }
    }

    @Test func anAppendAndAnExecWaitForTheRealContents() async throws {
        let contents = patterned(20_000, seed: 9)
        let script = Data("#!/bin/sh\necho ran from the real contents\n".utf8)
        try await Self.withMountedLab(
            prepare: { lab in
                try lab.makeDataless("appended", contents)
                try lab.makeDataless("script", script)
                chmod(lab.backing + "/script", 0o755)
            },
            handler: { Self.filler($0) }
        ) { lab, listener, _ in
            // `>>` writes past the end: the write's event comes first, the file is filled, and
            // the new bytes land after the real contents.
            let append = try await runProgram(["sh", "-c", "printf tail >> \"$1\"", "sh", lab.replica + "/appended"])
            #expect(append.succeeded, "\(append)")
            #expect(!listener.events(of: lab.inode("appended")).isEmpty)
            #expect(FileManager.default.contents(atPath: lab.backing + "/appended") == contents + Data("tail".utf8))

            let run = try await runProgram([lab.replica + "/script"])
            #expect(run.succeeded && run.output == Data("ran from the real contents\n".utf8), "\(run)")
            #expect(!listener.events(of: lab.inode("script")).isEmpty)
        }
    }

    @Test func aDeniedAccessFailsWithTheErrorGivenAndLeavesTheFileDataless() async throws {
        try await Self.withMountedLab(
            prepare: { lab in
                try lab.makeDataless("unreachable", patterned(9000, seed: 6))
                try lab.makeDataless("full-disk", patterned(9000, seed: 7))
            },
            handler: { lab in
                let full = lab.inode("full-disk")
                return { _, _, inode in inode == full ? .deny(.noSpace) : .deny(.ioError) }
            }
        ) { lab, _, _ in
            let unreachable = try await runProgram(["cat", lab.replica + "/unreachable"])
            #expect(!unreachable.succeeded && unreachable.output.isEmpty, "\(unreachable)")
            #expect(unreachable.errorText.contains("Input/output error"), "\(unreachable)")
            let full = try await runProgram(["cat", lab.replica + "/full-disk"])
            #expect(!full.succeeded && full.output.isEmpty, "\(full)")
            #expect(full.errorText.contains("No space left on device"), "\(full)")
            let python = try await runProgram([
                "python3", "-c", "open(__import__('sys').argv[1], 'rb').read()", lab.replica + "/unreachable",
            ])
            #expect(python.errorText.contains("Errno 5"), "\(python)")
            #expect(lab.status(lab.backing + "/unreachable")?.st_blocks == 0)
        }
    }

    /// What the mount mark covers, and what it does not: a recursive bind of a folder above the
    /// replica (a container's volume, a sandbox's view of the home folder) leaves the marked
    /// mount out (it is unbindable) and shows an empty folder; a mount namespace made after the
    /// mount (`unshare -m`) copies it without its mark, and a program there reads the holes as
    /// zeros (a limit of mount marks; an inode mark, ``PreContentGroup/markFile(_:)``, guards
    /// every namespace).
    @Test func copiesOfTheMountInOtherNamespacesAndAnInodeMark() async throws {
        let contents = patterned(8192, seed: 10)
        try await Self.withMountedLab(
            prepare: { lab in
                try lab.makeDataless("file", contents)
                try lab.makeDataless("inode-marked", contents)
            },
            handler: { Self.filler($0) }
        ) { lab, listener, _ in
            let view = lab.root + "/view"
            try FileManager.default.createDirectory(atPath: view, withIntermediateDirectories: true)
            let bound = try await runProgram(["mount", "--rbind", lab.root, view])
            try #require(bound.succeeded, "\(bound)")
            let throughBind = try await runProgram(["cat", view + "/replica/file"])
            _ = fp_test_detach(view)
            #expect(!throughBind.succeeded && throughBind.errorText.contains("No such file"), "\(throughBind)")

            let copied = try await runProgram(["unshare", "-m", "cat", lab.replica + "/file"])
            #expect(copied.succeeded && copied.output == Data(count: contents.count), "\(copied)")
            #expect(listener.events(of: lab.inode("file")).isEmpty)

            try listener.group.markFile(lab.backing + "/inode-marked")
            let marked = try await runProgram(["unshare", "-m", "cat", lab.replica + "/inode-marked"])
            #expect(marked.succeeded && marked.output == contents, "\(marked)")
            #expect(!listener.events(of: lab.inode("inode-marked")).isEmpty)
            try listener.group.unmarkFile(lab.backing + "/inode-marked")
        }
    }

    @Test func theProbeSaysWhyOnAccessCannotWorkOnTmpfs() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        // Works on this folder (ext4).
        try OnAccessSupport.check(backing: lab.backing)

        let tmpfs = lab.root + "/tmpfs"
        try FileManager.default.createDirectory(atPath: tmpfs, withIntermediateDirectories: true)
        let mounted = try await runProgram(["mount", "-t", "tmpfs", "fp-precontent-test", tmpfs])
        try #require(mounted.succeeded, "\(mounted)")
        defer { _ = fp_test_detach(tmpfs) }
        do {
            try OnAccessSupport.check(backing: tmpfs)
            Issue.record("the probe accepted tmpfs")
        } catch {
            #expect(error.code == .notSupported)
            #expect(error.message.contains("on a tmpfs file system"), "\(error.message)")
            #expect(error.message.contains("ext4"), "\(error.message)")
        }
        // Mounting a tmpfs backing folder fails the same way and leaves nothing mounted.
        let group = try PreContentGroup(writableEvents: true)
        do {
            _ = try ReplicaMount.attach(backing: tmpfs, at: lab.replica, markedBy: group)
            Issue.record("a tmpfs backing folder was mounted")
        } catch {
            #expect(error.code == .notSupported, "\(error)")
        }
        #expect(!ReplicaMount.isMountPoint(lab.replica))

        do {
            try OnAccessSupport.check(backing: lab.root + "/missing")
            Issue.record("the probe accepted a missing folder")
        } catch {
            #expect(error.code == .noSuchItem)
        }
        #expect(OnAccessSupport.kernelProblem(release: "6.13.7-arch1-1") != nil)
        #expect(OnAccessSupport.kernelProblem(release: "6.18.44-fc-v669") == nil)
    }

    @Test func theMountRefusesWhatItWouldHideAndReplacesItsOwnLeftovers() async throws {
        let lab = try PreContentLab()
        defer { lab.remove() }
        try lab.makeDataless("file", patterned(100, seed: 8))

        // A replica folder with files in it is never mounted over.
        _ = FileManager.default.createFile(atPath: lab.replica + "/mine.txt", contents: Data("mine".utf8))
        let group = try PreContentGroup(writableEvents: true)
        do {
            _ = try ReplicaMount.attach(backing: lab.backing, at: lab.replica, markedBy: group)
            Issue.record("mounted over a folder with files")
        } catch {
            #expect(error.code == .invalidArgument && error.message.contains("not empty"), "\(error)")
        }
        try FileManager.default.removeItem(atPath: lab.replica + "/mine.txt")

        // Something else mounted there is neither replaced nor detached.
        let other = lab.root + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let bound = try await runProgram(["mount", "--bind", other, lab.replica])
        try #require(bound.succeeded, "\(bound)")
        do {
            _ = try ReplicaMount.attach(backing: lab.backing, at: lab.replica, markedBy: group)
            Issue.record("mounted over another mount")
        } catch {
            #expect(error.code == .invalidArgument && error.message.contains("mount point of something else"), "\(error)")
        }
        #expect(ReplicaMount.isMountPoint(lab.replica))
        _ = fp_test_detach(lab.replica)
        #expect(!ReplicaMount.isMountPoint(lab.replica))

        // An owner that died with its guardian leaves its mount and anchor: the next attach
        // takes them away first, so they never pile up.
        let first = try ReplicaMount.attach(backing: lab.backing, at: lab.replica, markedBy: group)
        let second = try ReplicaMount.attach(backing: lab.backing, at: lab.replica, markedBy: group)
        #expect(!first.isAttached && second.isAttached)
        try second.detach()
        #expect(!ReplicaMount.isMountPoint(lab.replica))
        try second.detach()
    }
}
