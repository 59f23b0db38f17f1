#!/usr/bin/env bash
# The on-access domain of the demo: started by scripts/demo.sh with FILEPROVIDERCTL, DEMO_ROOT and
# FILEPROVIDER_HOME set. Adds a `dataless` domain (every file under its real name, fetched when
# any program reads it), shows the real sizes of files that were never downloaded, starts
# `serve`, and `cat`s one: serve fetches it on the read; then lists a folder too large to be
# written by the sync (a dataless folder: serve fills it when ls opens it) and reads a file
# inside it, all through the replica path. Through fanotify as root on Linux 6.14 or later with
# the demo home on ext4, xfs, btrfs or bcachefs; elsewhere `--on-access auto` takes FUSE, and
# where neither works it says why and stops (the placeholder-files domains above show the
# rest). At the end it converts the domain to FUSE (domain convert --on-access fuse; nothing
# to do when it is on FUSE already) and reads a file through the FUSE mount.
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?run this from scripts/demo.sh}
demo=${DEMO_ROOT:?run this from scripts/demo.sh}
library=$demo/sources/library
replica=$demo/library
mkdir -p "$library/papers"
printf 'On-access files: this text was fetched when cat read it.\n' > "$library/papers/never-downloaded.txt"
printf 'Nobody reads this one but an indexer.\n' > "$library/papers/unread.txt"
head -c 3000000 /dev/urandom > "$library/papers/dataset.bin"
head -c 64000000 /dev/urandom > "$library/papers/video.bin"
# More entries than a sync writes into the replica at once (its population budget, 250): the
# folder stays dataless until a program opens it.
mkdir -p "$library/archive"
for i in $(seq -w 1 400); do printf 'archived note %s\n' "$i" > "$library/archive/note-$i.txt"; done

step() { printf '\n==> %s\n' "$*"; }

step "fileproviderctl domain add library --mode dataless"
if ! "$fpctl" domain add library --backend local --root "$library" --replica "$replica" --mode dataless; then
    echo "(dataless mode cannot work here; the placeholder-files domains above show the rest)"
    exit 0
fi
"$fpctl" sync library
step "fileproviderctl why library:/archive"
"$fpctl" why library:/archive
step "the files are not downloaded, yet they have their names and sizes"
ls -l "$demo/home/replicas/library/papers"
du -h "$demo/home/replicas/library/papers"

"$fpctl" serve library > "$demo/serve-library.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    mountpoint -q "$replica" && break
    kill -0 "$pid" 2>/dev/null || { cat "$demo/serve-library.log"; exit 1; }
    sleep 0.1
done
step "ls -l $replica/papers   (serve mounted the files there)"
ls -l "$replica/papers"
step "cat $replica/papers/never-downloaded.txt"
cat "$replica/papers/never-downloaded.txt"
step "sha256sum of the 3 MB file, read through the replica, and of the store's copy"
sha256sum "$replica/papers/dataset.bin" "$library/papers/dataset.bin"
step "1 MiB from the middle of the 64 MB file: only the chunks the read needs are fetched"
dd if="$replica/papers/video.bin" bs=1M skip=30 count=1 status=none | sha256sum
dd if="$library/papers/video.bin" bs=1M skip=30 count=1 status=none | sha256sum
# The fetched ranges are recorded once flushed (about a second); ls shows the share on disk.
for _ in $(seq 50); do
    "$fpctl" ls library:/papers/video.bin | grep -q partial && break
    sleep 0.1
done
du -h "$demo/home/replicas/library/papers/video.bin"
step "ls $replica/archive | wc -l   (a dataless folder: serve fills it when ls opens it)"
ls "$replica/archive" | wc -l
step "cat $replica/archive/note-123.txt"
cat "$replica/archive/note-123.txt"
step "a content indexer (here cat copied as baloo_file) is refused at once: nothing is fetched"
mkdir -p "$demo/indexer" && cp /bin/cat "$demo/indexer/baloo_file"
"$demo/indexer/baloo_file" "$replica/papers/unread.txt" || true
"$fpctl" rules list
"$fpctl" why library:/papers/unread.txt
step "getfattr: any program reads a file's status (and its domain)"
getfattr -d "$replica/papers/dataset.bin" "$replica/papers/video.bin" 2>/dev/null || echo "(getfattr is in the attr package)"
step "serve's log"
grep -e "fetched on access" -e "denied to" "$demo/serve-library.log" || true
"$fpctl" ls library:/papers
kill "$pid"
wait "$pid" || true
trap - EXIT
step "serve stopped: the replica folder is empty again (never a file of zeros)"
ls -A "$replica"

# The same domain through FUSE: the files stay where they are, only the mechanism changes.
step "fileproviderctl domain convert library --on-access fuse   (serve stopped: no file moves)"
"$fpctl" domain convert library --on-access fuse
"$fpctl" serve library > "$demo/serve-library-fuse.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    grep -q " $replica fuse" /proc/self/mounts && break
    kill -0 "$pid" 2>/dev/null || { cat "$demo/serve-library-fuse.log"; exit 1; }
    sleep 0.1
done
step "cat $replica/archive/note-321.txt   (never read before; fetched through FUSE now)"
grep " $replica fuse" /proc/self/mounts | cut -d' ' -f1-3
cat "$replica/archive/note-321.txt"
kill "$pid"
wait "$pid" || true
trap - EXIT
