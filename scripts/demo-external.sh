#!/usr/bin/env bash
# The external-backend part of the demo (run by scripts/demo.sh): a backend that is a program,
# not compiled into fileproviderctl. The reference Python backend (Backends/python,
# fileprovider-backend-pyfolder: a local folder behind the line protocol of
# Docs/ExternalBackends.md) is put on PATH; it is listed, tested with `backend test`, and used
# for a domain like a built-in one.
#
#   FILEPROVIDERCTL   the binary to run
#   DEMO_ROOT         the demo's folder (the store goes under external-store/)
#   FILEPROVIDER_HOME exported by demo.sh
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?FILEPROVIDERCTL is not set}
root=${DEMO_ROOT:?DEMO_ROOT is not set}
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$here/../Backends/python:$PATH"

store=$root/external-store
rm -rf "$store" "$root/external-test"
mkdir -p "$store/letters" "$root/external-test"
printf 'Dear reader,\nthis file lives behind a Python program.\n' > "$store/letters/hello.txt"
printf 'a,b\n1,2\n' > "$store/table.csv"

. "$here/demo.lib.sh"

run backend list
run backend test pyfolder --option root="$root/external-test"
run domain add py --mode placeholder-files --backend pyfolder --root "$store"
run sync py
run ls py:/ -R
run materialize py:/letters/hello.txt
step "edit py:/table.csv in the replica; the next sync sends it through the program"
run materialize py:/table.csv
replica=$("$fpctl" domain show py --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["replica"])')
printf 'a,b\n1,2\n3,4\n' > "$replica/table.csv"
run sync py
step "the store now holds the edit"
cat "$store/table.csv"
