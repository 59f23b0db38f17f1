#!/usr/bin/env bash
# Where the size of the release fileproviderctl goes: links it again (a few seconds; the objects
# of the last `make release` are reused) with a linker map beside it, then sums the map by
# module and library with scripts/binary-size.py. Docs/Install.md#size has the numbers.
#
#   scripts/binary-size.sh [--top N]
#
# Needs a release build (`make release`) whose build plan is .build/release.yaml.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
plan=$root/.build/release.yaml
[ -f "$plan" ] || { echo "binary-size: $plan is missing; run 'make release' first" >&2; exit 1; }
work=$(mktemp -d /tmp/fpk-size-XXXXXX)
trap 'rm -rf "$work"' EXIT
# The link command of fileproviderctl in the build plan, with the output moved and a map added.
python3 - "$plan" "$work" >"$work/link.sh" <<'PY'
import json, re, shlex, sys
plan, work = sys.argv[1], sys.argv[2]
for match in re.finditer(r"args: \[(.*?)\]\n", open(plan).read()):
    args = json.loads("[" + match.group(1) + "]")
    if "-o" in args and args[args.index("-o") + 1].endswith("/release/fileproviderctl"):
        args[args.index("-o") + 1] = f"{work}/fileproviderctl"
        print(shlex.join(args + ["-Xlinker", f"-Map={work}/fileproviderctl.map"]))
        break
else:
    sys.exit(f"binary-size: no link command of fileproviderctl in {plan}")
PY
(cd "$root" && bash "$work/link.sh" >"$work/link.log" 2>&1) || { cat "$work/link.log" >&2; exit 1; }
echo "fileproviderctl: $(stat -c %s "$work/fileproviderctl") bytes; stripped: $(strip -o "$work/stripped" "$work/fileproviderctl" && stat -c %s "$work/stripped") bytes"
python3 "$root/scripts/binary-size.py" "$work/fileproviderctl.map" "$@"
