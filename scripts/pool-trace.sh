#!/bin/bash
# Symbolizes the stacks FILEPROVIDER_TRACE_POOL=1 prints (one per blocking call made on the
# cooperative pool) and counts the distinct ones, most frequent first. Each line names the
# operation it ran in ("-": none) and the first engine frames above the database or replica call.
#
#   FILEPROVIDER_TRACE_POOL=1 swift test --skip-build --filter PoolUseTests 2> trace.txt
#   scripts/pool-trace.sh trace.txt [.build/debug/FileProviderKitPackageTests.xctest] [frames]
#
# Needs llvm-symbolizer and swift-demangle (both come with the Swift toolchain).
set -euo pipefail
trace=${1:?usage: pool-trace.sh TRACE [BINARY] [FRAMES]}
binary=${2:-$(dirname "$0")/../.build/debug/FileProviderKitPackageTests.xctest}
frames=${3:-4}
toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
symbolizer=$toolchain/llvm-symbolizer
demangle=$toolchain/swift-demangle
name=$(basename "$binary")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One "@@ operation" line per stack, then the binary's offsets of its frames.
awk -v name="$name" '
    /^POOL-USE/ { print "@@ " (length($0) > 9 ? substr($0, 10) : "-"); next }
    index($0, name "(+0x") { match($0, /\(\+0x[0-9a-f]+\)/); print substr($0, RSTART + 2, RLENGTH - 3) }
' "$trace" >"$work/stacks"
grep -v '^@@' "$work/stacks" | sort -u >"$work/offsets" || true
[ -s "$work/offsets" ] || { echo "no POOL-USE stacks of $name in $trace" >&2; exit 1; }
"$symbolizer" --obj="$binary" --functions=linkage --no-inlines --relative-address <"$work/offsets" |
    paste - - - | cut -f1,2 >"$work/symbols"
paste "$work/offsets" \
    <(cut -f1 "$work/symbols" | "$demangle" --simplified | sed 's/(.*//') \
    <(cut -f2 "$work/symbols" | sed 's|.*/||') >"$work/map"
awk -F'\t' -v frames="$frames" '
    NR == FNR { where[$1] = $2 " @" $3; next }
    /^@@/ { if (line != "") print line; line = "[" substr($0, 4) "]"; kept = 0; next }
    {
        frame = where[$1]
        # The check itself and the call it guards are the same for every stack.
        if (frame ~ /PoolCheck|MetadataStore|@Replica\.swift|@Replica\+/ || kept >= frames) next
        line = line " <- " frame; kept++
    }
    END { if (line != "") print line }
' "$work/map" "$work/stacks" | sort | uniq -c | sort -rn
