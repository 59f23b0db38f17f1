#!/usr/bin/env python3
"""Prints what fish's `complete -C LINE` offers after sourcing SCRIPT, one candidate a line.

fish's completion scripts read the command line with `commandline`, which works only in an
interactive fish: this runs one on a pseudo-terminal, types the command, and prints what came
back between the prompt and a marker, without the terminal's escape sequences.

usage: fish_complete.py SCRIPT LINE
"""
import os
import pty
import re
import select
import sys
import time

script, line = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("fish", ["fish", "--no-config"])
# The marker is computed, so the echo of the typed line does not contain it.
os.write(fd, f"source '{script}'; echo BEGIN-(math 20 + 1); complete -C '{line}'; echo END-(math 40 + 2)\n".encode())
output = b""
deadline = time.monotonic() + 30
while b"END-42" not in output:
    if time.monotonic() > deadline:
        sys.exit(f"fish_complete: no answer within 30 s: {output!r}")
    if select.select([fd], [], [], 1)[0]:
        try:
            output += os.read(fd, 65536)
        except OSError:
            break
os.write(fd, b"exit\n")
os.waitpid(pid, 0)
text = output.decode("utf-8", "replace")
text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]|\r", "", text)
answer = text[text.rfind("BEGIN-21") + len("BEGIN-21"):text.rfind("END-42")]
for candidate in answer.split("\n"):
    if candidate.strip():
        print(candidate)
