#!/usr/bin/env python3
"""The progress line on a real terminal: fileproviderctl materialize runs on a pseudo-terminal.

A media-server on loopback serves a 6 MiB file through a proxy that passes 1 MiB/s, so a
download takes seconds:
  1. at 200 columns: the line shows percent, a bar, bytes, files, a rate, the time left and the
     time taken, and stays within 199 columns; Ctrl-C (typed on the terminal) stops it with a
     checkpoint;
  2. at 40 columns: the download resumes; no line is wider than 39 columns; the terminal is
     then made 200 columns wide (SIGWINCH) and the line grows to show the rest; the rate never
     counts the resumed bytes (it stays near 1 MiB/s, not several).

usage: progress_pty.py FILEPROVIDERCTL MEDIA_SERVER
"""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

RATE = 1 << 20  # bytes per second through the proxy
SIZE = 6 << 20


def fail(message):
    print(f"progress_pty: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrottlingProxy:
    """Forwards 127.0.0.1:port to the upstream port, the replies at most RATE bytes a second."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self.pump, args=(client, server, None), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, RATE), daemon=True).start()

    @staticmethod
    def pump(source, target, rate):
        sent, start = 0, time.monotonic()
        try:
            while True:
                data = source.recv(16384)
                if not data:
                    break
                target.sendall(data)
                sent += len(data)
                if rate:
                    # Pacing, not waiting for an event: a byte may leave only at its time.
                    ahead = sent / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
        except OSError:
            pass
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def set_size(fd, columns):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))


def run_on_terminal(argv, columns, environment, on_output):
    """Runs argv on a new pseudo-terminal `columns` wide; calls on_output(fd, text so far) after
    each read. Returns (exit status, everything written to the terminal)."""
    pid, fd = pty.fork()
    if pid == 0:
        set_size(0, columns)  # before exec: the program sees its width from the start
        os.execve(argv[0], argv, environment)
    output = b""
    deadline = time.monotonic() + 120
    while True:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            fail(f"{' '.join(argv)} did not end within 120 s; output: {output!r}")
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the program ended and closed the terminal
            break
        if not chunk:
            break
        output += chunk
        on_output(fd, output.decode("utf-8", "replace"))
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode("utf-8", "replace")


def drawn_lines(text):
    """The progress lines drawn: what follows each carriage return and erase-line."""
    lines = []
    for part in text.split("\r"):
        if part.startswith("\x1b[K"):
            line = part[len("\x1b[K"):].split("\n")[0]
            if line:
                lines.append(line)
    return lines


RATE_PATTERN = re.compile(r"([0-9.]+) (B|KiB|MiB|GiB)/s")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def rates(lines):
    return [float(m.group(1)) * UNITS[m.group(2)] for line in lines for m in RATE_PATTERN.finditer(line)]


def main():
    fpctl, media_server = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="fpk-progress-")
    server = None
    try:
        media = os.path.join(work, "media")
        os.makedirs(media)
        with open(os.path.join(media, "big.jpg"), "wb") as f:
            f.write(os.urandom(SIZE))
        port = free_port()
        server = subprocess.Popen(
            [media_server, "--root", media, "--port", str(port), "--exit-on-stdin-eof"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    fail("media-server did not start")
                time.sleep(0.05)  # polling a condition, bounded by the deadline
        proxy = ThrottlingProxy(port)
        home = os.path.join(work, "home")
        environment = {"PATH": "/usr/bin:/bin", "HOME": work, "TERM": "xterm", "LANG": "C.UTF-8"}
        base = [fpctl]
        for arguments in (["domain", "add", "m", "--mode", "placeholder-files", "--backend", "media", "--url", f"http://127.0.0.1:{proxy.port}"],
                          ["sync", "m"]):
            result = subprocess.run(base + arguments + ["--home", home], env=environment, capture_output=True, text=True)
            if result.returncode != 0:
                fail(f"{' '.join(arguments)}: {result.stderr}")
        materialize = [fpctl, "materialize", "m:/big.jpg", "--home", home]

        # 1. 200 columns; Ctrl-C once past a third.
        interrupted = [False]

        def interrupt_past_a_third(fd, text):
            lines = drawn_lines(text)
            if not interrupted[0] and lines and re.search(r"\b([3-9][0-9])%", lines[-1]):
                interrupted[0] = True
                os.write(fd, b"\x03")

        status, text = run_on_terminal(materialize, 200, environment, interrupt_past_a_third)
        lines = drawn_lines(text)
        if not interrupted[0]:
            fail(f"no line reached a third at 200 columns: {lines}")
        if status != 130 or "interrupted" not in text:
            fail(f"Ctrl-C: exit {status}, output {text!r}")
        widest = max(len(line) for line in lines)
        if widest > 199:
            fail(f"a line of {widest} columns on a 200-column terminal")
        full = [line for line in lines if all(part in line for part in ("%", "[", "MiB", "0/1 files", "/s", "ETA ", "elapsed "))]
        if not full:
            fail(f"at 200 columns no line shows percent, bar, bytes, files, rate, ETA and elapsed time: {lines}")
        print(f"   200 columns: {full[-1]}")

        # 2. 40 columns, resumed; then 200 columns by SIGWINCH.
        resized = [False]

        def widen_after_some_lines(fd, text):
            if not resized[0] and len(drawn_lines(text)) >= 5:
                resized[0] = True
                set_size(fd, 200)  # the kernel sends SIGWINCH to the terminal's foreground group

        status, text = run_on_terminal(materialize, 40, environment, widen_after_some_lines)
        if status != 0:
            fail(f"the resumed materialize: exit {status}, output {text!r}")
        with open(os.path.join(home, "domains", "m", "big.jpg"), "rb") as f, open(os.path.join(media, "big.jpg"), "rb") as g:
            if f.read() != g.read():
                fail("the resumed download's contents differ from the store's")
        lines = drawn_lines(text)
        if not resized[0]:
            fail(f"the download ended before 5 lines were drawn: {lines}")
        first_wide = next((i for i, line in enumerate(lines) if len(line) > 39), None)
        if first_wide is None or first_wide < 5:
            fail(f"lines before the resize must fit 39 columns, one after it be wider: {lines}")
        if any(len(line) > 39 for line in lines[:5]):
            fail(f"a line wider than 39 columns on a 40-column terminal: {lines[:5]}")
        if not any("files" in line and "/s" in line for line in lines[first_wide:]):
            fail(f"after SIGWINCH to 200 columns no line shows files and rate: {lines[first_wide:]}")
        print(f"   40 columns:  {lines[0]}")
        print(f"   widened:     {lines[first_wide]}")
        too_fast = [r for r in rates(lines) if r > 2 * RATE]
        if too_fast:
            fail(f"rates above twice the proxy's {RATE} B/s (resumed bytes counted as speed?): {too_fast}: {lines}")
        print("progress_pty: OK")
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
