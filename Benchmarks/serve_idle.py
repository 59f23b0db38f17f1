#!/usr/bin/env python3
"""What one `fileproviderctl serve` of many domains costs while nothing changes.

    python3 Benchmarks/serve_idle.py FILEPROVIDERCTL HOME --domain NAME:REPLICA:STORE ...
        [--window SECONDS] [--changes N] [--startup-timeout SECONDS]

Starts `serve` (every connected domain, default options: a poll of each store every 30 s),
waits until each named domain has logged its first sync (and, when the database has no index of
names yet, until serve has built it, and until its background population has left no dataless
folder: one-time work after the first syncs), then measures the serve process
over a window of idle time (default 60 s): the CPU time it used (user + system, from
/proc/PID/stat) and, at the end, its resident memory (VmRSS) and peak (VmHWM). Then it saves
a 4 KiB file into the replica root of the first N domains (default 3), one after the other,
and times each until the file is in its store with all its bytes. Prints one JSON line:
{"seconds": CPU-seconds used in the window, "peak_mib": VmHWM, "rss_mib": VmRSS,
"idle_cpu_percent": ..., "window": ..., "change_latencies": [...]}. The saved files are
removed from the stores once serve has stopped (the stores are a shared, generated dataset).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from serve_latency import no_dataless_folders, seconds_until_stored, stop, wait_for


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, all its threads."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces: the fields after it follow its last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def status_mib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fpctl")
    p.add_argument("home")
    p.add_argument("--domain", action="append", required=True, help="NAME:REPLICA:STORE, once per domain")
    p.add_argument("--window", type=float, default=60)
    p.add_argument("--changes", type=int, default=3)
    p.add_argument("--startup-timeout", type=float, default=1800)
    args = p.parse_args()
    domains = []
    for spec in args.domain:
        name, replica, store = spec.split(":", 2)
        domains.append((name, Path(replica), Path(store)))

    log_path = Path(args.home) / "serve-idle.log"
    # serve builds the index `find -name` reads once nothing is due after its first syncs, when
    # the database lacks it (a first sync writes none): startup work, waited for as they are.
    with sqlite3.connect(f"file:{Path(args.home) / 'metadata.sqlite'}?mode=ro", uri=True) as db:
        builds_index = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'item_name'").fetchone()[0] == 0
    saved: list[Path] = []
    with open(log_path, "wb") as log:
        serve = subprocess.Popen([args.fpctl, "serve", "--home", args.home], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        # Each first sync logs one line per domain ("NAME: N sent, ...").
        def started() -> bool:
            text = log_path.read_text(errors="replace")
            synced = all(f"{name}: " in text for name, _, _ in domains)
            return synced and (not builds_index or "the index of names for " in text) and no_dataless_folders(args.home)

        if not wait_for(started, args.startup_timeout, 0.05):
            print(f"serve did not finish its first syncs:\n{log_path.read_text(errors='replace')}", file=sys.stderr)
            return 1
        if serve.poll() is not None:
            print(f"serve ended (status {serve.returncode}):\n{log_path.read_text(errors='replace')}", file=sys.stderr)
            return 1
        before = cpu_seconds(serve.pid)
        began = time.perf_counter()
        time.sleep(args.window)  # the idle time measured, not a wait for anything
        used = cpu_seconds(serve.pid) - before
        window = time.perf_counter() - began
        rss, peak = status_mib(serve.pid, "VmRSS"), status_mib(serve.pid, "VmHWM")

        latencies = []
        payload = os.urandom(4096)
        for index, (name, replica, store) in enumerate(domains[: args.changes]):
            file_name = f"serve-idle-{index}.bin"
            saved.append(store / file_name)
            with open(replica / file_name, "wb") as f:
                f.write(payload)
            latency = seconds_until_stored(store / file_name, len(payload), time.perf_counter(), f"{file_name} ({name})", log_path)
            if latency is None:
                return 1
            latencies.append(latency)
        print(
            json.dumps(
                {
                    "seconds": used,
                    "peak_mib": peak,
                    "rss_mib": rss,
                    "idle_cpu_percent": 100 * used / window,
                    "window": window,
                    "change_latencies": latencies,
                }
            )
        )
        return 0
    finally:
        stop(serve, timeout=60)
        for path in saved:
            try:
                path.unlink()
            except FileNotFoundError:
                pass


if __name__ == "__main__":
    sys.exit(main())
