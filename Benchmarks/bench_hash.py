"""Content hashes and search benchmarks (issue 41), the group `hash`:

- hash-download-1g: `materialize` of one 1 GiB file from a local store, dataset and replica on
  the tmpfs, hashed as it streams (the build as shipped) vs the same build with hashing turned
  off (`FILEPROVIDER_NO_CONTENT_HASH=1`: no sink is installed, so the local backend copies with
  `copy_file_range` as it did before hashes). Target: at least 0.95× the speed without hashing.
- hash-download-1g-sftp: the same over SFTP (the bench's sshd on 127.0.0.1, Benchmarks/bench_sftp.py),
  the store's file and the replica on the tmpfs. Same target.
- find-1m: `fileproviderctl find t -name '*.pdf'` over the domain of the scale-1m tree (1,000,000
  files, none of them a PDF: every row is tested, nothing is printed) after its first sync
  (untimed), beside GNU `find TREE -name '*.pdf'` over the tree on disk and `plocate -d DB
  '*.pdf'` over a database `updatedb -U TREE -o DB` made of that tree only (untimed, in the run's
  work folder; plocate exits 1 when it finds nothing, so it runs under `sh -c`, which accepts 1).
  Target: < 200 ms. Since v24 the first name search of a database builds the `item_name` index
  (Docs/Database.md): the setup runs one `find -name` after the sync, untimed, and
- find-1m-first times that first one instead, the index's build included (no target; the ratio
  to GNU `find` is reported).
- dupes-2x100k: `fileproviderctl dupes` over two domains of 100,000 files each (dataset
  dupes2x100k: trees a and b, 10 × 100 × 100 files of 100-2000 bytes; every tenth file of b is a
  copy of a file of a under another name and folder), both synced and materialized (untimed), so
  every file has its hash; beside `jdupes -r` over the two trees on disk (the bytes the
  downloaded copies hold). Target: < 10 s ("seconds, not minutes").

Why a switch and not the build before hashes for "without hashing": the switch runs the same
binary, so the only difference is the hashing (the sink and the local backend's buffered copy it
needs); the build before hashes (`--baseline`) differs by every other commit since. Run both to
see both: `bench.py --only hash-download-1g --baseline OLD/fileproviderctl`.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

GROUP = "hash"
NO_HASH = "FILEPROVIDER_NO_CONTENT_HASH=1"


def make_dupes(root: Path) -> None:
    """Trees a and b of 10 × 100 × 100 files of 100-2000 seeded random bytes; every tenth file of
    b (10,000) has the bytes of a file of a at another path (b's d{x}/d{y}/dup{n}.bin holds a's
    d{9-x}/d{99-y}/file{n}.bin). Written with one openat/write/close per file, as make_tree."""
    rng = random.Random(200_000)
    pool = memoryview(rng.randbytes(4 << 20))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    sizes: dict[tuple[str, int, int, int], tuple[int, int]] = {}
    for tree in ("a", "b"):
        for x in range(10):
            for y in range(100):
                folder = root / tree / f"d{x}" / f"d{y:02d}"
                folder.mkdir(parents=True)
                dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    for n in range(100):
                        if tree == "b" and n % 10 == 0:
                            name, (offset, size) = f"dup{n:02d}.bin", sizes[("a", 9 - x, 99 - y, n)]
                        else:
                            name, size = f"file{n:02d}.bin", rng.randint(100, 2000)
                            offset = rng.randrange(len(pool) - size)
                            sizes[(tree, x, y, n)] = (offset, size)
                        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
                        try:
                            data = pool[offset : offset + size]
                            while data:
                                data = data[os.write(fd, data) :]
                        finally:
                            os.close(fd)
                finally:
                    os.close(dir_fd)
        print(f"  tree {tree}: 100,000 files", file=sys.stderr, flush=True)


def scale_dataset() -> str:
    """The scale-1m rows' dataset name (Benchmarks/bench_scale.py), which find-1m reuses."""
    import bench_scale

    top = bench_scale.top_folders()
    return "scale1m" if top == 100 else f"scale1m-{top}x100x100"


def register(bench) -> None:
    Run, Tool, Benchmark, Target, ours, DOMAIN = bench.Run, bench.Tool, bench.Benchmark, bench.Target, bench.ours, bench.DOMAIN
    here = Path(__file__).resolve()

    def make(root: Path) -> None:
        subprocess.run([sys.executable, str(here), "make-dupes", str(root)], check=True)

    bench.DATASETS["dupes2x100k"] = bench.Dataset("dupes2x100k", 1, make)

    def unhashed(argv: list[str]) -> list[str]:
        return ["env", NO_HASH, *argv]

    def materialize(r) -> list[list[str]]:
        return [r.fpctl("materialize", f"{DOMAIN}:/big.bin")]

    def sftp_add_and_sync(r) -> list[list[str]]:
        import bench_sftp

        s = bench_sftp.server()
        return [
            r.fpctl(
                "domain", "add", DOMAIN, "--backend", "sftp", "--host", "127.0.0.1", "--port", str(s.port), "--user", s.user,
                "--identity", str(s.key), "--known-hosts", str(s.known_hosts), "--root", str(r.data), "--mode", "placeholder-files",
            ),
            r.fpctl("sync", DOMAIN),
        ]

    def local_add_and_sync(r) -> list[list[str]]:
        return [
            r.fpctl("domain", "add", DOMAIN, "--backend", "local", "--root", str(r.data), "--mode", "placeholder-files"),
            r.fpctl("sync", DOMAIN),
        ]

    def download_row(name: str, store: str, setup) -> Benchmark:
        """The 1 GiB download hashed, beside the same download with hashing off."""
        shown = f" ({store})" if store else ""
        without = f"fileproviderctl materialize{shown}, hashing off ({NO_HASH})"
        return Benchmark(
            name,
            "big1g",
            [
                ours(f"fileproviderctl materialize ({store + ', ' if store else ''}hashing)", materialize, setup=setup),
                Tool(without, lambda r: [unhashed(argv) for argv in materialize(r)], setup=setup),
            ],
            reference=without,
            target=enough,
            group=GROUP,
            tmpfs=True,
        )

    enough = Target("≥ 0.95× the speed without hashing", bench.at_least_speed(0.95, "").met)

    updatedb_db = lambda r: r.work / "plocate.db"

    def updatedb(r) -> list[list[str]]:
        # Only the benchmark tree, into the run's own database; nothing pruned (the system's
        # /etc/updatedb.conf prunes bind mounts, which the data folder may be on).
        return [[
            "updatedb", "-U", str(r.data), "-o", str(updatedb_db(r)),
            "--prune-bind-mounts", "no", "--prunefs", "", "--prunepaths", "", "--prunenames", "",
        ]]

    def plocate(r) -> list[list[str]]:
        return [["sh", "-c", 'plocate -d "$1" "*.pdf"; [ $? -le 1 ]', "sh", str(updatedb_db(r))]]

    def two_domains(r) -> list[list[str]]:
        commands = []
        for name in ("a", "b"):
            commands += [
                r.fpctl("domain", "add", name, "--backend", "local", "--root", str(r.data / name), "--mode", "placeholder-files"),
                r.fpctl("sync", name),
                r.fpctl("materialize", "-R", f"{name}:/"),
            ]
        return commands

    bench.BENCHMARKS += [
        download_row("hash-download-1g", "", local_add_and_sync),
        download_row("hash-download-1g-sftp", "sftp", sftp_add_and_sync),
        Benchmark(
            "find-1m",
            scale_dataset(),
            [
                ours(
                    "fileproviderctl find t -name '*.pdf'",
                    lambda r: [r.fpctl("find", DOMAIN, "-name", "*.pdf")],
                    setup=lambda r: [*local_add_and_sync(r), r.fpctl("find", DOMAIN, "-name", "*.pdf")],
                ),
                Tool("find TREE -name '*.pdf'", lambda r: [["find", str(r.data), "-name", "*.pdf"]]),
                Tool("plocate -d DB '*.pdf'", plocate, setup=updatedb),
            ],
            reference="find TREE -name '*.pdf'",
            target=bench.under_seconds(0.200),
            also=(("plocate -d DB '*.pdf'", bench.ratio_reported("plocate")),),
            items=1_000_000,
            group=GROUP,
        ),
        Benchmark(
            "find-1m-first",
            scale_dataset(),
            [
                ours(
                    "fileproviderctl find t -name '*.pdf', the first (builds item_name)",
                    lambda r: [r.fpctl("find", DOMAIN, "-name", "*.pdf")],
                    setup=local_add_and_sync,
                ),
                Tool("find TREE -name '*.pdf'", lambda r: [["find", str(r.data), "-name", "*.pdf"]]),
            ],
            reference="find TREE -name '*.pdf'",
            target=bench.ratio_reported("find"),
            items=1_000_000,
            group=GROUP,
        ),
        Benchmark(
            "dupes-2x100k",
            "dupes2x100k",
            [
                ours("fileproviderctl dupes", lambda r: [r.fpctl("dupes")], setup=two_domains),
                Tool("jdupes -r a b", lambda r: [["jdupes", "-r", "-q", str(r.data / "a"), str(r.data / "b")]]),
            ],
            reference="jdupes -r a b",
            target=Target("< 10 s", lambda mine, ref: mine < 10),
            also=(("jdupes -r a b", bench.ratio_reported("jdupes")),),
            items=200_000,
            group=GROUP,
        ),
    ]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make-dupes":
        make_dupes(Path(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} make-dupes ROOT")
