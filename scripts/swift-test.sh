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
"$swift" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo "==> swift test failed (exit $status); what went wrong, from $log:"
    # The crashed thread's first frames, then the failures and the crash's message last: a CI
    # log often shows only its last lines.
    awk '/\*\*\* Program crashed/ { shown = 1 } shown && count < 16 { print; count++ }' "$log"
    grep -aE "✘ Test .*(recorded an issue|failed)|Fatal error|Precondition failed|Assertion failed|signal code|\*\*\* Program crashed" "$log" | head -40
fi
exit "$status"
