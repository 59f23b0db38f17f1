import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The FUSE replica layout's attributes and listings: the status attributes through the mount,
/// and long listings that show the store and ask no attribute per file.
extension FUSEReplicaTests {
    /// The status attributes through the mount (issue #42): what the backing folder says, and
    /// `dataless` for a dataless file, read with `getfattr` as programs do, followed through
    /// dataless, partial, downloaded, pinned, edited, sent and evicted; a user's own attribute
    /// round-trips; the engine's private marks never show and nothing of `user.fileprovider.*`
    /// can be set or removed.
    @Test func statusAttributesShowThroughTheMountAndOtherAttributesPassThrough() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        let contents = patterned(300_000, seed: 420)
        // Past the size filled whole on open (16 MiB): read in ranges.
        let big = patterned(20 << 20, seed: 421)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options,
            files: ["a.bin": contents, "big.bin": big, "sub/b.txt": Data("b\n".utf8)], addArguments: ["--hydration", "progressive"],
            layout: .fuse)
        try await domain.startServe(["--settle", "3600"])
        let file = domain.replica + "/a.bin"
        let status = { () async throws -> String? in try await StatusAttributeTests.status(file) }

        // Dataless: no status on the backing file (absent means dataless), `dataless` through
        // the mount, and the domain's name; reading them fetched nothing.
        #expect(try await StatusAttributeTests.status(domain.backing + "/a.bin") == nil)
        #expect(try await status() == "dataless")
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.domain", of: file) == "d")
        let dump = try await runProgram(["getfattr", "-d", "-m", "-", "--absolute-names", file])
        let listed = String(decoding: dump.output, as: UTF8.self)
        #expect(dump.succeeded, "\(dump)")
        #expect(listed.contains("user.fileprovider.status=\"dataless\""), "\(listed)")
        #expect(listed.contains("user.fileprovider.domain=\"d\""), "\(listed)")
        #expect(!listed.contains("user.fileprovider.dataless"), "the dataless mark shows through the mount: \(listed)")
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.dataless", of: file) == nil)
        let backing = try #require(fileStatus(domain.backing + "/a.bin"))
        #expect(backing.st_blocks <= 8, "reading attributes fetched contents: \(backing.st_blocks) blocks")
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.dataless", of: domain.backing + "/a.bin") != nil)
        // A folder's status is worked out from the database (FolderStatusTests follows it), never
        // written on its backing folder.
        #expect(try await StatusAttributeTests.status(domain.replica + "/sub") != nil)
        #expect(try await StatusAttributeTests.status(domain.backing + "/sub") == nil)

        // Partly read: partial.
        let piece = try await runProgram(["dd", "if=\(domain.replica)/big.bin", "bs=4096", "skip=1000", "count=1", "status=none"])
        #expect(piece.succeeded && piece.output == big.subdata(in: 4_096_000..<4_100_096), "\(piece)")
        #expect(try await StatusAttributeTests.status(domain.replica + "/big.bin") == "partial")

        // Read: downloaded, noted as the engine's download in the database (no mark on the file).
        // A download mark an earlier version wrote on the backing file stays the engine's.
        let read = try await runProgram(["cat", file])
        #expect(read.succeeded && read.output == contents, "\(read)")
        let downloaded = try await waitUntil(timeout: 30) { try await status() == "downloaded" }
        let afterRead = try await status() ?? "none"
        #expect(downloaded, "after cat: \(afterRead)")
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.download", of: domain.backing + "/a.bin") == nil)
        let legacyMark = try await runProgram([
            "setfattr", "-n", "user.fileprovider.download", "-v", "0x" + String(repeating: "07", count: 41), domain.backing + "/a.bin",
        ])
        #expect(legacyMark.succeeded, "\(legacyMark)")
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.download", of: file) == nil)
        let names = try await runProgram(["getfattr", "-d", "-m", "-", "--absolute-names", file])
        #expect(!String(decoding: names.output, as: UTF8.self).contains("user.fileprovider.download"), "\(names)")

        // Pinned.
        #expect(try await domain.cli.run(["pin", "d:/a.bin"]).status == 0)
        #expect(try await status() == "pinned")

        // A user's own attribute: set, read, listed, kept on the backing file, removed.
        let set = try await runProgram(["setfattr", "-n", "user.color", "-v", "blue", file])
        #expect(set.succeeded, "\(set)")
        #expect(try await StatusAttributeTests.attribute("user.color", of: file) == "blue")
        #expect(try await StatusAttributeTests.attribute("user.color", of: domain.backing + "/a.bin") == "blue")
        let withColor = try await runProgram(["getfattr", "-d", "--absolute-names", file])
        #expect(String(decoding: withColor.output, as: UTF8.self).contains("user.color=\"blue\""), "\(withColor)")
        let created = try await runProgram([
            "python3", "-c", "import os, sys; os.setxattr(sys.argv[1], 'user.color', b'red', os.XATTR_CREATE)", file,
        ])
        #expect(!created.succeeded && created.errorText.contains("File exists"), "XATTR_CREATE over an attribute: \(created)")
        // A value of 2 KiB (Python asks with a buffer of 128 bytes first: the mount answers ERANGE,
        // then it asks again), and the names as Python lists them.
        let long = try await runProgram([
            "python3", "-c",
            "import os, sys; v = bytes(range(256)) * 8; os.setxattr(sys.argv[1], 'user.long', v); "
                + "assert os.getxattr(sys.argv[1], 'user.long') == v; print(sorted(os.listxattr(sys.argv[1])))",
            file,
        ])
        #expect(
            long.succeeded
                && String(decoding: long.output, as: UTF8.self)
                    == "['user.color', 'user.fileprovider.domain', 'user.fileprovider.status', 'user.long']\n",
            "\(long)")
        let removed = try await runProgram(["setfattr", "-x", "user.color", file])
        #expect(removed.succeeded, "\(removed)")
        #expect(try await StatusAttributeTests.attribute("user.color", of: file) == nil)
        let missing = try await runProgram(["setfattr", "-x", "user.color", file])
        #expect(!missing.succeeded && missing.errorText.contains("No such attribute"), "\(missing)")

        // The engine's namespace: refused, whatever the attribute.
        for arguments in [
            ["-n", "user.fileprovider.status", "-v", "downloaded"], ["-x", "user.fileprovider.status"],
            ["-n", "user.fileprovider.domain", "-v", "other"], ["-n", "user.fileprovider.dataless", "-v", "x"],
            ["-x", "user.fileprovider.download"], ["-n", "user.fileprovider.new", "-v", "x"],
        ] {
            let refused = try await runProgram(["setfattr"] + arguments + [file])
            #expect(!refused.succeeded && refused.errorText.contains("Operation not permitted"), "setfattr \(arguments): \(refused)")
        }
        #expect(try await status() == "pinned")
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.download", of: domain.backing + "/a.bin") != nil)
        #expect(try await StatusAttributeTests.attribute("user.fileprovider.download", of: file) == nil)

        // Edited and kept open (not settled): unsent; closed, it is sent and pinned again.
        let fd = try await offThePool { () -> Int32 in
            let fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC)
            if fd >= 0 { _ = write(fd, "tail", 4) }
            return fd
        }
        try #require(fd >= 0, "cannot open \(file): \(String(cString: strerror(errno)))")
        let unsent = try await waitUntil(timeout: 30) { try await status() == "unsent" }
        let shown = try await status() ?? "none"
        #expect(unsent, "the edit is not shown as unsent: \(shown); \(domain.logs.suffix(1500))")
        _ = try await offThePool { close(fd) }
        let sent = try await waitUntil(timeout: 30) { try await status() == "pinned" }
        #expect(sent, "\(domain.logs.suffix(1500))")
        #expect(FileManager.default.contents(atPath: store.folder + "/a.bin") == contents + Data("tail".utf8))
        // Unpinned (online-only): evicted, dataless again through the mount.
        #expect(try await domain.cli.run(["unpin", "d:/a.bin"]).status == 0)
        let evicted = try await waitUntil(timeout: 30) { try await status() == "dataless" }
        let afterEviction = try await status() ?? "none"
        #expect(evicted, "after eviction: \(afterEviction)")
        #expect(try await StatusAttributeTests.status(domain.backing + "/a.bin") == nil)
        try await domain.stopServe()
        await store.stop()
    }

    /// `ls -lR` through the mount shows what the store has (names, kinds, modes, links, owners,
    /// sizes, dates of files; names and modes of folders), twice the same; `security.*` and
    /// `system.*` attributes are not kept (`EOPNOTSUPP`), so `ls -l` stops asking them after
    /// one file: a second `ls -lR` makes fewer requests than there are files (counted by the
    /// kernel's FUSE tracepoint, `perf stat`), where it made two per file; the status
    /// attributes still show. Writes make no request but their own: the kernel asks no
    /// `security.capability` before each (`FUSE_HANDLE_KILLPRIV_V2`), and the bytes are right.
    @Test func longListingsShowTheStoreAndAskNoAttributePerFileAndWritesAskNoCapability() async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(.local, temp: temp)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: [:], layout: .fuse)
        var count = 0
        for folder in ["a", "a/b", "c"] {
            for index in 0..<30 {
                try domain.write("\(folder)/f\(index).txt", Data(String(repeating: "\(folder) \(index)\n", count: index + 1).utf8))
                count += 1
            }
        }
        try domain.write("run.sh", Data("#!/bin/sh\necho hi\n".utf8))
        #expect(chmod(store.folder + "/run.sh", 0o755) == 0)
        let synced = try await domain.cli.run(["sync", domain.name])
        #expect(synced.status == 0, "\(synced.stderr)")
        try await domain.startServe()

        // One line per item: its path, then for a file its mode, links, owner, group, size and
        // date, for a folder its mode (a folder's links, size and date are the file system's).
        func longListing(_ root: String) async throws -> [String] {
            let run = try await runProgram(["ls", "-lR", "--time-style=+%s", root])
            #expect(run.succeeded, "\(run)")
            var section = ""
            var lines: [String] = []
            for line in String(decoding: run.output, as: UTF8.self).split(separator: "\n") {
                if line.hasPrefix(root) && line.hasSuffix(":") {
                    section = String(line.dropFirst(root.count).dropLast())
                    continue
                }
                let fields = line.split(separator: " ")
                guard fields.count >= 7 else { continue }
                let path = section + "/" + fields[6...].joined(separator: " ")
                lines.append(fields[0].hasPrefix("d") ? "\(path) \(fields[0])" : "\(path) \(fields[0...5].joined(separator: " "))")
            }
            return lines.sorted()
        }
        let stored = try await longListing(store.folder)
        #expect(stored.count == count + 4, "\(stored)")
        let first = try await longListing(domain.replica)
        #expect(first == stored, "ls -lR through the mount: \(Set(first).symmetricDifference(stored).sorted())")
        #expect(first.contains { $0.hasPrefix("/run.sh -rwxr-xr-x ") }, "\(first)")
        #expect(try await longListing(domain.replica) == stored, "a second ls -lR")

        // Requests the program's calls made to serve, by the kernel's count.
        func requests(_ program: [String]) async throws -> Int {
            let run = try await runProgram(["perf", "stat", "-x", ",", "-e", "fuse:fuse_request_send", "--"] + program)
            #expect(run.succeeded, "\(run)")
            let line = run.errorText.split(separator: "\n").first { $0.contains("fuse:fuse_request_send") }
            return Int(line?.split(separator: ",").first ?? "") ?? -1
        }
        let listing = try await requests(["ls", "-lR", domain.replica])
        #expect(listing >= 0 && listing < count / 2, "a third ls -lR of \(count) files made \(listing) requests")

        // Not kept: not supported, whatever the item (one of a folder never written, a folder).
        let file = domain.replica + "/a/b/f3.txt"
        for name in ["security.selinux", "security.capability", "system.posix_acl_access"] {
            for path in [file, domain.replica + "/a"] {
                let asked = try await runProgram(["getfattr", "-n", name, "--absolute-names", path])
                #expect(!asked.succeeded && asked.errorText.contains("Operation not supported"), "getfattr -n \(name) \(path): \(asked)")
            }
        }
        let set = try await runProgram(["setfattr", "-n", "security.test", "-v", "x", file])
        #expect(!set.succeeded && set.errorText.contains("Operation not supported"), "\(set)")
        let all = try await runProgram(["getfattr", "-d", "-m", "-", "--absolute-names", file])
        let shown = String(decoding: all.output, as: UTF8.self)
        #expect(all.succeeded && shown.contains("user.fileprovider.status=\"dataless\"") && !shown.contains("security."), "\(all)")
        #expect(try await StatusAttributeTests.status(file) == "dataless")
        #expect(try await StatusAttributeTests.status(domain.replica + "/run.sh") == "dataless")

        // 2,000 writes of 4 KiB: without FUSE_HANDLE_KILLPRIV_V2, one getxattr request each.
        let written = domain.replica + "/written.bin"
        let writes = try await requests(["dd", "if=/dev/zero", "of=\(written)", "bs=4k", "count=2000", "status=none"])
        #expect(writes >= 0 && writes < 200, "2,000 writes made \(writes) requests")
        #expect(fileStatus(written)?.st_size == 8_192_000)
        let read = try await runProgram(["cmp", "-n", "8192000", written, "/dev/zero"])
        #expect(read.succeeded, "\(read)")
        try await domain.stopServe()
        await store.stop()
    }
}
