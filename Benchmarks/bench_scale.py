"""The scale-1m group (issue 18): a local store of 1,000,000 small files, 100 × 100 folders of 100
files each (10,100 folders), against rclone on the same tree.

- scale-1m-first-sync: `domain add --sync` (one process) vs `rclone lsjson -R`. Targets: ≤ 1.0× rclone
  lsjson's time (issue 39's bar, rclone 1.75), peak RSS < 150 MiB.
- scale-1m-resync: a `sync` with nothing changed, after an untimed first sync, vs `rclone lsjson
  -R` and `rclone bisync` with nothing changed (its replica is a hard-linked copy of the tree,
  `cp -al`, made known to bisync with an untimed `--resync`). bisync runs once, without warm-up,
  and is killed after BENCH_BISYNC_TIMEOUT seconds (default 3600; then it is FAILED and so is
  the target against it). Targets: ≤ 1.2× rclone lsjson, ≥ 10× faster than bisync, peak < 150 MiB.
- scale-1m-serve-change: with `serve` running on the synced domain, a file saved into a
  populated 100-file folder of the replica (d00/d00, populated in the setup) is in the store:
  median of 5 saves (Benchmarks/serve_latency.py; serve's first sync is not timed). The store is
  the shared tree itself, so the script removes the saved files from it once serve has stopped.
  Target: < 1 s.
- scale-1m-status, scale-1m-domain-list, scale-1m-ls (`ls` of d00/d00, 100 files; peer `ls -la`
  of the same folder of the tree): each < 50 ms, after an untimed first sync.
- scale-serve-10x100k: ten local stores of 100,000 files each (10 × 100 × 100, dataset
  serve10x100k, generated once like scale1m), ten domains added and synced (untimed), then one
  `serve` of all ten with default options (Benchmarks/serve_idle.py): after every domain's
  first sync in serve, the CPU time serve uses in 60 s with nothing changing, its resident
  memory and peak, and how soon a file saved in three of the replicas is in its store. Runs
  once. Targets: < 0.6 CPU-seconds in the 60 s (1% of a core), peak < 200 MiB.

The rows belong to the group `scale-1m` (`--only scale-1m`, `--skip scale-1m`). The tree is
generated once (Benchmarks/make_tree.py, a few minutes) into Benchmarks/data/scale1m with its
own stamp. BENCH_SCALE_1M_FOLDERS=N makes the tree N × 100 × 100 instead (dataset
scale1m-Nx100x100, its own stamp), to try the rows at a smaller size; the row names stay.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAKE_TREE = HERE / "make_tree.py"
LATENCY = HERE / "serve_latency.py"
SERVE_IDLE = HERE / "serve_idle.py"
SERVED_DOMAINS = 10  # scale-serve-10x100k: ten domains of 100,000 files
GROUP = "scale-1m"
FOLDER = "d00/d00"  # a folder of 100 files, in every size of the tree


def top_folders() -> int:
    value = os.environ.get("BENCH_SCALE_1M_FOLDERS", "100")
    try:
        top = int(value)
    except ValueError:
        top = 0
    if top < 1:
        raise SystemExit(f"BENCH_SCALE_1M_FOLDERS must be a whole number of at least 1, not {value!r}")
    return top


def register(bench) -> None:
    Run, Tool, Benchmark, Target, ours, DOMAIN = bench.Run, bench.Tool, bench.Benchmark, bench.Target, bench.ours, bench.DOMAIN
    top = top_folders()
    files = top * 100 * 100
    dataset = "scale1m" if top == 100 else f"scale1m-{top}x100x100"

    def make(root: Path) -> None:
        print(f"  {files:,} files in {top + top * 100:,} folders (generated once; reused while {dataset}.stamp matches)", file=sys.stderr)
        subprocess.run([sys.executable, str(MAKE_TREE), str(root), str(top)], check=True)

    bench.DATASETS[dataset] = bench.Dataset(dataset, 1, make)

    def make_served(root: Path) -> None:
        print(f"  {SERVED_DOMAINS} trees of 100,000 files (generated once; reused while serve10x100k.stamp matches)", file=sys.stderr)
        root.mkdir(parents=True)
        for index in range(SERVED_DOMAINS):
            subprocess.run([sys.executable, str(MAKE_TREE), str(root / f"t{index}"), "10"], check=True)

    bench.DATASETS["serve10x100k"] = bench.Dataset("serve10x100k", 1, make_served)

    lsjson = Tool("rclone lsjson -R", lambda r: [r.rclone("lsjson", "-R", str(r.data))])
    bisync_timeout = float(os.environ.get("BENCH_BISYNC_TIMEOUT", "3600"))

    def bisync(r, *extra):
        return r.rclone("bisync", str(r.data), str(r.dest), "--workdir", str(r.work / "bisync"), *extra)

    def bisync_setup(r):
        # A hard-linked copy: the same files (sizes, dates) without writing a million of them.
        return [["cp", "-al", str(r.data), str(r.dest)], bisync(r, "--resync")]

    def replica(r) -> Path:
        return r.home / "domains" / DOMAIN

    def serve_setup(r):
        stale = ["find", str(r.data / FOLDER), "-maxdepth", "1", "(", "-name", "latency-*.bin", "-o", "-name", ".latency-*", ")", "-delete"]
        return [stale, *Run.add_and_sync(r), r.fpctl("populate", f"{DOMAIN}:/{FOLDER}")]

    peak = bench.peak_under_mib(150)
    served_tool = f"fileproviderctl serve of {SERVED_DOMAINS} × 100,000 items: CPU-s in 60 s idle"

    def served_setup(r):
        commands = []
        for index in range(SERVED_DOMAINS):
            name = f"s{index}"
            commands += [r.fpctl("domain", "add", name, "--mode", "placeholder-files", "--backend", "local", "--root", str(r.data / f"t{index}")), r.fpctl("sync", name)]
        return commands

    def served(r):
        specs = []
        for index in range(SERVED_DOMAINS):
            specs += ["--domain", f"s{index}:{r.home / 'domains' / f's{index}'}:{r.data / f't{index}'}"]
        return [[sys.executable, str(SERVE_IDLE), str(bench.FPCTL), str(r.home), *specs]]
    quick = bench.under_seconds(0.050)
    serve_tool = f"fileproviderctl serve: save in {FOLDER} → in the store (median of 5)"

    bench.BENCHMARKS += [
        Benchmark(
            "scale-1m-first-sync",
            dataset,
            [ours("fileproviderctl domain add --sync", Run.add_syncing), lsjson],
            reference="rclone lsjson -R",
            target=bench.at_most_times(1.0, "rclone lsjson -R"),
            also=(("rclone lsjson -R", peak),),
            items=files,
            group=GROUP,
        ),
        Benchmark(
            "scale-1m-resync",
            dataset,
            [
                ours("fileproviderctl sync (no changes)", lambda r: [r.fpctl("sync", DOMAIN)], setup=Run.add_and_sync),
                lsjson,
                Tool("rclone bisync (no changes)", lambda r: [bisync(r)], setup=bisync_setup, runs=1, timeout=bisync_timeout),
            ],
            reference="rclone lsjson -R",
            target=bench.at_most_times(1.2, "rclone lsjson -R"),
            also=(
                (
                    "rclone bisync (no changes)",
                    Target("≥ 10× faster than rclone bisync", lambda mine, ref: ref is not None and mine * 10 <= ref),
                ),
                ("rclone lsjson -R", peak),
            ),
            items=files,
            group=GROUP,
        ),
        Benchmark(
            "scale-1m-serve-change",
            dataset,
            [
                Tool(
                    serve_tool,
                    lambda r: [
                        [
                            sys.executable, str(LATENCY), str(bench.FPCTL), str(r.home), DOMAIN, str(replica(r)), str(r.data),
                            "--folder", FOLDER, "--saves", "5", "--startup-timeout", "1800", "--clean",
                        ]
                    ],
                    setup=serve_setup,
                    ours=True,
                    reports=True,
                ),
            ],
            reference=serve_tool,
            target=bench.under_seconds(1.0),
            group=GROUP,
        ),
        Benchmark(
            "scale-serve-10x100k",
            "serve10x100k",
            [Tool(served_tool, served, setup=served_setup, ours=True, reports=True, runs=1)],
            reference=served_tool,
            target=Target("idle CPU < 1% (< 0.6 CPU-s in 60 s)", lambda mine, ref: mine < 0.6),
            also=((served_tool, bench.peak_under_mib(200)),),
            group=GROUP,
        ),
        Benchmark(
            "scale-1m-status",
            dataset,
            [ours("fileproviderctl status", lambda r: [r.fpctl("status")], setup=Run.add_and_sync)],
            reference="fileproviderctl status",
            target=quick,
            group=GROUP,
        ),
        Benchmark(
            "scale-1m-domain-list",
            dataset,
            [ours("fileproviderctl domain list", lambda r: [r.fpctl("domain", "list")], setup=Run.add_and_sync)],
            reference="fileproviderctl domain list",
            target=quick,
            group=GROUP,
        ),
        Benchmark(
            "scale-1m-ls",
            dataset,
            [
                ours("fileproviderctl ls (100 items)", lambda r: [r.fpctl("ls", f"{DOMAIN}:/{FOLDER}")], setup=Run.add_and_sync),
                Tool("ls -la", lambda r: [["ls", "-la", str(r.data / FOLDER)]]),
            ],
            reference="ls -la",
            target=quick,
            group=GROUP,
        ),
    ]
