"""Two-way sync benchmarks (issue 5): against `rclone bisync` on the same trees.

Each run works on its own copy of the dataset (the store), so edits never touch the shared data.
rclone bisync syncs the store with a second local folder, which plays the replica; its state
lives in the run's work folder (--workdir).
"""

from __future__ import annotations

import sys
from pathlib import Path

EDIT = """
import os, sys
folder = sys.argv[1]
names = sorted(os.listdir(folder))[:1000]
for name in names:
    with open(os.path.join(folder, name), "r+b") as f:
        f.write(b"edited by the benchmark")
"""


LATENCY = Path(__file__).resolve().parent / "serve_latency.py"


def register(bench) -> None:
    Run, Tool, Benchmark, ours = bench.Run, bench.Tool, bench.Benchmark, bench.ours
    DOMAIN = bench.DOMAIN

    def store(r):
        return r.work / "store"

    def copy_store(r):
        return [["cp", "-a", str(r.data), str(store(r))]]

    def add_and_sync(r):
        return copy_store(r) + [
            r.fpctl("domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "local", "--root", str(store(r))),
            r.fpctl("sync", DOMAIN),
        ]

    def replica(r):
        return r.home / "domains" / DOMAIN

    def bisync(r, *extra):
        return r.rclone("bisync", str(store(r)), str(r.dest), "--workdir", str(r.work / "bisync"), *extra)

    def bisync_setup(r):
        return copy_store(r) + [["mkdir", "-p", str(r.dest)], bisync(r, "--resync")]

    bench.BENCHMARKS.append(
        Benchmark(
            "resync-100k",
            "tree100k",
            [
                ours("fileproviderctl sync (no changes)", lambda r: [r.fpctl("sync", DOMAIN)], setup=add_and_sync),
                Tool("rclone bisync (no changes)", lambda r: [bisync(r)], setup=bisync_setup),
            ],
            reference="rclone bisync (no changes)",
            target=bench.Target("≥ 5× faster than rclone bisync", lambda ours_s, ref: ref is not None and ours_s * 5 <= ref),
            items=100_000,
        )
    )
    bench.BENCHMARKS.append(
        Benchmark(
            "upload-1000-edits",
            "small10k",
            [
                ours(
                    "fileproviderctl sync (1,000 edited files)",
                    lambda r: [r.fpctl("sync", DOMAIN)],
                    setup=lambda r: add_and_sync(r)
                    + [r.fpctl("materialize", "-R", f"{DOMAIN}:/d0"), ["python3", "-c", EDIT, str(replica(r) / "d0")]],
                ),
                Tool(
                    "rclone bisync (1,000 edited files)",
                    lambda r: [bisync(r)],
                    setup=lambda r: bisync_setup(r) + [["python3", "-c", EDIT, str(r.dest / "d0")]],
                ),
            ],
            reference="rclone bisync (1,000 edited files)",
            target=bench.faster_than("rclone bisync"),
            items=1_000,  # the edited files
        )
    )
    # With serve running, a saved file starts uploading within 1 s: the median time from a save
    # (write and close, or an editor's rename into place) to the file being in the store, over
    # 10 saves into a replica of 10,000 files (Benchmarks/serve_latency.py measures it).
    bench.BENCHMARKS.append(
        Benchmark(
            "serve-upload-latency",
            "small10k",
            [
                Tool(
                    "fileproviderctl serve: save → in the store (median of 10)",
                    lambda r: [
                        [sys.executable, str(LATENCY), str(bench.FPCTL), str(r.home), DOMAIN, str(replica(r)), str(store(r)), "--saves", "10"]
                    ],
                    setup=add_and_sync,
                    ours=True,
                    reports=True,
                ),
            ],
            reference="fileproviderctl serve: save → in the store (median of 10)",
            target=bench.under_seconds(1.0),
        )
    )
