#!/usr/bin/env bash
# Runs `swift test` with the flags given, its output also kept in .build/test-output.log. When it
# fails, repeats at the end what says why — the failed expectations, a crash's message and the
# crashed thread's backtrace — which otherwise scroll by among the lines of hundreds of tests
# running at once.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
swift=${SWIFT:-swift}
log=.build/test-output.log
mkdir -p .build
# A crash prints only the crashed thread's backtrace, without registers or the image list.
export SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=yes,threads=crashed,registers=none,images=none}
# The tests' scratch folders (stores, replicas, the servers' folders) go to a folder of this run,
# removed when it ends: servers a suite keeps for the whole process and a run cut short left
# them in /tmp, about 0.5 GB a run. Mode 1777 as /tmp, for the users the tests create.
# `--one-file-system`: a FUSE mount a crashed test left is not emptied through.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fpk-tests-XXXXXX")
chmod 1777 "$scratch"
trap 'rm -rf --one-file-system "$scratch" 2>/dev/null' EXIT
export TMPDIR=$scratch
# At most 8 tests at once (FPK_TEST_WIDTH; swift-testing's default starts them all): with a
# thousand tests, their servers and the programs they run on two cores, tests bound in time
# (hostile stores, a backend program that does not answer, cancellation within 30 s) starved past
# their limits whenever the machine ran slower; at 8 the run takes as long and they pass.
"$swift" test --experimental-maximum-parallelization-width "${FPK_TEST_WIDTH:-8}" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo "==> swift test failed (exit $status); what went wrong, from $log:"
    # The crashed thread's first frames, then the failures and the crash's message last: a CI
    # log often shows only its last lines.
    awk '/\*\*\* Program crashed/ { shown = 1 } shown && count < 16 { print; count++ }' "$log"
    grep -aE "✘ Test .*(recorded an issue|failed)|Fatal error|Precondition failed|Assertion failed|signal code|\*\*\* Program crashed" "$log" | head -40
fi
exit "$status"
