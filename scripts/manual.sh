#!/usr/bin/env bash
# Makes fileproviderctl's man page from its commands and prints the page's path.
#
#   scripts/manual.sh [SWIFTPM_FLAGS...]
#       with swift-argument-parser's generate-manual plugin. The arguments are flags for
#       `swift package` (the Makefile passes its release build's: the plugin builds the
#       package's products in release mode first, and with the same flags that build is
#       already there).
#   scripts/manual.sh --binary BIN [--output FILE]
#       with the generate-manual tool run on an already built BIN: $GENERATE_MANUAL, else
#       generate-manual beside BIN (`swift build --product generate-manual` puts it there);
#       no package build. The page goes to FILE (default: a temporary folder's).
#
# The page is dated by the last commit, so the same sources make the same page. It is then
# made to render without warnings (`groff -ww -mandoc -z`): generate-manual writes the blank
# lines between a discussion's paragraphs as they are (`mdoc warning: Empty input line`, once
# each), here `.Pp`. generate-manual also drops every character outside ASCII (`1G = 1024³
# bytes` became `1G = 1024 bytes`): help texts are ASCII (`1024^3`), which
# Tests/CLITests/ManualPageTests checks.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
swift=${SWIFT:-swift}
date=$(git -C "$root" log -1 --format=%cs 2>/dev/null || date +%F)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Rewrites the page $1 in place as described above.
tidy() {
    perl -i -ne '
        if (/^\s*$/) { print ".Pp\n" unless $paragraph; $paragraph = 1; next }
        $paragraph = /^\.Pp\s*$/ ? 1 : 0;
        print;
    ' "$1"
}

if [ "${1:-}" = "--binary" ]; then
    binary=${2:?usage: manual.sh --binary BIN [--output FILE]}
    output=
    if [ "${3:-}" = "--output" ]; then output=${4:?usage: manual.sh --binary BIN [--output FILE]}; fi
    tool=${GENERATE_MANUAL:-$(dirname "$binary")/generate-manual}
    if [ ! -x "$tool" ]; then
        echo "manual: $tool is missing; build it with 'swift build --product generate-manual' (or set GENERATE_MANUAL)" >&2
        exit 1
    fi
    folder=$(mktemp -d)
    if ! "$tool" "$binary" --date "$date" --output-directory "$folder" >"$log" 2>&1; then
        cat "$log" >&2
        echo "manual: generate-manual failed" >&2
        exit 1
    fi
    page=$folder/fileproviderctl.1
    [ -f "$page" ] || { echo "manual: generate-manual did not make fileproviderctl.1" >&2; exit 1; }
    tidy "$page"
    if [ -n "$output" ]; then
        mv -f "$page" "$output"
        rmdir "$folder"
        page=$output
    fi
    echo "$page"
    exit 0
fi

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
tidy "$page"
echo "$page"
