#!/usr/bin/env python3
"""fileproviderctl serve as systemd runs it, without systemd: the notify protocol and journald.

  1. NOTIFY_SOCKET is a datagram socket of this test, WATCHDOG_USEC 0.4 s, JOURNAL_STREAM names
     the file serve's standard error goes to: serve sends READY=1 once serving, WATCHDOG=1
     pings, STOPPING=1 on SIGTERM, and exits 0; every log line starts with a priority
     (<6> for info, as sd-daemon.h's SD_INFO) and carries no timestamp.
  2. The socket in the abstract namespace (@name), and a JOURNAL_STREAM that names another
     file (what a child whose standard error was redirected inherits): READY=1 arrives; the
     log lines have timestamps and no priority prefixes.

usage: serve_service.py FILEPROVIDERCTL
"""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def fail(message):
    print(f"serve_service: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def receive_until(sock, wanted, deadline, messages):
    """Collects datagrams into messages until one has the line `wanted`."""
    while not any(wanted in m.split("\n") for m in messages):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([sock], [], [], left)
        if ready:
            messages.append(sock.recv(4096).decode())
    return True


def serve(fpctl, home, work, address, journal_stream):
    """Runs serve until READY=1 and a watchdog ping (if asked), stops it with SIGTERM; returns
    (datagrams, log text)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + address[1:] if address.startswith("@") else address)
    log_path = os.path.join(work, "serve.log")
    with open(log_path, "wb") as log:
        info = os.fstat(log.fileno())
        stream = f"{info.st_dev}:{info.st_ino}" if journal_stream == "this" else journal_stream
        environment = dict(os.environ, NOTIFY_SOCKET=address, WATCHDOG_USEC="400000", JOURNAL_STREAM=stream)
        process = subprocess.Popen([fpctl, "serve", "--home", home, "--poll-interval", "3600"],
                                   stdout=subprocess.DEVNULL, stderr=log, env=environment)
    messages = []
    try:
        if not receive_until(sock, "READY=1", time.monotonic() + 60, messages):
            fail(f"no READY=1 within 60 s; datagrams {messages}; log {open(log_path).read()!r}")
        if not receive_until(sock, "WATCHDOG=1", time.monotonic() + 30, messages):
            fail(f"no WATCHDOG=1 within 30 s of READY=1 (WATCHDOG_USEC=400000); datagrams {messages}")
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=60)
        if status != 0:
            fail(f"serve exited {status} after SIGTERM; log {open(log_path).read()!r}")
        while select.select([sock], [], [], 0)[0]:
            messages.append(sock.recv(4096).decode())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        sock.close()
    with open(log_path) as log:
        return messages, log.read()


TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def main():
    fpctl = sys.argv[1]
    work = tempfile.mkdtemp(prefix="fpk-service-")
    try:
        home = os.path.join(work, "home")
        store = os.path.join(work, "store")
        os.makedirs(store)
        with open(os.path.join(store, "a.txt"), "w") as f:
            f.write("a\n")
        for arguments in (["domain", "add", "family", "--mode", "placeholder-files", "--backend", "local", "--root", store], ["sync"]):
            result = subprocess.run([fpctl] + arguments + ["--home", home], capture_output=True, text=True)
            if result.returncode != 0:
                fail(f"{' '.join(arguments)}: {result.stderr}")

        # 1. Under journald.
        messages, log = serve(fpctl, home, work, os.path.join(work, "notify.sock"), "this")
        ready = next(m for m in messages if "READY=1" in m.split("\n"))
        if f"MAINPID=" not in ready or "STATUS=serving family" not in ready:
            fail(f"READY=1 without MAINPID or STATUS: {ready!r}")
        if not any("STOPPING=1" in m.split("\n") for m in messages):
            fail(f"no STOPPING=1 after SIGTERM: {messages}")
        lines = [line for line in log.split("\n") if line]
        if not lines:
            fail("serve logged nothing")
        for line in lines:
            if not re.match(r"^<[0-7]>", line):
                fail(f"a log line without a priority prefix: {line!r}")
            if TIMESTAMP.search(line):
                fail(f"a log line with a timestamp of its own under journald: {line!r}")
        if not any(line.startswith("<6>serving family") for line in lines):
            fail(f"no '<6>serving family' line: {lines}")
        if not any(line.startswith("<6>stopping") for line in lines):
            fail(f"no '<6>stopping' line: {lines}")
        print(f"   journald: {lines[0]}")

        # 2. Abstract socket; standard error not the journal's stream.
        messages, log = serve(fpctl, home, work, f"@fpk-notify-{os.getpid()}", "1:1")
        lines = [line for line in log.split("\n") if line]
        if not lines or any(re.match(r"^<[0-7]>", line) for line in lines):
            fail(f"priority prefixes without journald: {lines}")
        if not all(TIMESTAMP.search(line) for line in lines):
            fail(f"a log line without a timestamp outside journald: {lines}")
        print(f"   terminal: {lines[0]}")
        print("serve_service: OK")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
