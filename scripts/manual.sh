#!/usr/bin/env bash
# Makes fileproviderctl's man page from its commands with swift-argument-parser's
# generate-manual plugin and prints the page's path. The arguments are flags for
# `swift package` (the Makefile passes its release build's: the plugin builds the package's
# products in release mode first, and with the same flags that build is already there).
# The page is dated by the last commit, so the same sources make the same page.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
swift=${SWIFT:-swift}
date=$(git -C "$root" log -1 --format=%cs 2>/dev/null || date +%F)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! "$swift" package --package-path "$root" "$@" plugin generate-manual --date "$date" >"$log" 2>&1; then
    cat "$log" >&2
    echo "manual: generate-manual failed" >&2
    exit 1
fi
# "Generated manual in '<folder>'" (a file:// URL) for each executable; ours is fileproviderctl's.
folder=$(sed -n "s|^Generated manual in '\(file://\)\{0,1\}\(.*/fileproviderctl\)/\{0,1\}'\$|\2|p" "$log" | head -1)
page=${folder%/}/fileproviderctl.1
if [ -z "$folder" ] || [ ! -f "$page" ]; then
    cat "$log" >&2
    echo "manual: generate-manual did not make fileproviderctl.1" >&2
    exit 1
fi
echo "$page"
