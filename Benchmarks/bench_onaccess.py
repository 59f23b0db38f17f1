"""On-access benchmarks (issue 16): `cat` of dataless files of a `--mode dataless` SFTP domain
while `fileproviderctl serve` runs, against `sftp get`, a plain local `cat` and `cat` through
`rclone mount --vfs-cache-mode full`, all on the sshd of bench_sftp.py.

- onaccess-first-read-1g: the first `cat` of a dataless 1 GiB file (serve fetches it on
  access) vs `sftp get` and the first `cat` through a fresh rclone mount (fresh vfs cache).
  Targets: at least 0.85× sftp get's throughput, and faster than rclone.
- onaccess-second-read-1g: the second `cat` of the same file vs `cat` of the local original
  from the page cache and the second `cat` through the rclone mount. Target: at least 0.95×
  the local cat's speed.
- onaccess-read-1000: one `cat` of 1,000 dataless 4 KiB files (small10k/d0), one after the
  other, vs the same through a fresh rclone mount and `sftp get -r` of the folder. Targets:
  faster than rclone, at most 1.2× sftp get -r's time (issue 39; the folder read-ahead of the
  on-access path fetches the folder's other small files in batches once `cat` has read three).

Ours and rclone run as root (fanotify pre-content marks, FUSE: fuse3). Each iteration adds the
domain afresh (`domain add --mode dataless --hydration full`: whole files on first access, as
these rows always measured; progressive hydration has its rows in bench_partial.py; `sync`: the
files are sparse and dataless), then
Benchmarks/onaccess_read.py starts the server, waits for its mount, times the `cat` and stops
it; its time replaces the wall time, and the peak MiB column is the server's peak RSS.
"""

from __future__ import annotations

import sys
from pathlib import Path

READ = Path(__file__).resolve().parent / "onaccess_read.py"


def register(bench) -> None:
    import bench_sftp  # the same module bench.py loaded (sys.modules): one sshd for all

    server = bench_sftp.server
    Tool, Benchmark, Target, DOMAIN = bench.Tool, bench.Benchmark, bench.Target, bench.DOMAIN

    def replica(r) -> Path:
        return r.work / "replica"

    def add_and_sync(root):
        def commands(r) -> list[list[str]]:
            s = server()
            return [
                [
                    "env", "FILEPROVIDER_EXPERIMENTAL_DATALESS=1",
                    *r.fpctl(
                        "domain", "add", DOMAIN, "--mode", "dataless", "--hydration", "full", "--replica", str(replica(r)),
                        "--backend", "sftp", "--host", "127.0.0.1", "--port", str(s.port), "--user", s.user,
                        "--identity", str(s.key), "--known-hosts", str(s.known_hosts), "--root", str(root(r)),
                    ),
                ],
                r.fpctl("sync", DOMAIN),
            ]

        return commands

    def ours(name: str, root, files, second: bool = False):
        return Tool(
            name,
            lambda r: [
                [
                    sys.executable, str(READ), "ours", str(bench.FPCTL), str(r.home), DOMAIN, str(replica(r)),
                    "--source", str(root(r)), *(["--second"] if second else []), *files(r),
                ]
            ],
            setup=add_and_sync(root),
            ours=True,
            reports=True,
        )

    def rclone(name: str, root, files, second: bool = False):
        return Tool(
            name,
            lambda r: [
                [
                    sys.executable, str(READ), "rclone", server().rclone_remote(root(r)), str(r.work / "mnt"),
                    str(r.work / "vfs-cache"), "--rclone", bench.RCLONE, "--source", str(root(r)), *(["--second"] if second else []), *files(r),
                ]
            ],
            reports=True,
        )

    def sftp_batch(r, commands: str) -> list[str]:
        batch = r.work / "batch"
        batch.write_text(commands)
        s = server()
        return ["sftp", "-q", "-b", str(batch), "-P", str(s.port), *s.ssh_options(), s.target()]

    big = lambda r: r.data
    big_files = lambda r: ["big.bin"]
    small = lambda r: r.data / "d0"
    small_files = lambda r: sorted(p.name for p in small(r).iterdir())
    make_dest = lambda r: [["mkdir", "-p", str(r.dest)]]

    def at_least(fraction: float, peer: str) -> Target:
        return Target(f"≥ {fraction:g}× {peer}'s throughput", lambda mine, ref: ref is not None and mine * fraction <= ref)

    def faster_than(peer: str) -> Target:
        return Target(f"< {peer}", lambda mine, ref: ref is not None and mine < ref)

    RCLONE_FIRST = "cat via rclone mount (first read)"
    bench.BENCHMARKS += [
        Benchmark(
            "onaccess-first-read-1g",
            "big1g",
            [
                ours("fileproviderctl serve: cat (first read)", big, big_files),
                Tool("sftp get", lambda r: [sftp_batch(r, f'get "{r.data}/big.bin" "{r.dest}/big.bin"\n')], setup=make_dest),
                rclone(RCLONE_FIRST, big, big_files),
            ],
            reference="sftp get",
            target=at_least(0.85, "sftp get"),
            also=((RCLONE_FIRST, faster_than("rclone mount")),),
        ),
        Benchmark(
            "onaccess-second-read-1g",
            "big1g",
            [
                ours("fileproviderctl serve: cat (second read)", big, big_files, second=True),
                Tool(
                    "cat (local file, page cache)",
                    lambda r: [["cat", str(r.data / "big.bin")]],
                    setup=lambda r: [["cat", str(r.data / "big.bin")]],
                ),
                rclone("cat via rclone mount (second read)", big, big_files, second=True),
            ],
            reference="cat (local file, page cache)",
            target=at_least(0.95, "local cat"),
        ),
        Benchmark(
            "onaccess-read-1000",
            "small10k",
            [
                ours("fileproviderctl serve: cat of 1,000 files", small, small_files),
                rclone("cat of 1,000 files via rclone mount", small, small_files),
                Tool("sftp get -r", lambda r: [sftp_batch(r, f'get -r "{small(r)}" "{r.dest}"\n')]),
            ],
            reference="sftp get -r",
            target=bench.at_most_times(1.2, "sftp get -r"),
            also=(("cat of 1,000 files via rclone mount", faster_than("rclone mount")),),
        ),
    ]
