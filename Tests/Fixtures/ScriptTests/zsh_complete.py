#!/usr/bin/env python3
"""Prints what zsh offers for LINE with the completion function SCRIPT (`_fileproviderctl`),
one candidate a line.

zsh completes only in its line editor: this runs an interactive `zsh -f` on a
pseudo-terminal, loads the completion system with SCRIPT's folder first in `fpath`, types LINE
and asks for the list of choices (`list-choices`, Ctrl-D in the middle of a line), then prints
the words listed, without the terminal's escape sequences and the typed line's own words.

usage: zsh_complete.py SCRIPT LINE
"""
import os
import pty
import re
import select
import sys
import time

script, line = sys.argv[1], sys.argv[2]
folder = os.path.dirname(os.path.abspath(script))
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "dumb"
    os.execvp("zsh", ["zsh", "-f", "-i"])

output = b""


def read_until(marker: bytes, seconds: float = 30) -> None:
    global output
    deadline = time.monotonic() + seconds
    while marker not in output:
        if time.monotonic() > deadline:
            sys.exit(f"zsh_complete: no {marker!r} within {seconds:g} s: {output!r}")
        if select.select([fd], [], [], 1)[0]:
            try:
                output += os.read(fd, 65536)
            except OSError:
                sys.exit(f"zsh_complete: zsh ended: {output!r}")


# The markers are computed, so the echo of the typed commands does not contain them.
os.write(
    fd,
    (
        f"PS1=''; PS2=''; fpath=('{folder}' $fpath); autoload -Uz compinit; compinit -u -D; "
        "zstyle ':completion:*' list-separator ''; unsetopt listtypes; bindkey '^D' list-choices; "
        "echo READY-$((20 + 1))\n"
    ).encode(),
)
read_until(b"READY-21")
# The line editor is reading (it turns bracketed paste on): what is typed before that may be
# thrown away.
start = output.index(b"READY-21")
while b"\x1b[?2004h" not in output[start:]:
    if not select.select([fd], [], [], 30)[0]:
        sys.exit(f"zsh_complete: the line editor did not start: {output!r}")
    output += os.read(fd, 65536)
start = len(output)
# The line, the list of choices, then the line is killed and a marker printed.
os.write(fd, line.encode() + b"\x04")
os.write(fd, b"\x15echo END-$((40 + 2))\n")
read_until(b"END-42")
os.write(fd, b"exit\n")
os.waitpid(pid, 0)
text = output[start:].decode("utf-8", "replace")
text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]|\r|\x07", "", text)
text = text[: text.rfind("END-42")]
typed = set(line.split()) | {"echo", "END-$((40", "+", "2))"}
seen = set()
for word in text.split():
    if word not in typed and word not in seen:
        seen.add(word)
        print(word)
