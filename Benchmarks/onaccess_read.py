#!/usr/bin/env python3
"""Times `cat` of files behind a long-running file server: `fileproviderctl serve` of a dataless
domain, or an `rclone mount`.

    python3 Benchmarks/onaccess_read.py ours FILEPROVIDERCTL HOME DOMAIN REPLICA --source DIR [--second] FILE...
    python3 Benchmarks/onaccess_read.py rclone REMOTE MOUNTPOINT CACHE_DIR [--rclone BINARY] --source DIR [--second] FILE...

`ours` starts `serve DOMAIN` and waits until REPLICA is a mount point and serve's first sync is
done. `rclone` starts `rclone mount REMOTE MOUNTPOINT --vfs-cache-mode full --cache-dir
CACHE_DIR --read-only` (CACHE_DIR fresh, so the first read fetches; BINARY: the rclone bench.py
chose, default the first on PATH) and waits until MOUNTPOINT is a mount point. Then one `cat FILE... > /dev/null` (FILE relative to the mount) is timed;
with --second a first, untimed `cat` reads the files before (then `sync`), so the timed one is
the second read. The files read are then compared with their originals under --source (untimed), and the
server is stopped and unmounted before this script exits (the caller deletes the work folder;
a mount left behind would delete through it). Prints one JSON line: {"seconds": the timed cat,
"peak_mib": the server's peak RSS}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from serve_latency import peak_mib, wait_for  # beside this script


def is_mount(path: Path) -> bool:
    # os.path.ismount misses a bind mount of a folder of the same file system.
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


def cat(paths: list[Path]) -> float:
    """Seconds of one `cat paths... > /dev/null`."""
    start = time.perf_counter()
    child = subprocess.Popen(["cat", *map(str, paths)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    _, status = os.waitpid(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"cat exited with {child.returncode}")
    return seconds


def same_files(paths: list[Path], originals: list[Path]) -> str | None:
    """The first file whose bytes differ from its original, or None."""
    for path, original in zip(paths, originals):
        if subprocess.run(["cmp", "-s", str(path), str(original)]).returncode != 0:
            return str(path)
    return None


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class ServerFailed(Exception):
    """The server exited or did not get ready; the message holds its log."""


def server_argv(server: str, args: argparse.Namespace) -> list[str]:
    if server == "ours":
        return [args.fpctl, "serve", args.domain, "--home", str(args.home), *getattr(args, "serve_args", [])]
    return [
        args.rclone, "--config", "/dev/null", "mount", args.remote, str(args.mount), "--vfs-cache-mode", "full",
        "--cache-dir", str(args.cache), "--read-only", "--sftp-disable-hashcheck",
    ]


@contextmanager
def running(server: str, args: argparse.Namespace, log_path: Path):
    """Starts the server (`ours`: serve of args.domain; `rclone`: a mount of args.remote), waits
    until its mount at args.mount is ready (for ours also serve's first sync), and yields the
    process. On the way out, whatever happened, the FUSE mount is unmounted, the server stopped
    with SIGTERM and any mount left behind detached; this exits the process (status 2) rather
    than leave a mount for the caller to delete through."""
    argv = server_argv(server, args)
    if server == "ours":
        synced = re.compile(rf"(^|\s){re.escape(args.domain)}: \d+ sent,", re.M)
        ready = lambda: is_mount(args.mount) and synced.search(log_path.read_text(errors="replace")) is not None
    else:
        args.mount.mkdir(parents=True, exist_ok=True)
        ready = lambda: is_mount(args.mount)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        if not wait_for(lambda: process.poll() is not None or ready(), 120) or process.poll() is not None:
            raise ServerFailed(f"{' '.join(argv)} did not get ready:\n{log_path.read_text(errors='replace')}")
        yield process
    finally:
        if server == "rclone" and is_mount(args.mount):
            subprocess.run(["fusermount3", "-u", str(args.mount)], stderr=subprocess.DEVNULL)
        stop(process)
        # Never leave a mount for the caller to delete through.
        if is_mount(args.mount):
            subprocess.run(["umount", "-l", str(args.mount)])
        if is_mount(args.mount):
            print(f"{args.mount} is still mounted; unmount it before deleting the work folder", file=sys.stderr)
            os._exit(2)


def add_server_arguments(p: argparse.ArgumentParser) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The `ours` and `rclone` subcommands with their positional arguments."""
    sub = p.add_subparsers(dest="server", required=True)
    ours = sub.add_parser("ours")
    ours.add_argument("fpctl")
    ours.add_argument("home", type=Path)
    ours.add_argument("domain")
    ours.add_argument("mount", type=Path)
    rclone = sub.add_parser("rclone")
    rclone.add_argument("remote")
    rclone.add_argument("mount", type=Path)
    rclone.add_argument("cache", type=Path)
    rclone.add_argument("--rclone", default="rclone", metavar="BINARY", help="the rclone to run (default: the first on PATH)")
    return ours, rclone


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for s in add_server_arguments(p):
        s.add_argument("--source", type=Path, required=True, help="the folder holding the originals")
        s.add_argument("--second", action="store_true", help="time the second read")
        s.add_argument("files", nargs="+")
    args = p.parse_args()

    if os.geteuid() != 0:
        print(f"{args.server}: run as root (serve's on-access files and FUSE mounts need it)", file=sys.stderr)
        return 1
    log_path = args.mount.parent / f"{args.server}-read.log"
    try:
        with running(args.server, args, log_path) as server:
            paths = [args.mount / name for name in args.files]
            if args.second:
                cat(paths)
                os.sync()  # the first read's writes reach the disk first, as before any timed run of bench.py
            seconds = cat(paths)
            peak = peak_mib(server.pid)
            if (wrong := same_files(paths, [args.source / name for name in args.files])) is not None:
                print(f"{wrong} differs from its original\n{log_path.read_text(errors='replace')}", file=sys.stderr)
                return 1
            print(json.dumps({"seconds": seconds, "peak_mib": peak}))
            return 0
    except ServerFailed as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
