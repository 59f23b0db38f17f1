import Foundation
import ProviderTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Ordinary programs, as users run them, on files of a `dataless` domain that were never
/// downloaded, through the replica path while the real `fileproviderctl serve` runs, for each
/// way programs reach the files (fanotify: root, Linux ≥ 6.14; FUSE), as rclone's vfstest runs
/// one suite over every cache mode: each program's output is compared with the same program's output on
/// the store's own files, and every file's bytes with the store's. One domain per backend is
/// shared by all programs; the programs that only read run at the same time, each on files no
/// other program read before it.
@Suite("Programs on files never downloaded", .serialized, .timeLimit(.minutes(10)))
struct OnAccessProgramTests {
    /// Files the write checks change: left out of the final comparison of every file.
    static let written = [
        "db/wal.sqlite", "edits/", "git/loose/.git/index", "deep/a/b/packed/.git/index", "py/pkg/__pycache__/",
    ]

    /// A store with a bit of everything users keep: text, archives, databases, a loose and a
    /// packed git repository, a python package, large files, executables, dated files, trees
    /// to copy, a folder of 2,000 entries (past the population budget, so dataless at depth 1)
    /// and a folder past the budget holding a tree, dataless at depth 3. Everything else fits
    /// in the first sync's population budget (250 entries): a path used by name in a folder
    /// nothing listed yet is not found (Sync.md, "a name is not an open"), so the
    /// dataless folders are reached as users reach them, by listing them (`find`).
    static func makeStore(at root: String) async throws {
        func put(_ relative: String, _ contents: Data, mode: mode_t = 0o644, date: Date? = nil) throws {
            let url = URL(fileURLWithPath: root + "/" + relative)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try contents.write(to: url)
            #expect(chmod(url.path, mode) == 0)
            if let date { try FileManager.default.setAttributes([.modificationDate: date], ofItemAtPath: url.path) }
        }
        func text(_ lines: Int, _ tag: String) -> Data {
            Data((0..<lines).map { "\(tag) line \($0) alpha beta \($0 * 7919 % 1000)\n" }.joined().utf8)
        }
        func script(_ body: String, _ arguments: String...) async throws {
            let run = try await runProgram(["sh", "-c", "set -e\n" + body] + arguments, timeout: 120)
            try #require(run.succeeded, "making the store: \(run)")
        }
        try put("text/vim.txt", text(3000, "vim"))
        try put("text/less.txt", text(2000, "less"))
        try put("kinds/script.sh", Data("#!/bin/sh\necho hi\n".utf8))
        try put("kinds/data.json", Data("{\"a\": [1, 2, 3], \"b\": \"text\"}\n".utf8))
        try put("kinds/true", try #require(FileManager.default.contents(atPath: "/bin/true")), mode: 0o755)
        try put("kinds/noise.bin", patterned(100_000, seed: 1))
        try put("kinds/packed.gz", Data())
        try put("zip/members/a.txt", text(5000, "zip"))
        try put("zip/members/b.bin", patterned(1_500_000, seed: 2))
        // zip and gzip files made by python (no zip program needed), members deflated and stored.
        try await script(
            """
            python3 - "$0" <<'EOF'
            import gzip, sys, zipfile
            root = sys.argv[1]
            for name in ("unzip.zip", "zipfile.zip"):
                with zipfile.ZipFile(root + "/zip/" + name, "w") as z:
                    z.write(root + "/zip/members/a.txt", "a.txt", compress_type=zipfile.ZIP_DEFLATED)
                    z.write(root + "/zip/members/b.bin", "sub/b.bin", compress_type=zipfile.ZIP_STORED)
            with open(root + "/kinds/packed.gz", "wb") as out:
                out.write(gzip.compress(open(root + "/zip/members/a.txt", "rb").read()))
            EOF
            """, root)
        // Databases: one read, one written in WAL mode.
        for (name, rows) in [("read", 20_000), ("wal", 2_000)] {
            try await script(
                """
                mkdir -p "$0/db"
                sqlite3 "$0/db/$1.sqlite" "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) INSERT INTO t SELECT i, printf('row %d %s', i, hex(randomblob(16))) FROM n;"
                """, root, name, String(rows))
        }
        // Git: three commits (an executable among the files), loose or packed.
        for (path, packed) in [("git/loose", false), ("deep/a/b/packed", true)] {
            try await script(
                """
                mkdir -p "$0/$1" && cd "$0/$1"
                git init -q --template=
                git config user.name Tester && git config user.email tester@example.invalid
                for round in 1 2 3; do
                    mkdir -p src/sub
                    seq 1 3000 | sed "s/^/round $round line /" > src/data.txt
                    printf '#!/bin/sh\\necho %s\\n' "$round" > tool.sh && chmod 755 tool.sh
                    head -c 200000 /dev/urandom > "src/sub/blob$round.bin"
                    git add -A && git commit -q -m "round $round"
                done
                if [ "$2" = packed ]; then git gc -q --prune=now; fi
                """, root, path, packed ? "packed" : "loose")
        }
        try put("py/pkg/__init__.py", Data("from .util import answer\n".utf8))
        try put(
            "py/pkg/util.py",
            Data(
                "import hashlib\nTABLE = [i * i for i in range(1000)]\n\ndef answer():\n    return hashlib.sha256(repr(TABLE).encode()).hexdigest()\n"
                    .utf8))
        try put("mapped/m.bin", patterned(3_000_000, seed: 3))
        // Past the fill-on-open limit (16 MiB): read in ranges as programs ask.
        try put("large/dd.bin", patterned(20 << 20, seed: 4))
        try put("large/tail.bin", patterned(18 << 20, seed: 5))
        try put("large/parallel.bin", patterned(24 << 20, seed: 6))
        for index in 0..<2000 { try put(String(format: "many/f%04d.txt", index), Data("many \(index) \(index * 31)\n".utf8)) }
        for index in 0..<260 { try put(String(format: "deep/n%03d.txt", index), Data("deep \(index)\n".utf8)) }
        try put("deep/a/b/c.bin", patterned(400_000, seed: 7))
        for tree in ["rsync", "cpa", "reflink"] {
            try put("trees/\(tree)/notes.txt", text(100, tree), date: Date(timeIntervalSince1970: 1_600_000_000))
            try put("trees/\(tree)/run.sh", Data("#!/bin/sh\necho \(tree)\n".utf8), mode: 0o755)
            try put("trees/\(tree)/sub/blob.bin", patterned(1_200_000, seed: 8), date: Date(timeIntervalSince1970: 1_500_000_000))
        }
        for index in 0..<16 {
            let needle = index % 3 == 0 ? "the needle is here\n" : ""
            try put("grep/g\(index % 4)/file\(index).txt", Data((String(decoding: text(50, "grep\(index)"), as: UTF8.self) + needle).utf8))
        }
        for index in 0..<12 {
            try put(
                "dated/d\(index).txt", Data("dated \(index)\n".utf8),
                date: Date(timeIntervalSince1970: 1_600_000_000 + Double(index) * 86_400))
        }
        try put("dated/ref", Data("ref\n".utf8), date: Date(timeIntervalSince1970: 1_600_000_000 + 5.5 * 86_400))
        try put("tarred/a.txt", text(100, "tar"))
        try put("tarred/empty", Data())
        try put("tarred/sub/b.bin", patterned(3_000_000, seed: 9))
        try put("tarred/sub/deeper/c.bin", patterned(70_001, seed: 10))
        try put("sparse/small.bin", patterned(2_000_000, seed: 11))
        try put("sparse/large.bin", patterned(17 << 20, seed: 12))
        try put("modes/never.sh", Data("#!/bin/sh\necho never downloaded\n".utf8))
        try put("bin/run.sh", Data("#!/bin/sh\necho ran \"$@\"\n".utf8), mode: 0o755)
        try put("bin/true", try #require(FileManager.default.contents(atPath: "/bin/true")), mode: 0o755)
        for index in 0..<20 { try put("sums/s\(index).bin", patterned(1000 + index * 37_000, seed: UInt64(100 + index))) }
        try put("edits/rename.txt", Data("old text, saved by rename\n".utf8))
        try put("edits/inplace.bin", patterned(300_000, seed: 13))
        try put("edits/append.txt", Data("first line\n".utf8))
        try put("edits/truncate.bin", patterned(500_000, seed: 14))
        try put("edits/vim.txt", text(500, "edit"))
    }

    /// Runs a program with `root` (the store's folder, then the replica path) and checks that
    /// both runs succeed with the same output; returns the replica's run.
    @discardableResult
    static func same(
        _ label: String, store: String, replica: String, timeout: Double = 180, _ command: @Sendable (String) -> [String]
    ) async throws -> ProgramRun {
        let expected = try await runProgram(command(store), timeout: timeout)
        #expect(expected.succeeded, "\(label) on the store: \(expected)")
        let run = try await runProgram(command(replica), timeout: timeout)
        #expect(run.succeeded, "\(label): \(run)")
        #expect(
            run.output == expected.output,
            "\(label) printed \(run.output.count) bytes, on the store \(expected.output.count): \(OnAccessTests.difference(run.output, expected.output)); \(String(decoding: run.output.prefix(300), as: UTF8.self))"
        )
        return run
    }

    /// `sh -c SCRIPT ROOT ARGUMENTS…` run in `ROOT` (so output names paths relative to it).
    static func inRoot(_ script: String, _ arguments: String...) -> @Sendable (String) -> [String] {
        { root in ["sh", "-c", "cd \"$0\" && " + script, root] + arguments }
    }

    /// The checks of programs that only read, one closure each; they may run at the same time.
    static func readChecks(store s: String, replica r: String, scratch: String) -> [(String, @Sendable () async throws -> Void)] {
        @Sendable func file(_ relative: String) -> Data? { FileManager.default.contents(atPath: s + "/" + relative) }
        return [
            (
                "vim",
                {
                    // vim reads the file (its swap file beside it is never uploaded) and writes a copy.
                    let copy = scratch + "/vim-copy.txt"
                    let run = try await runProgram(
                        ["vim.tiny", "-u", "NONE", "-i", "NONE", "-R", "-es", "-c", "w! \(copy)", "-c", "q!", r + "/text/vim.txt"])
                    #expect(run.succeeded, "vim: \(run)")
                    #expect(FileManager.default.contents(atPath: copy) == file("text/vim.txt"), "vim's copy is not the store's file")
                }
            ),
            (
                "less",
                {
                    try await same("less", store: s, replica: r) {
                        ["env", "-u", "LESSOPEN", "-u", "LESSCLOSE", "less", "-F", $0 + "/text/less.txt"]
                    }
                }
            ),
            ("file", { try await same("file", store: s, replica: r, inRoot("file -b kinds/* zip/unzip.zip db/read.sqlite")) }),
            (
                "unzip",
                {
                    try await same("unzip -t", store: s, replica: r, inRoot("unzip -tq zip/unzip.zip"))
                    try await same("unzip -p", store: s, replica: r, inRoot("unzip -p zip/unzip.zip sub/b.bin a.txt"))
                }
            ),
            (
                "python zipfile",
                {
                    try await same("python zipfile", store: s, replica: r) {
                        [
                            "python3", "-c",
                            "import hashlib, sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor i in z.infolist(): print(i.filename, hashlib.sha256(z.read(i)).hexdigest())\nprint(z.testzip())",
                            $0 + "/zip/zipfile.zip",
                        ]
                    }
                }
            ),
            (
                "sqlite3 read",
                {
                    try await same("sqlite3", store: s, replica: r) {
                        ["sqlite3", $0 + "/db/read.sqlite", "SELECT count(*), sum(a), max(b), min(b) FROM t; PRAGMA integrity_check;"]
                    }
                }
            ),
            ("git loose", { try await Self.git(s + "/git/loose", r + "/git/loose") }),
            (
                "depth 3",
                {
                    // find opens each dataless folder in turn, which serve fills before find reads it.
                    let found = try await runProgram(["find", r + "/deep", "-type", "d"])
                    #expect(found.succeeded, "find: \(found)")
                    try await same("cat at depth 3", store: s, replica: r) { ["cat", $0 + "/deep/a/b/c.bin"] }
                    try await Self.git(s + "/deep/a/b/packed", r + "/deep/a/b/packed")
                }
            ),
            (
                "python import",
                {
                    let command = "import sys; sys.path.insert(0, sys.argv[1]); import pkg; print(pkg.answer())"
                    let expected = try await runProgram(["python3", "-B", "-c", command, s + "/py"])
                    let run = try await runProgram(["python3", "-c", command, r + "/py"])
                    #expect(run.succeeded && expected.succeeded && run.output == expected.output, "python import: \(run) vs \(expected)")
                }
            ),
            (
                "mmap",
                {
                    try await same("python mmap", store: s, replica: r) {
                        [
                            "python3", "-c",
                            "import hashlib, mmap, sys\nwith open(sys.argv[1], 'rb') as f:\n    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n    print(hashlib.sha256(m[1000000:]).hexdigest(), hashlib.sha256(m[:]).hexdigest())",
                            $0 + "/mapped/m.bin",
                        ]
                    }
                }
            ),
            (
                "dd skip=",
                {
                    try await same("dd skip=", store: s, replica: r) {
                        ["dd", "if=\($0)/large/dd.bin", "bs=1M", "skip=17", "count=2", "status=none"]
                    }
                }
            ),
            ("tail -c", { try await same("tail -c", store: s, replica: r) { ["tail", "-c", "1234567", $0 + "/large/tail.bin"] } }),
            (
                "8 parallel readers",
                {
                    // Four whole reads and four ranges, at once, of one file never downloaded.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for reader in 0..<8 {
                            group.addTask {
                                if reader < 4 {
                                    try await same("sha256sum \(reader)", store: s, replica: r, inRoot("sha256sum large/parallel.bin"))
                                } else {
                                    let skip = String(20 - (reader - 4) * 5)
                                    try await same("dd \(reader)", store: s, replica: r) {
                                        ["dd", "if=\($0)/large/parallel.bin", "bs=1M", "skip=\(skip)", "count=3", "status=none"]
                                    }
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                }
            ),
            (
                "xargs -P8 cat",
                {
                    // Lines of different files may come in any order; each file is one short line.
                    let run = try await runProgram(
                        ["sh", "-c", "cd \"$0\" && find many -type f -print0 | xargs -0 -P8 -n 25 cat", r], timeout: 300)
                    #expect(run.succeeded, "xargs: \(run)")
                    let lines = String(decoding: run.output, as: UTF8.self).split(separator: "\n").sorted()
                    let expected = (0..<2000).map { String(decoding: file(String(format: "many/f%04d.txt", $0)) ?? Data(), as: UTF8.self) }
                        .joined().split(separator: "\n").sorted()
                    #expect(lines.count == 2000 && lines == expected, "xargs cat read \(lines.count) lines of 2,000")
                }
            ),
            (
                "rsync -a",
                {
                    let run = try await runProgram(["rsync", "-a", r + "/trees/rsync/", scratch + "/rsync/"])
                    #expect(run.succeeded, "rsync: \(run)")
                    Self.expectCopy(of: s + "/trees/rsync", at: scratch + "/rsync", by: "rsync -a")
                }
            ),
            (
                "cp -a",
                {
                    let run = try await runProgram(["cp", "-a", r + "/trees/cpa", scratch + "/cpa"])
                    #expect(run.succeeded, "cp -a: \(run)")
                    Self.expectCopy(of: s + "/trees/cpa", at: scratch + "/cpa", by: "cp -a")
                }
            ),
            (
                "cp --reflink=auto",
                {
                    let run = try await runProgram(["cp", "-r", "--reflink=auto", r + "/trees/reflink", scratch + "/reflink"])
                    #expect(run.succeeded, "cp --reflink=auto: \(run)")
                    Self.expectCopy(of: s + "/trees/reflink", at: scratch + "/reflink", by: "cp --reflink=auto", keepsDates: false)
                }
            ),
            ("grep -r", { try await same("grep -r", store: s, replica: r, inRoot("grep -rn needle grep | sort")) }),
            ("find -newer", { try await same("find -newer", store: s, replica: r, inRoot("find dated -newer dated/ref | sort")) }),
            (
                "du",
                {
                    // Folder sizes are the file system's own: compared for files only.
                    let expected = try await runProgram(["du", "-ab", s + "/sums", s + "/dated"])
                    let run = try await runProgram(["du", "-ab", r + "/sums", r + "/dated"])
                    #expect(run.succeeded, "du: \(run)")
                    func sizes(_ run: ProgramRun, _ root: String) -> [String: String] {
                        var sizes: [String: String] = [:]
                        for line in String(decoding: run.output, as: UTF8.self).split(separator: "\n") {
                            let parts = line.split(separator: "\t", maxSplits: 1)
                            guard parts.count == 2, String(parts[1]).hasSuffix(".bin") || String(parts[1]).hasSuffix(".txt") else {
                                continue
                            }
                            sizes[String(parts[1].dropFirst(root.count))] = String(parts[0])
                        }
                        return sizes
                    }
                    #expect(sizes(run, r).count == 32 && sizes(run, r) == sizes(expected, s), "du: \(run.output.count) bytes")
                }
            ),
            (
                "tar c",
                {
                    let archive = scratch + "/tarred.tar"
                    let run = try await OnAccessTarTests.tarRecordingTheKnownChangeTimeIssue(["tar", "cf", archive, "-C", r, "tarred"])
                    #expect(run.succeeded, "tar c must exit 0: \(run)")
                    try await Self.expectArchive(
                        archive, holds: ["tarred/a.txt", "tarred/empty", "tarred/sub/b.bin", "tarred/sub/deeper/c.bin"], of: s,
                        scratch: scratch)
                }
            ),
            (
                "tar --sparse -c",
                {
                    // tar is given whole files (Architecture, "Opens wait"), however large: it maps
                    // no hole of a file never downloaded.
                    let archive = scratch + "/sparse.tar"
                    let arguments = ["tar", "--sparse", "-cf", archive, "-C", r, "sparse/small.bin", "sparse/large.bin"]
                    let run = try await OnAccessTarTests.tarRecordingTheKnownChangeTimeIssue(arguments)
                    #expect(run.succeeded, "tar --sparse must exit 0: \(run)")
                    let out = try await Self.extract(archive, scratch: scratch, as: "sparse-out")
                    #expect(FileManager.default.contents(atPath: out + "/sparse/small.bin") == file("sparse/small.bin"))
                    let large = FileManager.default.contents(atPath: out + "/sparse/large.bin") ?? Data()
                    #expect(
                        large == file("sparse/large.bin"),
                        "tar --sparse archived \(large.count) bytes of the 17 MiB file: \(OnAccessTests.difference(large, file("sparse/large.bin") ?? Data()))"
                    )
                }
            ),
            (
                "executables",
                {
                    let script = try await runProgram([r + "/bin/run.sh", "here"])
                    #expect(script.succeeded && script.output == Data("ran here\n".utf8), "script: \(script)")
                    let binary = try await runProgram([r + "/bin/true"])
                    #expect(binary.succeeded, "ELF: \(binary)")
                }
            ),
        ]
    }

    /// `git log`, `git status` (which rewrites the index) and `git fsck` of a repository.
    static func git(_ store: String, _ replica: String) async throws {
        let log = { (folder: String) in ["git", "-C", folder, "log", "--format=%H %T %s", "--stat"] }
        let expected = try await runProgram(log(store))
        let run = try await runProgram(log(replica))
        #expect(run.succeeded && run.output == expected.output && !run.output.isEmpty, "git log \(replica): \(run)")
        let status = try await runProgram(["git", "-C", replica, "status", "--porcelain"])
        #expect(
            status.succeeded && status.output.isEmpty, "git status \(replica): \(String(decoding: status.output, as: UTF8.self)) \(status)")
        let fsck = try await runProgram(["git", "-C", replica, "fsck", "--full", "--strict"])
        #expect(fsck.succeeded && !fsck.errorText.contains("error"), "git fsck \(replica): \(fsck)")
        let show = try await runProgram(["git", "-C", replica, "show", "HEAD~1:src/sub/blob1.bin"])
        #expect(show.succeeded && show.output == FileManager.default.contents(atPath: store + "/src/sub/blob1.bin"), "git show: \(show)")
    }

    /// Every file of `source` is at `copy` with the same bytes, executable bit and (for copies
    /// that keep them) modification time, to the second.
    static func expectCopy(of source: String, at copy: String, by program: String, keepsDates: Bool = true) {
        for relative in ["notes.txt", "run.sh", "sub/blob.bin"] {
            let (from, to) = (source + "/" + relative, copy + "/" + relative)
            #expect(FileManager.default.contents(atPath: to) == FileManager.default.contents(atPath: from), "\(program): \(relative)")
            let (a, b) = (fileStatus(from), fileStatus(to))
            #expect(a.map { $0.st_mode & 0o111 } == b.map { $0.st_mode & 0o111 }, "\(program): the x bits of \(relative)")
            if keepsDates { #expect(a?.st_mtim.tv_sec == b?.st_mtim.tv_sec, "\(program): the date of \(relative)") }
        }
    }

    /// Extracts `archive` into a new folder of `scratch`.
    static func extract(_ archive: String, scratch: String, as name: String) async throws -> String {
        let folder = scratch + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let run = try await runProgram(["tar", "xf", archive, "-C", folder])
        #expect(run.succeeded, "tar x: \(run)")
        return folder
    }

    /// The archive holds `paths` with the store's bytes.
    static func expectArchive(_ archive: String, holds paths: [String], of store: String, scratch: String) async throws {
        let out = try await extract(archive, scratch: scratch, as: "tar-out")
        for path in paths {
            #expect(
                FileManager.default.contents(atPath: out + "/" + path) == FileManager.default.contents(atPath: store + "/" + path),
                "\(path) in the archive is not the store's")
        }
    }

    /// Programs that write, each on files never downloaded; returns what the store must hold
    /// once `serve` sent the changes (path: bytes).
    static func writeChecks(store s: String, replica r: String) async throws -> [String: Data] {
        func file(_ relative: String) -> Data { FileManager.default.contents(atPath: s + "/" + relative) ?? Data() }
        var expected: [String: Data] = [:]
        // An editor saving by rename: reads the file, writes a new one, renames it over.
        let renamed = try await runProgram([
            "python3", "-c",
            "import os, sys\np = sys.argv[1]\nold = open(p).read()\nopen(p + '.new', 'w').write(old.replace('old', 'new'))\nos.rename(p + '.new', p)",
            r + "/edits/rename.txt",
        ])
        #expect(renamed.succeeded, "rename: \(renamed)")
        expected["edits/rename.txt"] = Data(
            String(decoding: file("edits/rename.txt"), as: UTF8.self).replacingOccurrences(of: "old", with: "new").utf8)
        // In place at an offset (pwrite).
        let inPlace = try await runProgram([
            "python3", "-c", "import os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nos.pwrite(fd, b'XYZ' * 1000, 150000)\nos.close(fd)",
            r + "/edits/inplace.bin",
        ])
        #expect(inPlace.succeeded, "pwrite: \(inPlace)")
        var bytes = file("edits/inplace.bin")
        bytes.replaceSubrange(150_000..<153_000, with: Data(String(repeating: "XYZ", count: 1000).utf8))
        expected["edits/inplace.bin"] = bytes
        // The store's bytes before the edit: once the program wrote, serve may send the edit
        // before the next line runs (it did, on a loaded machine), and appending to what the
        // store has then expected the line twice.
        let beforeAppend = file("edits/append.txt")
        let appended = try await runProgram(["sh", "-c", "echo 'second line' >> \"$0\"", r + "/edits/append.txt"])
        #expect(appended.succeeded, ">>: \(appended)")
        expected["edits/append.txt"] = beforeAppend + Data("second line\n".utf8)
        let truncated = try await runProgram(["truncate", "-s", "123457", r + "/edits/truncate.bin"])
        #expect(truncated.succeeded, "truncate: \(truncated)")
        expected["edits/truncate.bin"] = file("edits/truncate.bin").prefix(123_457)
        let vim = try await runProgram([
            "vim.tiny", "-u", "NONE", "-i", "NONE", "-es", "-c", "%s/alpha/omega/g", "-c", "wq", r + "/edits/vim.txt",
        ])
        #expect(vim.succeeded, "vim: \(vim)")
        expected["edits/vim.txt"] = Data(
            String(decoding: file("edits/vim.txt"), as: UTF8.self).replacingOccurrences(of: "alpha", with: "omega").utf8)
        return expected
    }

    @Test(arguments: [ServedDomain.Store.local, .sftp], OnAccessLayout.allCases)
    func everyProgramReadsTheStoresBytesThroughTheReplicaPath(_ kind: ServedDomain.Store, _ layout: OnAccessLayout) async throws {
        let temp = try TemporaryFolder()
        let store = try await OnAccessTests.StoreUnderTest(kind, temp: temp)
        try await Self.makeStore(at: store.folder)
        let domain = try await ServedDomain(
            temp: temp, storeFolder: store.folder, backend: store.backend, options: store.options, files: [:], layout: layout)
        let listing = try #require(try await domain.cli.json(["ls", "d:/"]) as? [[String: Any]])
        for folder in ["/many", "/deep"] {
            #expect(listing.first { $0["path"] as? String == folder }?["dataless"] as? Bool == true, "\(folder) is not dataless")
        }
        let all = try #require(try await domain.cli.json(["ls", "-R", "d:/"]) as? [[String: Any]])
        let unlisted = all.filter { ($0["dataless"] as? Bool) == true }.compactMap { $0["path"] as? String }
            .filter { !$0.hasPrefix("/many") && !$0.hasPrefix("/deep") }
        // FUSE lists dataless folders from the database: its syncs write none.
        #expect(layout == .fuse || unlisted.isEmpty, "folders past the population budget that programs use by name: \(unlisted)")
        try await domain.startServe(["--settle", "0.2"])
        let (s, r) = (store.folder, domain.replica)
        let scratch = temp.url.appendingPathComponent("scratch").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let started = Date()

        // Every file is dataless: no blocks before a program reads it.
        let large = try #require(fileStatus(r + "/large/parallel.bin"))
        #expect(large.st_size == 24 << 20 && large.st_blocks <= 8, "blocks \(large.st_blocks)")

        try await withThrowingTaskGroup(of: Void.self) { group in
            for (_, check) in Self.readChecks(store: s, replica: r, scratch: scratch) { group.addTask { try await check() } }
            try await group.waitForAll()
        }
        let reads = Date().timeIntervalSince(started)

        // A write in WAL mode to a database never downloaded, then edits of every kind.
        let wal = try await runProgram([
            "sqlite3", r + "/db/wal.sqlite",
            "PRAGMA journal_mode=WAL; INSERT INTO t(b) SELECT 'added ' || a FROM t WHERE a <= 500; SELECT count(*) FROM t;",
        ])
        #expect(wal.succeeded && String(decoding: wal.output, as: UTF8.self) == "wal\n2500\n", "sqlite3 WAL: \(wal)")
        let query = "SELECT count(*), max(b), sum(length(b)) FROM t; PRAGMA integrity_check;"
        let written = try await runProgram(["sqlite3", r + "/db/wal.sqlite", query])
        #expect(written.succeeded, "\(written)")
        let expected = try await Self.writeChecks(store: s, replica: r)
        // chmod +x through the replica path, of a file never downloaded and of one `file` read.
        let chmodded = try await runProgram(["chmod", "+x", r + "/modes/never.sh", r + "/kinds/script.sh"])
        #expect(chmodded.succeeded, "chmod: \(chmodded)")
        let executable = { (path: String) in fileStatus(s + "/" + path).map { $0.st_mode & 0o100 != 0 } == true }
        // The store's database read from a copy (reading it in place would make its -wal there).
        let copy = scratch + "/wal-copy.sqlite"
        let arrived = await waitUntil(timeout: 120) {
            guard expected.allSatisfy({ FileManager.default.contents(atPath: s + "/" + $0.key) == $0.value }),
                executable("modes/never.sh"), executable("kinds/script.sh")
            else { return false }
            guard !FileManager.default.fileExists(atPath: s + "/db/wal.sqlite-wal"),
                let db = FileManager.default.contents(atPath: s + "/db/wal.sqlite"),
                (try? db.write(to: URL(fileURLWithPath: copy))) != nil
            else { return false }
            let stored = try? await runProgram(["sqlite3", copy, query])
            try? FileManager.default.removeItem(atPath: copy + "-wal")
            return stored?.output == written.output
        }
        #expect(
            arrived,
            "the store does not have the edits (or the x bits: \(executable("modes/never.sh")), \(executable("kinds/script.sh"))): \(expected.keys.filter { FileManager.default.contents(atPath: s + "/" + $0) != expected[$0] }); serve: \(domain.logs.suffix(3000))"
        )
        let edits = try FileManager.default.contentsOfDirectory(atPath: s + "/edits").sorted()
        #expect(edits == expected.keys.map { String($0.dropFirst("edits/".count)) }.sorted(), "the store's edits folder: \(edits)")

        // md5sum, then sha256sum, of every file the programs did not change, in one list.
        let list = scratch + "/files"
        let paths = try Self.files(below: s).filter { path in !Self.written.contains { path == $0 || path.hasPrefix($0) } }
        try Data(paths.map { $0 + "\0" }.joined().utf8).write(to: URL(fileURLWithPath: list))
        for program in ["md5sum", "sha256sum"] {
            try await Self.same(program, store: s, replica: r, timeout: 300, Self.inRoot("xargs -0 -a \"$1\" \(program) --", list))
        }
        let stored = try Self.files(below: s)
        #expect(!stored.contains { $0.contains("conflicted copy") || $0.contains(" 2.") }, "\(stored.filter { $0.contains(" ") })")
        try await domain.stopServe()
        print(
            "programs on \(kind) through \(layout): reads \(Int(reads)) s, in all \(Int(Date().timeIntervalSince(started))) s, \(paths.count) files compared"
        )
        await store.stop()
    }

    /// The files below `root` (relative paths, sorted), not following symlinks.
    static func files(below root: String) throws -> [String] {
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let path = enumerator?.nextObject() as? String {
            if fileStatus(root + "/" + path).map({ $0.st_mode & S_IFMT == S_IFREG }) == true { found.append(path) }
        }
        return found.sorted()
    }
}
