#!/usr/bin/env python3
"""Writes a tree of small files for the scale benchmarks, quickly and in little memory.

    python3 Benchmarks/make_tree.py ROOT TOP [--folders 100] [--files 100]

ROOT/dTT/dFF/fileNN.bin: TOP top folders, each with FOLDERS folders of FILES files of 100-2000
seeded random bytes (slices of one seeded 1 MiB pool). TOP=100 gives the scale-1m tree:
1,000,000 files in 10,100 folders. Each file is one openat (relative to its folder's fd), one
write and one close; progress goes to standard error after each top folder. ROOT must not exist.
Run as its own process by bench.py, so the harness's own peak RSS (which every child it
measures inherits as a floor of ru_maxrss) stays small.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time


def write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root")
    p.add_argument("top", type=int)
    p.add_argument("--folders", type=int, default=100)
    p.add_argument("--files", type=int, default=100)
    args = p.parse_args()
    if min(args.top, args.folders, args.files) < 1:
        p.error("TOP, --folders and --files must be at least 1")

    rng = random.Random(1_000_000)
    pool = memoryview(rng.randbytes(1 << 20))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    total = args.top * args.folders * args.files
    names = [f"file{c:02d}.bin" for c in range(args.files)]
    done = 0
    start = time.monotonic()
    os.makedirs(os.path.dirname(os.path.abspath(args.root)), exist_ok=True)
    os.mkdir(args.root)
    for a in range(args.top):
        top = os.path.join(args.root, f"d{a:02d}")
        os.mkdir(top)
        for b in range(args.folders):
            folder = os.path.join(top, f"d{b:02d}")
            os.mkdir(folder)
            dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                for name in names:
                    size = rng.randint(100, 2000)
                    offset = rng.randrange(len(pool) - size)
                    fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
                    try:
                        write_all(fd, pool[offset : offset + size])
                    finally:
                        os.close(fd)
            finally:
                os.close(dir_fd)
        done += args.folders * args.files
        elapsed = time.monotonic() - start
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (total - done) / rate if rate > 0 else 0.0
        print(
            f"  {done:,} / {total:,} files ({rate:,.0f}/s, about {left:.0f} s left)",
            file=sys.stderr,
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
