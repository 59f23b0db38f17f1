"""SFTP benchmarks: fileproviderctl's sftp backend against OpenSSH's sftp/scp and rclone's sftp
backend, all talking to the same sshd on 127.0.0.1.

Loaded by bench.py, which calls register(bench). The sshd (own host and user ed25519 keys, own
config, a free port) is started on first use and stopped by pid when bench.py exits.
"""

from __future__ import annotations

import atexit
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"


class Server:
    """One sshd for the whole bench run."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-sshd-"))
        self.key = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.user = getpass.getuser()
        for name in ("host_ed25519", "id_ed25519"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.dir / name)], check=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        host_key = (self.dir / "host_ed25519.pub").read_text().split()[:2]
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {' '.join(host_key)}\n")
        (self.dir / "sshd_config").write_text(
            f"""ListenAddress 127.0.0.1
Port {self.port}
HostKey {self.dir}/host_ed25519
PidFile {self.dir}/sshd.pid
AuthorizedKeysFile {self.key}.pub
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
StrictModes no
UsePAM no
MaxSessions 64
MaxStartups 64:30:128
LogLevel ERROR
Subsystem sftp internal-sftp
"""
        )
        os.makedirs("/run/sshd", exist_ok=True)
        log = open(self.dir / "sshd.log", "ab")
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")], stderr=log, stdout=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # bounded wait for the SSH banner
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                    if c.recv(4) == b"SSH-":
                        atexit.register(self.stop)
                        return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"sshd did not start: {(self.dir / 'sshd.log').read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def ssh_options(self) -> list[str]:
        return [
            "-i", str(self.key), "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        ]

    def target(self) -> str:
        return f"{self.user}@127.0.0.1"

    def rclone_remote(self, path: Path | str) -> str:
        return (
            f":sftp,host=127.0.0.1,port={self.port},user={self.user},key_file={self.key},"
            f"known_hosts_file={self.known_hosts},disable_hashcheck=true:{path}"
        )


_server: Server | None = None


def server() -> Server:
    global _server
    if _server is None:
        _server = Server()
    return _server


def register(bench) -> None:
    Run, Tool, Benchmark, ours, DOMAIN = bench.Run, bench.Tool, bench.Benchmark, bench.ours, bench.DOMAIN

    def add(run, root: Path) -> list[str]:
        s = server()
        return run.fpctl(
            "domain", "add", DOMAIN, "--mode", "placeholder-files", "--backend", "sftp", "--host", "127.0.0.1", "--port", str(s.port),
            "--user", s.user, "--identity", str(s.key), "--known-hosts", str(s.known_hosts), "--root", str(root),
        )

    def add_and_sync(run) -> list[list[str]]:
        return [add(run, run.data), run.fpctl("sync", DOMAIN)]

    def add_empty_and_fill_replica(run) -> list[list[str]]:
        run.remote.mkdir()
        return [add(run, run.remote), run.fpctl("sync", DOMAIN), run.fill_replica()]

    def sftp_batch(run, commands: str) -> list[str]:
        batch = run.work / "batch"
        batch.write_text(commands)
        s = server()
        return ["sftp", "-q", "-b", str(batch), "-P", str(s.port), *s.ssh_options(), s.target()]

    def scp(src: str, dst: str) -> list[str]:
        s = server()
        return ["scp", "-q", "-r", "-P", str(s.port), *s.ssh_options(), src, dst]

    def make_dest(run) -> list[list[str]]:
        return [["mkdir", "-p", str(run.dest)]]

    def make_remote(run) -> list[list[str]]:
        run.remote.mkdir()
        return []

    rclone_copy_down = lambda transfers: bench.rclone_copy(transfers, lambda r: server().rclone_remote(r.data), lambda r: str(r.dest))
    rclone_copy_up = lambda transfers: bench.rclone_copy(
        transfers, lambda r: str(r.data), lambda r: server().rclone_remote(r.remote), setup=make_remote
    )

    bench.BENCHMARKS += [
        Benchmark(
            "sftp-download-1g",
            "big1g",
            [
                ours("fileproviderctl materialize (sftp)", lambda r: [r.fpctl("materialize", f"{DOMAIN}:/big.bin")], setup=add_and_sync),
                Tool("sftp get", lambda r: [sftp_batch(r, f'get "{r.data}/big.bin" "{r.dest}/big.bin"\n')], setup=make_dest),
                Tool("scp", lambda r: [scp(f"{server().target()}:{r.data}/big.bin", str(r.dest))], setup=make_dest),
                rclone_copy_down(4),
            ],
            reference="sftp get",
            target=bench.at_least_speed(0.85, "sftp"),
        ),
        Benchmark(
            "sftp-upload-1g",
            "big1g",
            [
                ours("fileproviderctl sync (sftp upload)", lambda r: [r.fpctl("sync", DOMAIN)], setup=add_empty_and_fill_replica),
                Tool("sftp put", lambda r: [sftp_batch(r, f'put "{r.data}/big.bin" "{r.remote}/big.bin"\n')], setup=make_remote),
                Tool("scp", lambda r: [scp(str(r.data / "big.bin"), f"{server().target()}:{r.remote}/")], setup=make_remote),
                rclone_copy_up(4),
            ],
            reference="sftp put",
            target=bench.at_least_speed(0.85, "sftp"),
        ),
        Benchmark(
            "sftp-materialize-10k",
            "small10k",
            [
                ours("fileproviderctl materialize -R (sftp)", lambda r: [r.fpctl("materialize", "-R", f"{DOMAIN}:/")], setup=add_and_sync),
                rclone_copy_down(4),
                rclone_copy_down(16),
                Tool("sftp get -r", lambda r: [sftp_batch(r, f'get -r "{r.data}" "{r.dest}"\n')]),
                Tool("scp -r", lambda r: [scp(f"{server().target()}:{r.data}", str(r.dest))]),
                Tool("cp -r", lambda r: [["cp", "-r", str(r.data), str(r.dest)]]),
            ],
            reference="cp -r",
            target=bench.at_most_times(1.2, "cp -r"),
            items=10_000,
        ),
        Benchmark(
            "sftp-upload-10k",
            "small10k",
            [
                ours("fileproviderctl sync (sftp upload)", lambda r: [r.fpctl("sync", DOMAIN)], setup=add_empty_and_fill_replica),
                rclone_copy_up(4),
                rclone_copy_up(16),
                Tool("sftp put -r", lambda r: [sftp_batch(r, f'put -r "{r.data}" "{r.remote}/data"\n')], setup=make_remote),
                Tool("scp -r", lambda r: [scp(str(r.data), f"{server().target()}:{r.remote}/")], setup=make_remote),
                Tool("cp -r", lambda r: [["cp", "-r", str(r.data), str(r.dest)]]),
            ],
            reference="cp -r",
            target=bench.at_most_times(1.2, "cp -r"),
            items=10_000,
        ),
        Benchmark(
            "sftp-first-sync-100k",
            "tree100k",
            [
                ours("fileproviderctl domain add + sync (sftp)", add_and_sync),
                Tool("rclone lsjson -R (sftp)", lambda r: [r.rclone("lsjson", "-R", server().rclone_remote(r.data))]),
            ],
            reference="rclone lsjson -R (sftp)",
            target=bench.faster_than("rclone lsjson -R over sftp"),
            items=100_000,
        ),
    ]
