#!/usr/bin/env bash
# A guided tour of fileproviderctl against a throwaway home.
#
# Recreates demo-home/ at the repository root on every run (it is git-ignored and left behind
# so you can look around afterwards), makes two source folders and walks through adding
# domains, syncing, listing, materializing, pinning and evicting.
#
#   FILEPROVIDERCTL  the binary to run (default: .build/release/fileproviderctl)
#   DEMO_HOME        where to put everything (default: <repo>/demo-home)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fpctl=${FILEPROVIDERCTL:-$repo/.build/release/fileproviderctl}
demo=${DEMO_HOME:-$repo/demo-home}

if [ ! -x "$fpctl" ]; then
    echo "demo: $fpctl not found; run 'make demo' or build it with 'make release'" >&2
    exit 1
fi

rm -rf "$demo"
mkdir -p "$demo/sources" "$demo/home"
export FILEPROVIDER_HOME=$demo/home
# What the program remembers (a WebDAV server's probe) stays in the throwaway home too.
export XDG_CACHE_HOME=$demo/cache
photos=$demo/sources/photos
docs=$demo/sources/docs

# photos: binary-ish files in nested folders
for path in 2023/summer/beach.jpg 2023/summer/sunset.jpg 2023/winter/snow.jpg \
            2024/spring/garden.jpg 2024/spring/birds/robin.jpg 2024/spring/birds/wren.jpg; do
    mkdir -p "$photos/$(dirname "$path")"
    head -c 200000 /dev/urandom > "$photos/$path"
done
head -c 150000 /dev/urandom > "$photos/cover.png"
# docs: a few text files
mkdir -p "$docs/notes"
printf 'FileProviderKit demo\n\nThis file is pinned: it stays materialized.\n' > "$docs/readme.txt"
printf 'milk\neggs\nbread\n' > "$docs/shopping.txt"
printf '# Ideas\n\n- sync both ways\n- keep both on conflict\n' > "$docs/notes/ideas.md"

. "$(dirname "$0")/demo.lib.sh"

echo "demo home: $FILEPROVIDER_HOME"
echo "sources:   $photos, $docs"

run domain add photos --mode placeholder-files --backend local --root "$photos"
run domain add docs --mode placeholder-files --backend local --root "$docs"
run domain list
run sync
run ls photos:/ -R
run materialize photos:/2023/summer/beach.jpg
run ls photos:/2023/summer
run pin docs:/readme.txt
run evict photos:/2023/summer/beach.jpg
run status

# Two-way sync: a second domain on the same docs folder plays a second machine. An edit made in
# one replica goes up to the store and comes down into the other.
replica_of() { "$fpctl" domain show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["replica"])'; }
run domain add docs-laptop --mode placeholder-files --backend local --root "$docs"
# Folders can stay dataless (Apple's dataless folders): the database knows their items, the
# replica shows them once the folder is populated (by 'populate', 'materialize', or 'serve'
# when a program opens the folder).
run sync docs-laptop --populate-limit 0
run ls docs-laptop:/
run populate -R docs-laptop:/
run ls docs-laptop:/
run materialize docs:/shopping.txt
step "edit docs:/shopping.txt in the first replica"
printf 'coffee\n' >> "$(replica_of docs)/shopping.txt"
run sync docs
run sync docs-laptop
run materialize docs-laptop:/shopping.txt
step "the second replica now has the edit"
cat "$(replica_of docs-laptop)/shopping.txt"

# Each adapter that needs a server adds scripts/demo-<name>.sh: it starts its server on
# loopback, adds a domain beside the ones above, shows it working, and stops the server.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for extra in "$here"/demo-*.sh; do
    [ -e "$extra" ] || continue
    step "$(basename "$extra")"
    FILEPROVIDERCTL="$fpctl" DEMO_ROOT="$demo" bash "$extra"
done

# Searching every domain at once, from the database: files never downloaded are found too.
run find -iname '*.txt'
run find -name '*.jpg' -size +100k --state dataless
# The same contents in two places under other names (nothing is downloaded to compare).
cp "$photos/cover.png" "$docs/cover copy.png"
run sync docs
run whereis photos:/cover.png
run dupes
# Downloads are hashed (SHA-256) as they are written: downloaded, the two copies share a hash.
run materialize photos:/cover.png
run materialize "docs:/cover copy.png"
run whereis photos:/cover.png
# verify hashes the downloaded files again, offline: a byte flipped on disk with the size and
# date kept (bit rot, which no sync would ever notice) is found; exit 1.
step "flip one byte of photos:/cover.png on disk, keeping its size and modification time"
python3 - "$(replica_of photos)/cover.png" <<'PY'
import os, sys
path = sys.argv[1]
info = os.stat(path)
with open(path, "r+b") as f:
    f.seek(1000)
    byte = f.read(1)
    f.seek(1000)
    f.write(bytes([byte[0] ^ 0x01]))
os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
PY
run verify photos || true
# The store's bytes again: evicted and downloaded, the file verifies.
run evict photos:/cover.png
run materialize photos:/cover.png
run verify photos
run status

step "done — everything is under $demo"
