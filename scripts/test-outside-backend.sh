#!/usr/bin/env bash
# Builds and tests Tests/Fixtures/OutsideBackend: a backend in a package of its own (a store in
# one JSON file) that depends on FileProviderKit's ProviderCore and ProviderTesting by path, as
# Docs/WritingAnAdapter.md ("A backend in its own package") describes. Checks first that its
# resolved dependencies hold no server stack (Hummingbird, SwiftNIO, swift-crypto: media-server's,
# which lives in its own package), then runs its conformance tests. Works from any directory.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
fixture="$root/Tests/Fixtures/OutsideBackend"
scratch="${FPK_OUTSIDE_SCRATCH:-/tmp/fpk-outside-backend-build}"

echo "== resolved dependencies of the outside backend package (scratch: $scratch)"
# A kept scratch folder's build plan can miss a file added to the path dependency since (see
# test-linking.sh); without the plan SwiftPM makes a new one.
rm -f "$scratch/debug.yaml"
dependencies="$(swift package --package-path "$fixture" --scratch-path "$scratch" show-dependencies --format flatlist)"
printf '%s\n' "$dependencies"
forbidden="$(grep -iE '^(hummingbird|swift-nio.*|swift-crypto|swift-certificates|async-http-client)$' <<<"$dependencies" || true)"
if [[ -n "$forbidden" ]]; then
    echo "test-outside-backend: FAILED: a package that links ProviderCore and ProviderTesting resolves: $(tr '\n' ' ' <<<"$forbidden")" >&2
    exit 1
fi

echo "== building and testing the outside backend package"
swift build --package-path "$fixture" --scratch-path "$scratch" --build-tests
set +e
output="$(swift test --package-path "$fixture" --scratch-path "$scratch" --skip-build 2>&1)"
status=$?
set -e
printf '%s\n' "$output" | grep -vE '^(◇|↳)' | tail -n 40
if [[ $status -ne 0 ]]; then
    echo "test-outside-backend: FAILED: its tests exited with $status" >&2
    exit 1
fi
if ! grep -qE 'Test run with [0-9]+ tests? in [0-9]+ suites? passed' <<<"$output"; then
    echo "test-outside-backend: FAILED: no passing test run in its output" >&2
    exit 1
fi
echo "test-outside-backend: OK"
