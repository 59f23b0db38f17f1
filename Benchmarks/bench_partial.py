"""Progressive hydration benchmarks (issue 17): first reads of parts of a dataless 1 GiB file of
a `--mode dataless --hydration progressive` SFTP domain while `fileproviderctl serve` runs,
against `rclone mount --vfs-cache-mode full` and OpenSSH's `sftp get`, all on the sshd of
bench_sftp.py.

- partial-first-mib: `head -c 1M` of the dataless file (never downloaded) vs the same through
  a fresh rclone mount (fresh vfs cache). Target: no slower than rclone.
- partial-random-reads: 1,000 `os.pread`s of 64 KiB at random offsets (seed 17, the same
  offsets for both) by one reader, vs the same through a fresh rclone mount. Target: faster
  than rclone.
- partial-sequential: `cat` of the whole dataless file (progressive hydration: chunks with
  read-ahead) vs `sftp get` of it, and, for context, `cat` with `--hydration full` (the whole
  file fetched on the first access). Target: at least 0.85× sftp get's throughput.

Each iteration adds the domain afresh (`domain add --mode dataless --hydration …`, `sync`: the
file is dataless) and rclone gets a fresh cache folder; then Benchmarks/partial_read.py starts
the server, times the read, counts the bytes fetched (ours: st_blocks × 512 of the file in
`<home>/replicas/<domain>/`; rclone: of its vfs cache), checks the bytes read and stops the
server. The peak MiB column is the server's peak RSS.
"""

from __future__ import annotations

import sys
from pathlib import Path

READ = Path(__file__).resolve().parent / "partial_read.py"
FILE = "big.bin"


def register(bench) -> None:
    import bench_sftp  # the same module bench.py loaded (sys.modules): one sshd for all

    server = bench_sftp.server
    Tool, Benchmark, Target, DOMAIN = bench.Tool, bench.Benchmark, bench.Target, bench.DOMAIN

    def replica(r) -> Path:
        return r.work / "replica"

    def add_and_sync(hydration: str):
        def commands(r) -> list[list[str]]:
            s = server()
            return [
                r.fpctl(
                    "domain", "add", DOMAIN, "--mode", "dataless", "--hydration", hydration, "--replica", str(replica(r)),
                    "--backend", "sftp", "--host", "127.0.0.1", "--port", str(s.port), "--user", s.user,
                    "--identity", str(s.key), "--known-hosts", str(s.known_hosts), "--root", str(r.data),
                ),
                r.fpctl("sync", DOMAIN),
            ]

        return commands

    def ours(name: str, workload: str, hydration: str = "progressive", is_ours: bool = True):
        return Tool(
            name,
            lambda r: [
                [
                    sys.executable, str(READ), "ours", str(bench.FPCTL), str(r.home), DOMAIN, str(replica(r)),
                    "--hydration", hydration, "--source", str(r.data / FILE), "--file", FILE, workload,
                ]
            ],
            setup=add_and_sync(hydration),
            ours=is_ours,
            reports=True,
        )

    def rclone(name: str, workload: str):
        return Tool(
            name,
            lambda r: [
                [
                    sys.executable, str(READ), "rclone", server().rclone_remote(r.data), str(r.work / "mnt"),
                    str(r.work / "vfs-cache"), "--rclone", bench.RCLONE, "--source", str(r.data / FILE), "--file", FILE, workload,
                ]
            ],
            reports=True,
        )

    def sftp_get(r) -> list[list[str]]:
        batch = r.work / "batch"
        batch.write_text(f'get "{r.data}/{FILE}" "{r.dest}/{FILE}"\n')
        s = server()
        return [["sftp", "-q", "-b", str(batch), "-P", str(s.port), *s.ssh_options(), s.target()]]

    no_slower_than = lambda peer: Target(f"≤ {peer}", lambda mine, ref: ref is not None and mine <= ref)
    faster_than = lambda peer: Target(f"< {peer}", lambda mine, ref: ref is not None and mine < ref)
    at_least = lambda fraction, peer: Target(
        f"≥ {fraction:g}× {peer}'s throughput", lambda mine, ref: ref is not None and mine * fraction <= ref
    )

    RCLONE_HEAD = "head -c 1M via rclone mount (fresh cache)"
    RCLONE_RANDOM = "1,000 random 64 KiB preads via rclone mount (fresh cache)"
    bench.BENCHMARKS += [
        Benchmark(
            "partial-first-mib",
            "big1g",
            [ours("fileproviderctl serve: head -c 1M (progressive)", "head"), rclone(RCLONE_HEAD, "head")],
            reference=RCLONE_HEAD,
            target=no_slower_than("rclone mount"),
        ),
        Benchmark(
            "partial-random-reads",
            "big1g",
            [ours("fileproviderctl serve: 1,000 random 64 KiB preads (progressive)", "random"), rclone(RCLONE_RANDOM, "random")],
            reference=RCLONE_RANDOM,
            target=faster_than("rclone mount"),
        ),
        Benchmark(
            "partial-sequential",
            "big1g",
            [
                ours("fileproviderctl serve: cat (progressive, first read)", "cat"),
                Tool("sftp get", sftp_get, setup=lambda r: [["mkdir", "-p", str(r.dest)]]),
                ours("fileproviderctl serve: cat (--hydration full, first read)", "cat", hydration="full", is_ours=False),
            ],
            reference="sftp get",
            target=at_least(0.85, "sftp get"),
        ),
    ]
