#!/usr/bin/env bash
# Builds fileproviderctl and media-server as `make demo` and `make install` do (release, the
# Swift runtime linked in: the Makefile's RELEASE_BUILD): the optimizer runs passes the debug
# build never does, and once crashed on code the debug build compiled (Swift 6.3.1). The
# scripts after this one (test-release-*.sh) use this build. Works from any directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
echo "== release build of fileproviderctl and media-server"
swift build --package-path "$root" -c release -Xswiftc -static-stdlib --product fileproviderctl
# media-server is a package of its own (Servers/media-server), with its own .build.
swift build --package-path "$root/Servers/media-server" -c release -Xswiftc -static-stdlib --product media-server
