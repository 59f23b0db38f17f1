#!/usr/bin/env bash
# Builds and runs Tests/Fixtures/LinkingConsumer: a separate package that links FileProviderKit's
# library products (ProviderCore, ProviderStore, ProviderEngine, LocalAdapter) by path, syncs a
# local domain and checks the store and the backend agree. Works from any directory.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
fixture="$root/Tests/Fixtures/LinkingConsumer"
scratch="${FPK_LINKING_SCRATCH:-/tmp/fpk-linking-build}"

echo "== building and running linking-consumer (scratch: $scratch)"
# SwiftPM reuses the build plan of a kept scratch folder and can miss a source file added to a
# path dependency since the last build; without the plan it makes a new one (the compiled
# objects stay, so this costs little).
rm -f "$scratch/debug.yaml"
set +e
output="$(swift run --package-path "$fixture" --scratch-path "$scratch" linking-consumer 2>&1)"
status=$?
set -e
printf '%s\n' "$output"

if [[ $status -ne 0 ]]; then
    echo "test-linking: FAILED: linking-consumer exited with $status" >&2
    exit 1
fi
expected_backend="backend: alpha.txt beta.md folder gamma.bin"
expected_store="store: alpha.txt beta.md folder folder/inner.txt gamma.bin"
for line in "$expected_backend" "$expected_store" "linking-consumer: OK"; do
    if ! grep -qxF -- "$line" <<<"$output"; then
        echo "test-linking: FAILED: missing output line: $line" >&2
        exit 1
    fi
done
echo "test-linking: OK"
