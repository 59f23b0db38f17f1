#!/usr/bin/env python3
"""Times one program run through a freshly started file server's mount: `fileproviderctl serve`
of a dataless domain (its FUSE mount), or an `rclone mount`.

    python3 Benchmarks/mount_command.py ours FILEPROVIDERCTL HOME DOMAIN MOUNT [OPTIONS] -- PROGRAM ARG...
    python3 Benchmarks/mount_command.py rclone REMOTE MOUNT CACHE_DIR [--rclone BINARY] [OPTIONS] -- PROGRAM ARG...

The server is started and waited for as in Benchmarks/onaccess_read.py (`ours`: until MOUNT is
a mount point and serve's first sync is done; `rclone`: `rclone mount --vfs-cache-mode full
--read-only`, until MOUNT is a mount point). `{}` in PROGRAM's arguments stands for MOUNT.

--before 'ARGV' (repeatable, one shell-quoted command line, `{}` for MOUNT): run untimed first,
in the same mount, in order; each must succeed. --settle: after them, wait (at most 60 s) until
serve has logged a finished sync since they ended and then nothing for 2 s (what they wrote has
been sent, and the invalidations that sync sends the kernel are done), so the timed run does not
share the machine with that work. Then PROGRAM is run once with its standard output to
/dev/null and timed.

--check-find SOURCE: the timed program is a `find {}`: run it again (untimed) with its output
kept, and it must list the same relative paths as `find SOURCE`. --check-git-clean: `git -C
MOUNT status --porcelain` must print nothing (the repository is clean through the mount). A
failed check fails the run with its difference.

The server is stopped and unmounted before this script exits (the caller deletes the work
folder; a mount left behind would delete through it). Prints one JSON line: {"seconds": the
timed run, "peak_mib": the server's peak RSS, "before_seconds": the --before commands' time
(with --before only; Benchmarks/results/latest.json keeps it under "reported")}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from onaccess_read import ServerFailed, add_server_arguments, running  # beside this script
from serve_latency import peak_mib, wait_for


def expand(argv: list[str], mount: Path) -> list[str]:
    return [arg.replace("{}", str(mount)) for arg in argv]


def timed(argv: list[str]) -> float:
    """Seconds of one run of argv with standard output to /dev/null; exits on a failure."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    _, status = os.waitpid(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {child.returncode}")
    return seconds


def relative_paths(root: Path) -> set[str]:
    """What `find ROOT` lists, relative to ROOT (the root itself as '.')."""
    done = subprocess.run(["find", str(root)], capture_output=True, text=True, errors="surrogateescape")
    if done.returncode != 0:
        raise SystemExit(f"find {root} exited with {done.returncode}: {done.stderr.strip()}")
    prefix = str(root)
    return {("." + line[len(prefix) :]) if line.startswith(prefix) else line for line in done.stdout.splitlines()}


def find_difference(mount: Path, source: Path) -> str | None:
    """None when `find MOUNT` and `find SOURCE` list the same relative paths, else what differs."""
    seen, wanted = relative_paths(mount), relative_paths(source)
    if seen == wanted:
        return None
    missing, extra = sorted(wanted - seen), sorted(seen - wanted)
    return f"through the mount {len(seen)} paths, in the source {len(wanted)}; missing {missing[:5]}, extra {extra[:5]}"


def git_difference(mount: Path) -> str | None:
    """None when `git status --porcelain` in the repository at MOUNT prints nothing."""
    done = subprocess.run(["git", "-C", str(mount), "status", "--porcelain"], capture_output=True, text=True)
    if done.returncode != 0:
        return f"git status exited with {done.returncode}: {done.stderr.strip()}"
    return f"not clean through the mount: {done.stdout[:500]}" if done.stdout else None


def finished_syncs(log_path: Path, domain: str) -> int:
    return len(re.findall(rf"(^|\s){re.escape(domain)}: \d+ sent,", log_path.read_text(errors="replace"), re.M))


def settle(log_path: Path, domain: str, syncs: int, quiet: float = 2.0, limit: float = 60.0) -> None:
    """Waits (at most `limit` seconds) until serve has finished a sync after `syncs` and then
    logged nothing for `quiet` seconds."""
    deadline = time.monotonic() + limit
    if not wait_for(lambda: finished_syncs(log_path, domain) > syncs, limit, interval=0.05):
        return
    size, since = log_path.stat().st_size, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.1)
        if (now := log_path.stat().st_size) != size:
            size, since = now, time.monotonic()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    own, program = sys.argv[1:split], sys.argv[split + 1 :]
    for s in add_server_arguments(p):
        s.add_argument("--before", action="append", default=[], metavar="ARGV", help="an untimed command line first")
        s.add_argument("--settle", action="store_true", help="wait for serve's sync of what --before wrote")
        s.add_argument("--check-find", type=Path, metavar="SOURCE", help="the timed find lists what find SOURCE lists")
        s.add_argument("--check-git-clean", action="store_true", help="git status --porcelain is empty through the mount")
    args = p.parse_args(own)
    if not program:
        p.error("give the program to time after --")
    if os.geteuid() != 0:
        print(f"{args.server}: run as root (FUSE mounts of the benchmark's servers)", file=sys.stderr)
        return 1
    log_path = args.mount.parent / f"{args.server}-command.log"
    try:
        with running(args.server, args, log_path) as server:
            start = time.perf_counter()
            for line in args.before:
                timed(expand(shlex.split(line), args.mount))
            before = time.perf_counter() - start
            if args.settle and args.server == "ours":
                settle(log_path, args.domain, finished_syncs(log_path, args.domain))
            seconds = timed(expand(program, args.mount))
            peak = peak_mib(server.pid)
            wrong = None
            if args.check_find is not None:
                wrong = find_difference(args.mount, args.check_find)
            if wrong is None and args.check_git_clean:
                wrong = git_difference(args.mount)
            if wrong is not None:
                print(f"{wrong}\n{log_path.read_text(errors='replace')[-4000:]}", file=sys.stderr)
                return 1
            print(json.dumps({"seconds": seconds, "peak_mib": peak, **({"before_seconds": before} if args.before else {})}))
            return 0
    except ServerFailed as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
