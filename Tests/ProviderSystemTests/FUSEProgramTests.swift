import FUSEFolder
import Foundation
import ProviderTesting
import Testing

@testable import ProviderSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Real programs read and write through a ``FUSESession`` mount of a ``FolderFileSystem`` whose
/// files start dataless: every byte they read is compared with the source.
@Suite(.serialized) struct FUSEProgramTests {
    @Test func programsReadDatalessFilesRight() async throws {
        let lab = try FUSELab()
        let big = FUSELab.bytes(3 << 20 + 12_345, seed: 7)
        try lab.addDataless("big.bin", big)
        try FileManager.default.createDirectory(atPath: lab.backing + "/tree/deeper", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: lab.source + "/tree/deeper", withIntermediateDirectories: true)
        for index in 0..<20 {
            try lab.addDataless("tree/file\(index).txt", FUSELab.bytes(1000 + index * 997, seed: UInt64(index)))
        }
        try lab.addDataless("tree/deeper/last.bin", FUSELab.bytes(200_000, seed: 99))
        try await lab.start()

        // A few ranges first: only their chunks are fetched.
        try await lab.shell(
            "dd if=mount/big.bin bs=100000 skip=5 count=3 status=none > part && dd if=source/big.bin bs=100000 skip=5 count=3 status=none | cmp - part"
        )
        try await lab.shell("tail -c 1000 mount/big.bin > t1 && tail -c 1000 source/big.bin > t2 && cmp t1 t2")
        let fetched = lab.fileSystem.statistics.fetchedBytes
        #expect(fetched > 0 && fetched < UInt64(big.count) / 2, "dd skip= and tail -c fetched \(fetched) of \(big.count) bytes")
        #expect(!lab.fileSystem.isComplete("big.bin"))

        // No holes: SEEK_HOLE finds the end of a file whose bytes are mostly missing.
        let seek = try await lab.output(
            "python3 -c 'import os,sys; f=os.open(sys.argv[1], os.O_RDONLY); print(os.lseek(f, 0, os.SEEK_HOLE), os.lseek(f, 4096, os.SEEK_DATA))' mount/big.bin"
        )
        #expect(seek == "\(big.count) 4096\n")

        try await lab.shell("cat mount/big.bin > whole && cmp whole source/big.bin")
        try await lab.shell(
            "python3 -c 'import mmap,sys; f=open(sys.argv[1],\"rb\"); m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ); sys.stdout.buffer.write(m[:])' mount/tree/deeper/last.bin | cmp - source/tree/deeper/last.bin"
        )
        #expect(try await lab.output("stat -c %s mount/big.bin") == "\(big.count)\n")
        let listing = try await lab.output("ls -l mount/tree | tail -n +2 | wc -l")
        #expect(listing == "21\n")
        let found = try await lab.output("cd mount && find . | sort")
        let expected = try await lab.output("cd source && find . | sort")
        #expect(found == expected)
        let dots = try await lab.output("ls -a mount/tree | head -2")
        #expect(dots == ".\n..\n")
        // A program run from the mount (exec maps the dataless file's pages).
        try lab.addDataless("echo-copy", try Data(contentsOf: URL(fileURLWithPath: "/bin/echo")))
        chmod(lab.source + "/echo-copy", 0o755)
        chmod(lab.backing + "/echo-copy", 0o755)
        #expect(try await lab.output("mount/echo-copy run from the mount") == "run from the mount\n")
        // tar reads every file through the mount; its archive unpacks to the source's bytes.
        try await lab.shell(
            "tar cf tree.tar -C mount tree && mkdir unpacked && tar xf tree.tar -C unpacked && diff -r unpacked/tree source/tree")
        try await lab.stop()
    }

    @Test func programsWriteThroughTheMount() async throws {
        let lab = try FUSELab()
        try lab.addDataless("notes.txt", Data("first line\n".utf8))
        try await lab.start()
        try await lab.shell("echo 'second line' >> mount/notes.txt")
        #expect(try String(contentsOfFile: lab.backing + "/notes.txt", encoding: .utf8) == "first line\nsecond line\n")
        try await lab.shell("printf 'abc' > mount/new.txt && truncate -s 10 mount/new.txt && truncate -s 2 mount/new.txt")
        #expect(FileManager.default.contents(atPath: lab.backing + "/new.txt") == Data("ab".utf8))
        try await lab.shell("mkdir -p mount/a/b && mv mount/new.txt mount/a/b/moved.txt && [ ! -e mount/new.txt ]")
        #expect(FileManager.default.contents(atPath: lab.backing + "/a/b/moved.txt") == Data("ab".utf8))
        try await lab.shell("mv mount/a mount/renamed && cat mount/renamed/b/moved.txt | grep -qx ab")
        // Save-by-rename, as editors do: write a new file, rename it over the old one.
        try await lab.shell("printf 'saved\\n' > mount/.notes.swp && mv mount/.notes.swp mount/notes.txt && grep -qx saved mount/notes.txt")
        try await lab.shell("rm mount/renamed/b/moved.txt && rmdir mount/renamed/b mount/renamed && [ ! -e backing/renamed ]")
        try await lab.shell("chmod 600 mount/notes.txt && [ \"$(stat -c %a backing/notes.txt)\" = 600 ]")
        try await lab.shell(
            "touch -d '2001-02-03 04:05:06.123456789' mount/notes.txt && [ \"$(stat -c %y mount/notes.txt)\" = \"$(stat -c %y backing/notes.txt)\" ]"
        )
        try await lab.shell("ln -s notes.txt mount/link && [ \"$(readlink mount/link)\" = notes.txt ] && grep -qx saved mount/link")

        // Writes through a shared mapping reach the backing file (msync, then close).
        try await lab.shell(
            "python3 -c 'import mmap,sys; f=open(sys.argv[1],\"r+b\"); m=mmap.mmap(f.fileno(),0); m[0:5]=b\"MAPPD\"; m.flush(); m.close(); f.close()' mount/notes.txt"
        )
        #expect(try String(contentsOfFile: lab.backing + "/notes.txt", encoding: .utf8) == "MAPPD\n")

        // SQLite in WAL mode: shared memory (mmap of -shm), locks, fsync.
        try await lab.shell(
            """
            sqlite3 mount/db.sqlite 'PRAGMA journal_mode=WAL;' 'CREATE TABLE t(x INTEGER, y TEXT);' \
              'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 5000) INSERT INTO t SELECT i, hex(randomblob(40)) FROM n;' \
              >/dev/null
            """)
        #expect(try await lab.output("sqlite3 mount/db.sqlite 'SELECT count(*) FROM t;' 'PRAGMA integrity_check;'") == "5000\nok\n")
        #expect(try await lab.output("sqlite3 mount/db.sqlite 'PRAGMA journal_mode;'") == "wal\n")

        // git: many small files, renames into place, an index it rewrites.
        try await lab.shell(
            """
            cd mount && mkdir repo && cd repo && git init -q && git config user.email t@example.com && git config user.name T \
              && for i in $(seq 1 30); do echo "line $i" > f$i.txt; done && git add . && git commit -qm first \
              && echo more >> f1.txt && git commit -qam second && git fsck --strict 2>&1 && [ "$(git rev-list --count HEAD)" = 2 ] \
              && [ -z "$(git status --porcelain)" ]
            """)
        // What git wrote is in the backing folder: the repository works from there too.
        try await lab.shell("cd backing/repo && git fsck --strict 2>&1 && git log --oneline | wc -l | grep -qx 2")
        try await lab.stop()
    }

    @Test func hostileNamesAndPaths() async throws {
        // A mount folder whose name mountinfo escapes, a domain name with the option separator.
        let lab = try FUSELab(mountName: "mount point, with\ttab")
        try await lab.start(name: "domain, with comma\\and backslash")
        let line = try #require(lab.mountInfo, "mountinfo has no line for \(lab.mount)")
        #expect(line.contains(" fuse.fileprovider "), "mountinfo: \(line)")
        let script = """
            import os, sys, errno
            root = sys.argv[1].encode()
            names = [b'\\xff\\xfe not utf-8', b'new\\nline', b' spaced ', b'a' * 255, 'caf\\u00e9'.encode()]
            for name in names:
                with open(os.path.join(root, name), 'wb') as f: f.write(name)
            listed = sorted(os.listdir(root))
            assert listed == sorted(names), listed
            for name in names:
                with open(os.path.join(root, name), 'rb') as f: assert f.read() == name
            try:
                open(os.path.join(root, b'b' * 256), 'wb')
                print('no error for a 256-byte name')
            except OSError as e:
                assert e.errno == errno.ENAMETOOLONG, e
            os.rename(os.path.join(root, names[0]), os.path.join(root, b'\\x80renamed'))
            assert os.path.exists(os.path.join(root, b'\\x80renamed'))
            # The names' bytes are the backing folder's names.
            assert sorted(os.listdir(b'backing')) == sorted([b'\\x80renamed'] + names[1:]), os.listdir(b'backing')
            print('ok')
            """
        try script.write(toFile: lab.folder.path + "/names.py", atomically: true, encoding: .utf8)
        #expect(try await lab.output("python3 names.py 'mount point, with\ttab'") == "ok\n")
        try await lab.stop()
    }
}
