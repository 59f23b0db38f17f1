#!/usr/bin/env bash
# The FUSE domain of the demo: started by scripts/demo.sh with FILEPROVIDERCTL and DEMO_ROOT set.
# An ordinary user (no capability at all) adds a `dataless` domain, which `--on-access auto`
# serves through FUSE (fanotify needs root), syncs it, starts `serve`, and reads a file never
# downloaded with `cat` through the replica path (and `getfattr` shows a folder's status); then
# stops `serve`, and the replica folder is empty again.
#
# Run as root (as `make demo` is in CI), it makes that user, `fpk-demo` (useradd, marked with
# the comment "fileproviderctl demo"; a user left by an interrupted run is reused), makes
# /dev/fuse mode 0666 as distributions ship it, and undoes both at the end. Run as an ordinary
# user, it runs as that user. Needs libfuse 3 and fusermount3 (Debian: fuse3); elsewhere it
# says why and stops.
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?run this from scripts/demo.sh}
demo=${DEMO_ROOT:?run this from scripts/demo.sh}
. "$(dirname "$0")/demo.lib.sh"

user=fpk-demo
comment="fileproviderctl demo"
top=$demo/fuse-user
store=$top/store
replica=$top/notes
rm -rf "$top"
mkdir -p "$store/papers"
printf 'Read through FUSE by an ordinary user: fetched when cat read it.\n' > "$store/papers/hello.txt"
head -c 3000000 /dev/urandom > "$store/papers/dataset.bin"

fuse_mode=''
made_user=''
pid=''
# From the mount table: without allow_other, only the user who mounted may even stat the mount.
mounted() { grep -q " $replica fuse" /proc/self/mounts; }
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    if mounted; then fusermount3 -u -z "$replica" 2>/dev/null || umount -l "$replica" 2>/dev/null || true; fi
    if [ -n "$fuse_mode" ]; then chmod "$fuse_mode" /dev/fuse || true; fi
    if [ -n "$made_user" ]; then
        # fusermount3's auto_unmount helper runs as the user until the mount is gone.
        for _ in $(seq 50); do pgrep -u "$user" > /dev/null || break; sleep 0.1; done
        userdel "$user" 2>/dev/null || echo "(could not remove the user $user: userdel $user)"
    fi
}
trap cleanup EXIT

if [ "$(id -u)" -eq 0 ]; then
    if ! getent passwd "$user" > /dev/null; then
        useradd --system --no-create-home --shell /usr/sbin/nologin --comment "$comment" "$user"
    fi
    # Ours (made now, or by an interrupted run): removed at the end.
    if [ "$(getent passwd "$user" | cut -d: -f5)" = "$comment" ]; then made_user=1; fi
    uid=$(id -u "$user")
    gid=$(id -g "$user")
    if [ -e /dev/fuse ]; then
        fuse_mode=$(stat -c %a /dev/fuse)
        chmod 0666 /dev/fuse
    fi
    chown -R "$uid:$gid" "$top"
    runas=(setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all --
        env HOME="$top" FILEPROVIDER_HOME="$top/home" XDG_CACHE_HOME="$top/cache")
else
    user=$(id -un)
    runas=(env FILEPROVIDER_HOME="$top/home" XDG_CACHE_HOME="$top/cache")
fi
as_user() { "${runas[@]}" "$@"; }
if ! as_user test -x "$fpctl"; then
    echo "($user cannot run $fpctl: put the demo where other users can reach it)"
    exit 0
fi

step "as $user (uid $(as_user id -u), no capabilities): fileproviderctl domain add notes --mode dataless"
if ! as_user "$fpctl" domain add notes --backend local --root "$store" --replica "$replica" --mode dataless; then
    echo "(FUSE cannot work here: see the reason above; the other domains show the rest)"
    exit 0
fi
as_user "$fpctl" sync notes
# A simple command in the background: $! is serve itself (setpriv and env exec it).
"${runas[@]}" "$fpctl" serve notes > "$top/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    mounted && break
    kill -0 "$pid" 2>/dev/null || { cat "$top/serve.log"; exit 1; }
    sleep 0.1
done
step "serve (as $user) mounted the files through fusermount3"
grep " $replica fuse" /proc/self/mounts | cut -d' ' -f1-3
as_user ls -l "$replica/papers"
step "getfattr on a folder: its status through the mount (worked out from the database)"
as_user getfattr -d "$replica/papers" 2>/dev/null || echo "(getfattr is in the attr package)"
step "cat $replica/papers/hello.txt   (as $user)"
as_user cat "$replica/papers/hello.txt"
step "sha256sum of the 3 MB file, read through the mount, and of the store's copy"
as_user sha256sum "$replica/papers/dataset.bin" "$store/papers/dataset.bin"
as_user "$fpctl" ls notes:/papers
kill "$pid"
wait "$pid" || true
pid=''
for _ in $(seq 100); do mounted || break; sleep 0.1; done
step "serve stopped: the replica folder is empty again"
as_user ls -A "$replica"
