"""Media API benchmarks (issue 4): the media backend against the `curl` command line, both
talking to the same media-server on loopback.

- download-1g: materialize one 1 GiB file vs `curl -o` (target: at least 0.9× curl's speed).
- download-10k: materialize 10,000 files of 4 KiB vs `curl --parallel --parallel-max 8` fetching
  the same URLs (target: faster than curl).
- media-first-sync-10k: `domain add` + `sync` of a folder of 10,000 entries (reference: one
  `curl` of the listing); the peak MiB column shows the memory target (under 100 MiB).

One media-server (the release build of its package, Servers/media-server, or $MEDIA_SERVER) is started per
dataset on a free loopback port the first time a benchmark needs it, and stopped at exit.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

SERVERS: dict[Path, str] = {}
PROCESSES: list[subprocess.Popen] = []


def _binary(bench) -> str:
    return os.environ.get("MEDIA_SERVER") or str(bench.REPO / "Servers" / "media-server" / ".build" / "release" / "media-server")


def _stop_all() -> None:
    for process in PROCESSES:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def server_url(bench, root: Path) -> str:
    """The URL of a media-server serving `root`, starting it on first use."""
    if root in SERVERS:
        return SERVERS[root]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [_binary(bench), "--root", str(root), "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not PROCESSES:
        atexit.register(_stop_all)
    PROCESSES.append(process)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):  # bounded: 20 s
        if process.poll() is not None:
            raise bench.CommandFailed([_binary(bench)], process.returncode, "media-server exited")
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                SERVERS[root] = url
                return url
        except OSError:
            time.sleep(0.1)
    raise bench.CommandFailed([_binary(bench)], -1, "media-server did not answer GET /")


def register(bench) -> None:
    Tool, Benchmark, ours, DOMAIN = bench.Tool, bench.Benchmark, bench.ours, bench.DOMAIN

    def add_and_sync(r):
        url = server_url(bench, r.data)
        return [
            r.fpctl("domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "media", "--url", url, "--connections", "8"),
            r.fpctl("sync", DOMAIN),
        ]

    def curl_config(r) -> Path:
        """A curl config fetching every file of the dataset into dest/, made at setup."""
        url = server_url(bench, r.data)
        config = r.work / "curl.conf"
        lines = []
        for path in sorted(p for p in r.data.rglob("*") if p.is_file()):
            relative = path.relative_to(r.data)
            folder = urllib.parse.quote(str(relative.parent) if str(relative.parent) != "." else "", safe="/")
            lines.append(f'url = "{url}/file?path={folder}&id={urllib.parse.quote(relative.name)}"')
            lines.append(f'output = "{r.dest / relative}"')
        config.write_text("\n".join(lines) + "\n")
        return config

    import urllib.parse  # noqa: E402  (used by curl_config)

    bench.BENCHMARKS.append(
        Benchmark(
            "media-download-1g",
            "big1g",
            [
                ours(
                    "fileproviderctl materialize (media)",
                    lambda r: [r.fpctl("materialize", f"{DOMAIN}:/big.bin")],
                    setup=add_and_sync,
                ),
                Tool(
                    "curl -o",
                    lambda r: [["curl", "-sSf", "-o", str(r.dest), f"{server_url(bench, r.data)}/file?path=&id=big.bin"]],
                ),
            ],
            reference="curl -o",
            target=bench.at_least_speed(0.9, "curl"),
        )
    )
    bench.BENCHMARKS.append(
        Benchmark(
            "media-download-10k",
            "small10k",
            [
                ours(
                    "fileproviderctl materialize -R (media)",
                    lambda r: [r.fpctl("materialize", "-R", f"{DOMAIN}:/")],
                    setup=add_and_sync,
                ),
                Tool(
                    "curl --parallel --parallel-max 8",
                    lambda r: [["curl", "-sSf", "--parallel", "--parallel-max", "8", "--create-dirs", "-K", str(r.work / "curl.conf")]],
                    setup=lambda r: (curl_config(r), [])[1],
                ),
            ],
            reference="curl --parallel --parallel-max 8",
            target=bench.faster_than("curl --parallel"),
            items=10_000,
        )
    )
    bench.BENCHMARKS.append(
        Benchmark(
            "media-first-sync-10k",
            "flat10k",
            [
                ours(
                    "fileproviderctl domain add + sync (media)",
                    lambda r: [
                        r.fpctl("domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "media", "--url", server_url(bench, r.data)),
                        r.fpctl("sync", DOMAIN),
                    ],
                ),
                Tool(
                    "curl (one listing)",
                    lambda r: [["curl", "-sSf", "-o", "/dev/null", f"{server_url(bench, r.data)}/media?path="]],
                ),
            ],
            reference="curl (one listing)",
            target=bench.under_seconds(2.0),
            items=10_000,
        )
    )
