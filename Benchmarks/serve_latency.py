#!/usr/bin/env python3
"""How soon a file saved in a replica reaches the store while `fileproviderctl serve` runs.

    python3 Benchmarks/serve_latency.py FILEPROVIDERCTL HOME DOMAIN REPLICA STORE [--saves N]
        [--folder REL] [--startup-timeout SECONDS] [--clean]

Starts `serve DOMAIN` (default options: 1 s settle time, 30 s poll interval), waits for its
first sync and its background population of dataless folders, then saves N files of 4 KiB in
the replica one after the other, half of them written in place (open, write, close) and half
the way editors save (a temporary file renamed into place). Each latency runs from the moment the save is complete (after close, or after the
rename) until the file is in the store with all its bytes. Prints one JSON line:
{"seconds": median, "latencies": [...], "peak_mib": serve's peak RSS}.

--folder saves into that folder of the replica (relative; it must be populated) instead of its
root. --clean removes the saved files from the store after serve has stopped, for a store that
is a shared, generated dataset (the scale-1m rows). --startup-timeout bounds serve's first sync
(default 120 s).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wait_for(condition, timeout: float, interval: float = 0.001) -> bool:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def no_dataless_folders(home: str) -> bool:
    """Whether serve's background population is over: the database holds no dataless folder
    (a sync in placeholder-files mode leaves folders past its budget dataless, and serve
    populates them once its first syncs are done: startup work, like the index of names)."""
    try:
        with sqlite3.connect(f"file:{Path(home) / 'metadata.sqlite'}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT count(*) FROM item WHERE isDataless AND kind = 'folder'").fetchone()[0] == 0
    except sqlite3.Error:
        return False


def seconds_until_stored(landed: Path, size: int, since: float, what: str, log_path: Path) -> float | None:
    """Seconds from `since` until `landed` is in the store with `size` bytes (30 s at most);
    None, after printing `what` did not arrive with serve's log, when it is not."""
    if not wait_for(lambda: landed.exists() and landed.stat().st_size == size, 30):
        print(f"{what} did not reach the store in 30 s:\n{log_path.read_text(errors='replace')}", file=sys.stderr)
        return None
    return time.perf_counter() - since


def stop(serve: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if serve has not stopped within `timeout` seconds."""
    serve.send_signal(signal.SIGTERM)
    try:
        serve.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        serve.kill()
        serve.wait()


def peak_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("fpctl")
    p.add_argument("home")
    p.add_argument("domain")
    p.add_argument("replica", type=Path)
    p.add_argument("store", type=Path)
    p.add_argument("--saves", type=int, default=10)
    p.add_argument("--folder", default="", help="folder of the replica (and store) to save into")
    p.add_argument("--startup-timeout", type=float, default=120)
    p.add_argument("--clean", action="store_true", help="remove the saved files from the store at the end")
    args = p.parse_args()
    replica, store = args.replica / args.folder, args.store / args.folder
    if not replica.is_dir():
        print(f"{replica} is not a folder of the replica (populate it first)", file=sys.stderr)
        return 1

    log_path = Path(args.home) / "serve-latency.log"
    with open(log_path, "wb") as log:
        serve = subprocess.Popen(
            [args.fpctl, "serve", args.domain, "--home", args.home],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )
    try:
        # The first sync logs one line per domain ("DOMAIN: N sent, ...").
        if not wait_for(lambda: f"{args.domain}: " in log_path.read_text(errors="replace"), args.startup_timeout, 0.01):
            print(f"serve did not finish its first sync:\n{log_path.read_text(errors='replace')}", file=sys.stderr)
            return 1
        if not wait_for(lambda: no_dataless_folders(args.home), args.startup_timeout, 0.2):
            print(f"serve did not populate the dataless folders:\n{log_path.read_text(errors='replace')}", file=sys.stderr)
            return 1
        latencies = []
        payload = os.urandom(4096)
        for index in range(args.saves):
            name = f"latency-{index}.bin"
            target = replica / name
            if index % 2 == 0:
                with open(target, "wb") as f:
                    f.write(payload)
            else:
                temporary = replica / f".{name}.swp"
                with open(temporary, "wb") as f:
                    f.write(payload)
                os.rename(temporary, target)
            latency = seconds_until_stored(store / name, len(payload), time.perf_counter(), name, log_path)
            if latency is None:
                return 1
            latencies.append(latency)
            time.sleep(0.5)  # let serve go idle, so each save is measured on its own
        peak = peak_mib(serve.pid)
        print(json.dumps({"seconds": statistics.median(latencies), "latencies": latencies, "peak_mib": peak}))
        return 0
    finally:
        stop(serve)
        if args.clean:
            for index in range(args.saves):
                for name in (f"latency-{index}.bin", f".latency-{index}.bin.swp"):
                    try:
                        (store / name).unlink()
                    except FileNotFoundError:
                        pass


if __name__ == "__main__":
    sys.exit(main())
