#!/usr/bin/env bash
# Builds the DocC catalogs of the libraries an adapter author reads (ProviderCore, AdapterKit)
# with swift-docc-plugin, warnings as errors: a symbol link (``Name``) in a catalog page or a
# doc comment that no longer resolves fails `make test`. Works from any directory.
#
#   scripts/test-docc.sh [SWIFTPM_FLAGS...]
#
# The plugin builds the two targets' symbol graphs (the debug build `make test` made is reused)
# and writes the archives under the scratch path's plugins/Swift-DocC/outputs/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
swift=${SWIFT:-swift}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

targets=(ProviderCore AdapterKit)
args=()
for target in "${targets[@]}"; do args+=(--target "$target"); done

echo "== building the DocC catalogs of ${targets[*]}"
set +e
"$swift" package --package-path "$root" "$@" generate-documentation "${args[@]}" \
    --warnings-as-errors --disable-indexing >"$log" 2>&1
status=$?
set -e
if [[ $status -ne 0 ]]; then
    cat "$log" >&2
    echo "test-docc: FAILED: swift package generate-documentation exited with $status" >&2
    exit 1
fi
for target in "${targets[@]}"; do
    # The plugin prints where it put each archive (under the scratch path in use).
    archive=$(grep -o "/.*/$target\.doccarchive\$" "$log" | tail -1)
    if [[ ! -f "$archive/data/documentation/$(tr '[:upper:]' '[:lower:]' <<<"$target").json" ]]; then
        cat "$log" >&2
        echo "test-docc: FAILED: no landing page in $archive" >&2
        exit 1
    fi
done
echo "test-docc: OK"
