#!/usr/bin/env bash
# The release build of test-release-build.sh on a terminal and under systemd's protocols:
#   Tests/Fixtures/ScriptTests/progress_pty.py   the progress line on a pseudo-terminal at 40
#                                                and 200 columns, SIGWINCH, a resumed download
#   Tests/Fixtures/ScriptTests/serve_service.py  serve's sd_notify datagrams (READY=1,
#                                                WATCHDOG=1, STOPPING=1) and journald log lines
# FILEPROVIDERCTL and MEDIA_SERVER choose other binaries. Works from any directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin=$(swift build --package-path "$root" -c release -Xswiftc -static-stdlib --show-bin-path)
fpctl=${FILEPROVIDERCTL:-$bin/fileproviderctl}
server_bin=$(swift build --package-path "$root/Servers/media-server" -c release -Xswiftc -static-stdlib --show-bin-path)
server=${MEDIA_SERVER:-$server_bin/media-server}
echo "== progress on a pseudo-terminal"
python3 "$root/Tests/Fixtures/ScriptTests/progress_pty.py" "$fpctl" "$server"
echo "== serve under systemd's notify protocol and journald"
python3 "$root/Tests/Fixtures/ScriptTests/serve_service.py" "$fpctl"
echo "test-release-terminal: OK"
