#!/usr/bin/env python3
"""Times a partial or sequential first read of one file behind a long-running file server:
`fileproviderctl serve` of a dataless domain (progressive hydration), or an `rclone mount`.

    python3 Benchmarks/partial_read.py ours FILEPROVIDERCTL HOME DOMAIN REPLICA --source FILE --file NAME WORKLOAD
    python3 Benchmarks/partial_read.py rclone REMOTE MOUNTPOINT CACHE_DIR [--rclone BINARY] --source FILE --file NAME WORKLOAD

WORKLOAD is one of:
- `head`: `head -c 1M FILE > /dev/null`, timed from the start of `head` until it exits;
- `random`: one reader (this process) opens FILE and does --reads `os.pread`s of --size bytes
  (default 1,000 of 64 KiB) at offsets drawn from random.Random(--seed) (any byte offset from
  0 to the file's size minus --size; the same offsets for every server), timed from the open
  until the close;
- `cat`: `cat FILE > /dev/null`, timed.

The server is started and stopped as in onaccess_read.py (`ours` waits for serve's first sync
and, unless --hydration is `any`, checks that serve says it serves the domain with that
hydration; `rclone` mounts with a fresh --cache-dir). After the timed read (untimed): the
bytes fetched are counted once they stop growing for a second (ours: st_blocks × 512 of the
file in the domain's backing folder, `HOME/replicas/DOMAIN/NAME`, which includes the one-block
markers at the start of each missing region; rclone: st_blocks × 512 of the files in its vfs
cache), then the bytes read are compared with --source (for `random` the bytes the reader got;
for `head` and `cat` by reading FILE again). Prints one JSON line: {"seconds", "peak_mib" (the
server's peak RSS), "fetched_bytes"}.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from onaccess_read import ServerFailed, add_server_arguments, running  # beside this script
from serve_latency import peak_mib

MIB = 1 << 20


def timed(argv: list[str]) -> float:
    """Seconds of one `argv > /dev/null`, from spawn to exit."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    _, status = os.waitpid(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {child.returncode}")
    return seconds


def offsets(seed: int, count: int, size: int, file_size: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(0, file_size - size + 1) for _ in range(count)]


def random_reads(path: Path, at: list[int], size: int) -> tuple[float, list[bytes]]:
    """Seconds of opening path, reading size bytes at each offset with pread, and closing it;
    the bytes read."""
    pieces = []
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset in at:
            piece = os.pread(fd, size, offset)
            while len(piece) < size:  # a short read is legal; finish it
                more = os.pread(fd, size - len(piece), offset + len(piece))
                if not more:
                    raise SystemExit(f"{path}: end of file at {offset + len(piece)}, before {offset + size}")
                piece += more
            pieces.append(piece)
    finally:
        os.close(fd)
    return time.perf_counter() - start, pieces


def allocated(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_blocks * 512
        except FileNotFoundError:
            pass
    return total


def cache_files(cache: Path) -> list[Path]:
    """The content files of rclone's vfs cache (not its vfsMeta records)."""
    root = cache / "vfs"
    return [Path(folder) / name for folder, _, names in os.walk(root) for name in names]


def settled(count, quiet: float = 1.0, timeout: float = 30.0) -> int:
    """count() once it has not changed for `quiet` seconds (at most `timeout`): fetches that
    were started by the read (read-ahead) and are still in flight count too."""
    value, since = count(), time.perf_counter()
    deadline = since + timeout
    while time.perf_counter() < deadline:
        time.sleep(0.1)
        now = count()
        if now != value:
            value, since = now, time.perf_counter()
        elif time.perf_counter() - since >= quiet:
            break
    return value


def differences(path: Path, source: Path, length: int) -> str | None:
    """None when the first `length` bytes of path and source are the same, else which 4 KiB
    blocks differ (as byte ranges, the first ten) and whether they hold zeros."""
    block, wrong = 4096, []
    with open(path, "rb") as mine, open(source, "rb") as original:
        offset = 0
        while offset < length:
            a, b = mine.read(min(MIB, length - offset)), original.read(min(MIB, length - offset))
            if a != b:
                for i in range(0, max(len(a), len(b)), block):
                    x, y = a[i : i + block], b[i : i + block]
                    if x != y:
                        zeros = len(x) > 0 and x.count(0) == len(x)
                        if wrong and wrong[-1][1] == offset + i and wrong[-1][2] == zeros:
                            wrong[-1][1] = offset + i + block
                        else:
                            wrong.append([offset + i, offset + i + block, zeros])
            if not b:
                break
            offset += len(b)
    if not wrong:
        return None
    shown = ", ".join(f"{lo}..<{hi}{' (zeros)' if zeros else ''}" for lo, hi, zeros in wrong[:10])
    total = sum(hi - lo for lo, hi, _ in wrong)
    return f"{total} bytes in {len(wrong)} runs of 4 KiB blocks differ: {shown}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ours, rclone = add_server_arguments(p)
    ours.add_argument(
        "--hydration", choices=["progressive", "full", "any"], default="progressive",
        help="the hydration serve must report for the domain (default progressive)",
    )
    ours.add_argument("--serve-arg", dest="serve_args", action="append", default=[], help="passed on to serve; repeatable")
    for s in (ours, rclone):
        s.add_argument("--source", type=Path, required=True, help="the original of the file")
        s.add_argument("--file", required=True, help="the file's path relative to the mount")
        s.add_argument("--reads", type=int, default=1000)
        s.add_argument("--size", type=int, default=64 << 10)
        s.add_argument("--seed", type=int, default=17)
        s.add_argument("--log", type=Path, help="keep the server's log here (default: beside the mount point)")
        s.add_argument("workload", choices=["head", "random", "cat"])
    args = p.parse_args()

    if os.geteuid() != 0:
        print(f"{args.server}: run as root (serve's on-access files and FUSE mounts need it)", file=sys.stderr)
        return 1
    log_path = args.log or args.mount.parent / f"{args.server}-partial.log"
    if args.server == "ours":
        counted = [args.home / "replicas" / args.domain / args.file]
        count = lambda: allocated(counted)
    else:
        count = lambda: allocated(cache_files(args.cache))
    path = args.mount / args.file
    try:
        with running(args.server, args, log_path) as server:
            if args.server == "ours" and args.hydration != "any":
                said = log_path.read_text(errors="replace")
                wanted = "progressive hydration" if args.hydration == "progressive" else "whole files"
                if f"{args.domain}: files on access at" not in said or wanted not in said:
                    print(f"serve does not say it serves {args.domain} with {wanted}:\n{said}", file=sys.stderr)
                    return 1
            before = count()
            if args.workload == "random":
                at = offsets(args.seed, args.reads, args.size, args.source.stat().st_size)
                seconds, pieces = random_reads(path, at, args.size)
            else:
                argv = ["head", "-c", "1M", str(path)] if args.workload == "head" else ["cat", str(path)]
                seconds = timed(argv)
            fetched = settled(count)
            peak = peak_mib(server.pid)
            if args.workload == "random":
                with open(args.source, "rb") as original:
                    wrong = next((o for o, piece in zip(at, pieces) if os.pread(original.fileno(), args.size, o) != piece), None)
                if wrong is not None:
                    wrong = f"the {args.size} bytes read at {wrong} differ from the original"
            else:
                length = MIB if args.workload == "head" else args.source.stat().st_size
                if (wrong := differences(path, args.source, length)) is not None:
                    wrong = f"its first {length} bytes read again are not the original's: {wrong}"
            measured = {"seconds": seconds, "peak_mib": peak, "fetched_bytes": fetched, "fetched_before": before}
            if wrong is not None:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                print(f"{path}: {wrong} (measured: {json.dumps(measured)}); the server's log ends:\n{tail}", file=sys.stderr)
                return 1
            print(json.dumps(measured))
            return 0
    except ServerFailed as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
