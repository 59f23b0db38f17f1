#!/usr/bin/env bash
# Builds fileproviderctl and media-server as `make demo` does (release): the optimizer runs
# passes the debug build never does, and once crashed on code the debug build compiled
# (Swift 6.3.1). Works from any directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
echo "== release build of fileproviderctl and media-server"
swift build --package-path "$root" -c release --product fileproviderctl
swift build --package-path "$root" -c release --product media-server
