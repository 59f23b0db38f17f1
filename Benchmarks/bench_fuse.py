"""The FUSE layout's rows (issue 38): a `--mode dataless --on-access fuse` domain, which `serve`
mounts with libfuse on its replica folder, read and walked by ordinary programs, beside the same
programs on a plain folder and through `rclone mount --vfs-cache-mode full`. Group `fuse`
(`--only fuse`).

The reading rows are built as the fanotify rows of bench_onaccess.py (same datasets, the same
sshd of bench_sftp.py, the same peers; Benchmarks/onaccess_read.py starts the server, waits for
its mount and times the `cat`):

- fuse-first-read-1g: the first `cat` of a dataless 1 GiB file over SFTP, with `--hydration
  full` (as the fanotify rows) and with the default `progressive`, vs `sftp get` and the first
  `cat` through a fresh rclone mount. Targets: at least 0.85× sftp get's throughput, faster
  than rclone mount.
- fuse-second-read-1g: the second `cat` of that file (the kernel's page cache of the mount,
  FOPEN_KEEP_CACHE) vs `cat` of the local original from the page cache and the second read
  through rclone mount. Target: at least 0.9× the local cat's speed.
- fuse-read-1000: one `cat` of 1,000 never-read 4 KiB files (small10k/d0) vs the same through a
  fresh rclone mount and `sftp get -r` of the folder. Targets: faster than rclone mount, at most
  1.5× sftp get -r's time.

The walking rows use a local store (nothing of them touches the store: names and attributes
come from the backing folder, and rclone mount of a local folder is rclone's fastest case),
run on a tmpfs (`tmpfs=True`: the dataset, the homes, backing folders and rclone's cache; this
VM's ext4 is slow to create files right after a large deletion, which every iteration's clean-up
is: see Docs/Performance.md, Other rows) and Benchmarks/mount_command.py, which starts the
server, waits for its mount, and times one program through it:

- fuse-find-100k / fuse-ls-lR-100k: `find` / `ls -lR` of tree100k (100,000 files in 1,110
  folders) through the FUSE mount vs the same on the plain folder and through rclone mount,
  each through a fresh mount and a second time in the same mount (the first run untimed).
  Targets: at most 2× the plain folder's time, faster than rclone through a fresh mount. The
  `find` through each mount must list exactly the paths `find` lists in the tree (checked
  untimed, after the timed run).
- fuse-git-status-10k: `git status` in a 10,000-file repository (dataset git10k: 10 × 10
  folders of 100 files of 100-2000 bytes, Benchmarks/make_tree.py, committed and packed)
  through the mount vs on a plain folder. Each run's store is a copy of the repository
  (`.git` copied, the work tree hard-linked: `git status` rewrites `.git/index`, which serve
  sends to the store). Through the mount, an untimed first `git status` reads every file
  (the index's stat data is another folder's) and rewrites the index; serve sends it; then the
  second `git status` is timed and the repository must be clean. On the plain folder the same:
  a first `git status` untimed, the second timed. No target: the ratio is reported.

- fuse-create-1000: 1,000 new files of 4 KiB written by one Python program into a new folder
  through the mount (an empty local store; serve records each change in its local change feed,
  Docs/FUSE.md "The local change feed", and sends them meanwhile) vs the same program on a plain
  folder. No target: the ratio is reported (the cost of a write through the mount and of its
  recording).

Every row adds the domain afresh in its untimed setup (`domain add --mode dataless --on-access
fuse`, `sync`); the timed figure is the script's, the peak MiB column the server's peak RSS.
Run as root like the on-access rows (the harness's peers mount FUSE too).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
READ = HERE / "onaccess_read.py"
COMMAND = HERE / "mount_command.py"
MAKE_TREE = HERE / "make_tree.py"
GROUP = "fuse"


def make_git10k(root: Path) -> None:
    """10 × 10 folders of 100 files (make_tree.py), one commit of them, packed (`git gc`)."""
    subprocess.run([sys.executable, str(MAKE_TREE), str(root), "10", "--folders", "10", "--files", "100"], check=True)
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "10,000 files"], ["gc", "-q"]):
        subprocess.run(["git", "-c", "gc.auto=0", "-C", str(root), *argv], check=True, env=env)


def register(bench) -> None:
    import bench_sftp  # the same module bench.py loaded (sys.modules): one sshd for all

    server = bench_sftp.server
    Tool, Benchmark, DOMAIN = bench.Tool, bench.Benchmark, bench.DOMAIN
    bench.DATASETS["git10k"] = bench.Dataset("git10k", 1, make_git10k)

    def replica(r) -> Path:
        return r.work / "replica"

    def add_fuse(r, backend: list[str], hydration: str | None) -> list[list[str]]:
        return [
            r.fpctl(
                "domain", "add", DOMAIN, "--mode", "dataless", "--on-access", "fuse",
                *(["--hydration", hydration] if hydration else []), "--replica", str(replica(r)), *backend,
            ),
            r.fpctl("sync", DOMAIN),
        ]

    def sftp_store(r, root: Path) -> list[str]:
        s = server()
        return [
            "--backend", "sftp", "--host", "127.0.0.1", "--port", str(s.port), "--user", s.user,
            "--identity", str(s.key), "--known-hosts", str(s.known_hosts), "--root", str(root),
        ]

    def local_store(root: Path) -> list[str]:
        return ["--backend", "local", "--root", str(root)]

    # --- reading rows (as bench_onaccess.py's) ---

    def cat_ours(name: str, root, files, hydration: str | None = "full", second: bool = False):
        return Tool(
            name,
            lambda r: [
                [
                    sys.executable, str(READ), "ours", str(bench.FPCTL), str(r.home), DOMAIN, str(replica(r)),
                    "--source", str(root(r)), *(["--second"] if second else []), *files(r),
                ]
            ],
            setup=lambda r: add_fuse(r, sftp_store(r, root(r)), hydration),
            ours=True,
            reports=True,
        )

    def cat_rclone(name: str, root, files, second: bool = False):
        return Tool(
            name,
            lambda r: [
                [
                    sys.executable, str(READ), "rclone", server().rclone_remote(root(r)), str(r.work / "mnt"),
                    str(r.work / "vfs-cache"), "--rclone", bench.RCLONE, "--source", str(root(r)),
                    *(["--second"] if second else []), *files(r),
                ]
            ],
            reports=True,
        )

    def sftp_batch(r, commands: str) -> list[str]:
        batch = r.work / "batch"
        batch.write_text(commands)
        s = server()
        return ["sftp", "-q", "-b", str(batch), "-P", str(s.port), *s.ssh_options(), s.target()]

    big = lambda r: r.data
    big_files = lambda r: ["big.bin"]
    small = lambda r: r.data / "d0"
    small_files = lambda r: sorted(p.name for p in small(r).iterdir())
    make_dest = lambda r: [["mkdir", "-p", str(r.dest)]]

    def at_least(fraction: float, peer: str):
        return bench.Target(f"≥ {fraction:g}× {peer}'s throughput", lambda mine, ref: ref is not None and mine * fraction <= ref)

    # --- walking rows ---

    def through_mount(server_name: str, r, program: list[str], *options: str) -> list[str]:
        if server_name == "ours":
            head = ["ours", str(bench.FPCTL), str(r.home), DOMAIN, str(replica(r))]
        else:
            head = ["rclone", str(r.data), str(r.work / "mnt"), str(r.work / "vfs-cache"), "--rclone", bench.RCLONE]
        return [sys.executable, str(COMMAND), *head, *options, "--", *program]

    def walk_row(name: str, program: str, what: str) -> object:
        argv = [*program.split(), "{}"]
        check = lambda r: ("--check-find", str(r.data))
        second = lambda r: ("--before", f"{program} {{}}")
        plain = f"{what} (plain folder)"
        rclone_first = f"{what} via rclone mount (fresh mount)"
        return Benchmark(
            name,
            "tree100k",
            [
                Tool(
                    f"fileproviderctl serve: {what} through the FUSE mount (fresh mount)",
                    lambda r: [through_mount("ours", r, argv, *check(r))],
                    setup=lambda r: add_fuse(r, local_store(r.data), None),
                    ours=True,
                    reports=True,
                ),
                Tool(
                    f"fileproviderctl serve: {what} through the FUSE mount (second, same mount)",
                    lambda r: [through_mount("ours", r, argv, *second(r), *check(r))],
                    setup=lambda r: add_fuse(r, local_store(r.data), None),
                    ours=True,
                    reports=True,
                ),
                Tool(plain, lambda r: [[*program.split(), str(r.data)]]),
                Tool(rclone_first, lambda r: [through_mount("rclone", r, argv, *check(r))], reports=True),
                Tool(
                    f"{what} via rclone mount (second, same mount)",
                    lambda r: [through_mount("rclone", r, argv, *second(r), *check(r))],
                    reports=True,
                ),
            ],
            reference=plain,
            target=bench.at_most_times(2, f"{what} on a plain folder"),
            also=((rclone_first, bench.faster_than("rclone mount (fresh)")),),
            items=100_000,
            group=GROUP,
            tmpfs=True,
        )

    def repository_copy(r, folder: Path) -> list[str]:
        """`.git` copied (git status rewrites its index), the work tree hard-linked."""
        return ["sh", "-c", f'cp -al "{r.data}" "{folder}" && rm -r "{folder}/.git" && cp -a "{r.data}/.git" "{folder}/.git"']

    store = lambda r: r.work / "store"
    CREATE = (
        "import os, sys\n"
        "folder = sys.argv[1]\n"
        "os.mkdir(folder)\n"
        "block = b'x' * 4096\n"
        "for index in range(1000):\n"
        "    with open(os.path.join(folder, f'f{index:04}.bin'), 'wb') as f:\n"
        "        f.write(block)\n"
    )
    CREATE_PLAIN = "create 1,000 files of 4 KiB (plain folder)"
    plain_repo = lambda r: r.work / "plain"
    GIT_PLAIN = "git status (plain folder)"

    RCLONE_FIRST = "cat via rclone mount (first read)"
    bench.BENCHMARKS += [
        Benchmark(
            "fuse-first-read-1g",
            "big1g",
            [
                cat_ours("fileproviderctl serve (FUSE): cat (first read, --hydration full)", big, big_files, "full"),
                cat_ours("fileproviderctl serve (FUSE): cat (first read, progressive)", big, big_files, "progressive"),
                Tool("sftp get", lambda r: [sftp_batch(r, f'get "{r.data}/big.bin" "{r.dest}/big.bin"\n')], setup=make_dest),
                cat_rclone(RCLONE_FIRST, big, big_files),
            ],
            reference="sftp get",
            target=at_least(0.85, "sftp get"),
            also=((RCLONE_FIRST, bench.faster_than("rclone mount")),),
            group=GROUP,
        ),
        Benchmark(
            "fuse-second-read-1g",
            "big1g",
            [
                cat_ours("fileproviderctl serve (FUSE): cat (second read)", big, big_files, second=True),
                Tool(
                    "cat (local file, page cache)",
                    lambda r: [["cat", str(r.data / "big.bin")]],
                    setup=lambda r: [["cat", str(r.data / "big.bin")]],
                ),
                cat_rclone("cat via rclone mount (second read)", big, big_files, second=True),
            ],
            reference="cat (local file, page cache)",
            target=at_least(0.9, "local cat"),
            group=GROUP,
        ),
        Benchmark(
            "fuse-read-1000",
            "small10k",
            [
                cat_ours("fileproviderctl serve (FUSE): cat of 1,000 files", small, small_files),
                cat_rclone("cat of 1,000 files via rclone mount", small, small_files),
                Tool("sftp get -r", lambda r: [sftp_batch(r, f'get -r "{small(r)}" "{r.dest}"\n')]),
            ],
            reference="sftp get -r",
            target=bench.at_most_times(1.5, "sftp get -r"),
            also=(("cat of 1,000 files via rclone mount", bench.faster_than("rclone mount")),),
            group=GROUP,
        ),
        walk_row("fuse-find-100k", "find", "find"),
        walk_row("fuse-ls-lR-100k", "ls -lR", "ls -lR"),
        Benchmark(
            "fuse-create-1000",
            "small10k",
            [
                Tool(
                    "fileproviderctl serve: create 1,000 files of 4 KiB through the FUSE mount",
                    lambda r: [through_mount("ours", r, ["python3", "-c", CREATE, "{}/created"])],
                    setup=lambda r: [["mkdir", "-p", str(store(r))], *add_fuse(r, local_store(store(r)), None)],
                    ours=True,
                    reports=True,
                ),
                Tool(
                    CREATE_PLAIN,
                    lambda r: [["python3", "-c", CREATE, str(r.work / "plain-created")]],
                ),
            ],
            reference=CREATE_PLAIN,
            target=bench.ratio_reported("a plain folder"),
            items=1_000,
            group=GROUP,
            tmpfs=True,
        ),
        Benchmark(
            "fuse-git-status-10k",
            "git10k",
            [
                Tool(
                    "fileproviderctl serve: git status through the FUSE mount (second run)",
                    lambda r: [
                        through_mount(
                            "ours", r, ["git", "-C", "{}", "status"], "--before", "git -C {} status", "--settle", "--check-git-clean"
                        )
                    ],
                    setup=lambda r: [repository_copy(r, store(r)), *add_fuse(r, local_store(store(r)), None)],
                    ours=True,
                    reports=True,
                ),
                Tool(
                    GIT_PLAIN,
                    lambda r: [["git", "-C", str(plain_repo(r)), "status"]],
                    setup=lambda r: [repository_copy(r, plain_repo(r)), ["git", "-C", str(plain_repo(r)), "status"]],
                ),
            ],
            reference=GIT_PLAIN,
            target=bench.ratio_reported("git status on a plain folder"),
            items=10_000,
            group=GROUP,
            tmpfs=True,
        ),
    ]
