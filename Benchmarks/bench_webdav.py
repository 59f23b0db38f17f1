"""WebDAV benchmarks (issue 20): the webdav backend against `curl` and rclone's webdav backend,
all talking to one Apache mod_dav on 127.0.0.1.

- webdav-download-1g: `materialize` of the 1 GiB file vs `curl -o` and `rclone copy`. Targets:
  at least 0.9× curl's speed, faster than rclone.
- webdav-upload-1g: the 1 GiB file copied into the replica and uploaded by `sync` vs `curl -T`
  and `rclone copy`. Same targets.
- webdav-download-10k: `materialize -R` of 10,000 files of 4 KiB vs `rclone copy --transfers 4`
  and `--transfers 16`, and the fair race: `--transfers 16 --webdav-pacer-min-sleep 0` (rclone's
  pacer off). Target: faster than all three.
- webdav-first-sync-100k: `domain add` + `sync` of the 100,000-file tree vs `rclone lsjson -R`,
  with its pacer and without (`--webdav-pacer-min-sleep 0`). Target: faster than both.
- webdav-upload-10k: the 10,000 files copied into the replica and uploaded by `sync` vs
  `rclone copy --transfers 4/16` and `--transfers 16 --webdav-pacer-min-sleep 0`. Target:
  faster than all three. (Last: its rclone runs are the longest.)

Apache ($APACHE2, else /usr/sbin/apache2; apt apache2) runs with a configuration of its own on
a free port, started the first time a row needs it and stopped (its process group) when
bench.py exits. It serves Benchmarks/data at /data, read-only (only GET, HEAD, OPTIONS and
PROPFIND), and Benchmarks/data/runs at /runs, writable: an upload row's store is its run's
fresh, empty `remote` folder (/runs/run-…/remote), removed with the run. Started as root,
Apache serves as www-data, so that folder is made www-data's. Our domains use
`--connections 8` (the adapter's default is 4), as rclone lists with 8 checkers; rclone gets
an on-the-fly remote (`:webdav,url=…:`), no configuration file.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

MODULES = "/usr/lib/apache2/modules"
CONNECTIONS = "8"


class Server:
    """One Apache mod_dav for the whole bench run."""

    def __init__(self, bench) -> None:
        binary = os.environ.get("APACHE2", "/usr/sbin/apache2")
        if not os.access(binary, os.X_OK) or not os.path.exists(f"{MODULES}/mod_dav_fs.so"):
            raise bench.CommandFailed([binary], -1, "Apache with mod_dav is not installed (apt-get install apache2)")
        self.dir = Path(tempfile.mkdtemp(prefix="bench-apache-"))
        (self.dir / "lock").mkdir()
        # Run as root, Apache serves as www-data: what it writes must be that user's.
        self.owner = None
        if os.getuid() == 0:
            try:
                user = pwd.getpwnam("www-data")
                self.owner = (user.pw_uid, user.pw_gid)
            except KeyError:
                pass
        if self.owner:  # its lock database (every PUT opens it) is under the folder
            os.chmod(self.dir, 0o755)
            os.chown(self.dir / "lock", *self.owner)
        bench.RUNS.mkdir(parents=True, exist_ok=True)
        data, runs = bench.DATA.resolve(), bench.RUNS.resolve()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        (self.dir / "httpd.conf").write_text(
            f"""ServerRoot "{self.dir}"
ServerName 127.0.0.1
Listen 127.0.0.1:{self.port}
PidFile "{self.dir}/apache.pid"
ErrorLog "{self.dir}/error.log"
LogLevel warn
Mutex file:{self.dir}/lock
DefaultRuntimeDir "{self.dir}/lock"
LoadModule mpm_event_module {MODULES}/mod_mpm_event.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
LoadModule mime_module {MODULES}/mod_mime.so
LoadModule alias_module {MODULES}/mod_alias.so
TypesConfig /etc/mime.types
LoadModule dav_module {MODULES}/mod_dav.so
LoadModule dav_fs_module {MODULES}/mod_dav_fs.so
StartServers 1
ServerLimit 1
ThreadsPerChild 32
MaxRequestWorkers 32
MinSpareThreads 1
MaxSpareThreads 32
KeepAlive On
MaxKeepAliveRequests 0
DAVLockDB "{self.dir}/lock/davlock"
Alias /runs "{runs}"
Alias /data "{data}"
<Directory "{data}">
    Dav On
    AllowOverride None
    Options FollowSymLinks
    <LimitExcept GET HEAD OPTIONS PROPFIND>
        Require all denied
    </LimitExcept>
</Directory>
<Directory "{runs}">
    Dav On
    AllowOverride None
    Options None
    Require all granted
</Directory>
{"User www-data" + chr(10) + "Group www-data" if self.owner else ""}
"""
        )
        log = open(self.dir / "stderr.log", "ab")
        # A process group of its own, so that stopping it reaches its workers.
        self.process = subprocess.Popen(
            [binary, "-f", str(self.dir / "httpd.conf"), "-DFOREGROUND"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # bounded wait for an answer to OPTIONS
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + "/runs/", method="OPTIONS"), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        logs = "".join(p.read_text(errors="replace") for p in (self.dir / "stderr.log", self.dir / "error.log") if p.exists())
        self.stop()
        raise bench.CommandFailed([binary], -1, f"Apache did not answer OPTIONS within 20 s:\n{logs}")

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def data_url(self, run) -> str:
        """The dataset's folder (read-only)."""
        return f"{self.url}/data/{run.data.name}"

    def remote_url(self, run) -> str:
        """The run's empty upload folder, run.remote (writable)."""
        return f"{self.url}/runs/{run.work.name}/remote"

    def make_remote(self, run) -> None:
        """Creates run.remote, writable by Apache (and its run folder open to it)."""
        run.remote.mkdir()
        if self.owner:
            os.chmod(run.work, 0o755)
            os.chown(run.remote, *self.owner)

    @staticmethod
    def rclone_remote(url: str, path: str = "") -> str:
        return f':webdav,url="{url}":{path}'  # quoted: the URL holds ":"


_server: Server | None = None


def server(bench) -> Server:
    global _server
    if _server is None:
        _server = Server(bench)
    return _server


def register(bench) -> None:
    Tool, Benchmark, ours, DOMAIN = bench.Tool, bench.Benchmark, bench.ours, bench.DOMAIN

    def add(r, url: str) -> list[str]:
        return r.fpctl("domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "webdav", "--url", url, "--connections", CONNECTIONS)

    def add_and_sync(r) -> list[list[str]]:
        return [add(r, server(bench).data_url(r)), r.fpctl("sync", DOMAIN)]

    def add_empty_and_fill_replica(r) -> list[list[str]]:
        server(bench).make_remote(r)
        return [add(r, server(bench).remote_url(r)), r.fpctl("sync", DOMAIN), r.fill_replica()]

    def make_remote(r) -> list[list[str]]:
        server(bench).make_remote(r)
        return []

    def make_dest(r) -> list[list[str]]:
        r.dest.mkdir()
        return []

    data_remote = lambda r: Server.rclone_remote(server(bench).data_url(r))
    upload_remote = lambda r: Server.rclone_remote(server(bench).remote_url(r))
    # rclone's webdav backend paces its calls (10 ms apart, all transfers together), so 10,000
    # files take it minutes at any --transfers; those tools run once (runs=1), without warm-up.
    rclone_down = lambda transfers, runs=None: bench.rclone_copy(transfers, data_remote, lambda r: str(r.dest), runs=runs)
    rclone_up = lambda transfers, runs=None: bench.rclone_copy(
        transfers, lambda r: str(r.data), upload_remote, setup=make_remote, runs=runs
    )
    # The fair race: rclone's fastest honest setting, its pacer off (rclone 1.75's
    # --webdav-pacer-min-sleep; 1.60 had no such option) and 16 transfers; fast enough to repeat.
    unpaced = ("--webdav-pacer-min-sleep", "0")
    UNPACED = "rclone copy --transfers 16 --webdav-pacer-min-sleep 0"
    rclone_down_unpaced = bench.rclone_copy(16, data_remote, lambda r: str(r.dest), extra=unpaced)
    rclone_up_unpaced = bench.rclone_copy(16, lambda r: str(r.data), upload_remote, setup=make_remote, extra=unpaced)
    LSJSON_UNPACED = "rclone lsjson -R --webdav-pacer-min-sleep 0 (webdav)"
    upload = ours("fileproviderctl sync (webdav upload)", lambda r: [r.fpctl("sync", DOMAIN)], setup=add_empty_and_fill_replica)
    rclone_copy = "rclone copy --transfers 4"  # rclone's default

    bench.BENCHMARKS += [
        Benchmark(
            "webdav-download-1g",
            "big1g",
            [
                ours("fileproviderctl materialize (webdav)", lambda r: [r.fpctl("materialize", f"{DOMAIN}:/big.bin")], setup=add_and_sync),
                Tool(
                    "curl -o",
                    lambda r: [["curl", "-sSf", "-o", str(r.dest / "big.bin"), f"{server(bench).data_url(r)}/big.bin"]],
                    setup=make_dest,
                ),
                rclone_down(4),
            ],
            reference="curl -o",
            target=bench.at_least_speed(0.9, "curl"),
            also=((rclone_copy, bench.faster_than("rclone copy")),),
            group="webdav",
        ),
        Benchmark(
            "webdav-upload-1g",
            "big1g",
            [
                upload,
                Tool(
                    "curl -T",
                    lambda r: [["curl", "-sSf", "-o", "/dev/null", "-T", str(r.data / "big.bin"), f"{server(bench).remote_url(r)}/big.bin"]],
                    setup=make_remote,
                ),
                rclone_up(4),
            ],
            reference="curl -T",
            target=bench.at_least_speed(0.9, "curl"),
            also=((rclone_copy, bench.faster_than("rclone copy")),),
            group="webdav",
        ),
        Benchmark(
            "webdav-download-10k",
            "small10k",
            [
                ours("fileproviderctl materialize -R (webdav)", lambda r: [r.fpctl("materialize", "-R", f"{DOMAIN}:/")], setup=add_and_sync),
                rclone_down(4, runs=1),
                rclone_down(16, runs=1),
                rclone_down_unpaced,
            ],
            reference=rclone_copy,
            target=bench.faster_than("rclone copy --transfers 4"),
            also=(
                ("rclone copy --transfers 16", bench.faster_than("rclone copy --transfers 16")),
                (UNPACED, bench.faster_than("rclone copy, pacer off")),
            ),
            items=10_000,
            group="webdav",
        ),
        Benchmark(
            "webdav-first-sync-100k",
            "tree100k",
            [
                ours("fileproviderctl domain add + sync (webdav)", add_and_sync),
                Tool("rclone lsjson -R (webdav)", lambda r: [r.rclone("lsjson", "-R", data_remote(r))]),
                Tool(LSJSON_UNPACED, lambda r: [r.rclone("lsjson", "-R", *unpaced, data_remote(r))]),
            ],
            reference="rclone lsjson -R (webdav)",
            target=bench.faster_than("rclone lsjson -R over webdav"),
            also=((LSJSON_UNPACED, bench.faster_than("rclone lsjson -R, pacer off")),),
            items=100_000,
            group="webdav",
        ),
        Benchmark(
            "webdav-upload-10k",
            "small10k",
            [upload, rclone_up(4, runs=1), rclone_up(16, runs=1), rclone_up_unpaced],
            reference=rclone_copy,
            target=bench.faster_than("rclone copy --transfers 4"),
            also=(
                ("rclone copy --transfers 16", bench.faster_than("rclone copy --transfers 16")),
                (UNPACED, bench.faster_than("rclone copy, pacer off")),
            ),
            items=10_000,
            group="webdav",
        ),
    ]
