#!/usr/bin/env bash
# The media domain of the demo: started by scripts/demo.sh with FILEPROVIDERCTL, DEMO_ROOT and
# FILEPROVIDER_HOME set. Starts media-server on loopback over a folder of generated images,
# adds a `media` domain beside the local ones, syncs, lists, materializes, makes a thumbnail,
# evicts; then a dataless domain on the same server served through FUSE, where `serve` puts a
# file manager's thumbnail of an image never downloaded as soon as `ls` opens its folder (from
# the store's thumbnail: nothing is downloaded); and stops the server.
#
#   MEDIA_SERVER  the server binary (default: the release build of its own package,
#                 Servers/media-server/.build/release/media-server, which 'make release' makes)
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?run this from scripts/demo.sh}
demo=${DEMO_ROOT:?run this from scripts/demo.sh}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
server=${MEDIA_SERVER:-$repo/Servers/media-server/.build/release/media-server}
if [ ! -x "$server" ]; then
    echo "demo-media: $server not found; build it with 'make release'" >&2
    exit 1
fi

media=$demo/sources/media
mkdir -p "$media/albums/2024"
"$server" --root "$media" --write-samples 2 >/dev/null
"$server" --root "$media/albums/2024" --write-samples 3 >/dev/null
printf 'the media API lists images and folders only\n' > "$media/notes.txt"

# A free port on loopback, picked now.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
"$server" --root "$media" --port "$port" > "$demo/media-server.log" 2>&1 &
pid=$!
serve_pid=''
cleanup() {
    if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
trap cleanup EXIT

# Ready when GET / answers (at most 10 s).
for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "demo-media: media-server exited; see $demo/media-server.log" >&2; exit 1; fi
    sleep 0.1
done

. "$(dirname "$0")/demo.lib.sh"

echo "media-server (pid $pid) serves $media on http://127.0.0.1:$port"
run domain add media --mode placeholder-files --backend media --url "http://127.0.0.1:$port"
run domain list
run sync media
run ls media:/ -R
run materialize media:/sample-01.png
run thumbnail media:/albums/2024/sample-02.jpg --size 120 -o "$demo/sample-02-thumbnail.jpg"
file "$demo/sample-02-thumbnail.jpg" 2>/dev/null || true
run evict media:/sample-01.png
run ls media:/

# Thumbnails without downloads: a dataless domain on the same store, through FUSE (any user).
previews=$demo/media-previews
cache=$demo/cache
if ! "$fpctl" domain add previews --backend media --url "http://127.0.0.1:$port" --mode dataless --on-access fuse \
    --replica "$previews" > "$demo/previews-add.log" 2>&1; then
    echo "(FUSE cannot work here, so no thumbnails made by serve:)"
    cat "$demo/previews-add.log"
    exit 0
fi
run sync previews
XDG_CACHE_HOME=$cache "$fpctl" serve previews > "$demo/previews-serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
    grep -q " $previews fuse" /proc/self/mounts && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$demo/previews-serve.log"; exit 1; }
    sleep 0.1
done
step "ls $previews/albums/2024   (a file manager opening the folder does the same)"
ls -l "$previews/albums/2024"
uri="file://$previews/albums/2024/sample-02.jpg"
thumb=$cache/thumbnails/normal/$(printf %s "$uri" | md5sum | cut -d' ' -f1).png
for _ in $(seq 100); do [ -s "$thumb" ] && break; sleep 0.1; done
step "serve put the freedesktop thumbnail where Nautilus, Dolphin and Thunar look"
file "$thumb" 2>/dev/null || ls -l "$thumb"
python3 - "$thumb" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
offset = 8
while offset + 12 <= len(data):
    length, kind = struct.unpack(">I4s", data[offset:offset + 8])
    if kind == b"tEXt":
        key, _, value = data[offset + 8:offset + 8 + length].partition(b"\0")
        if key.startswith(b"Thumb::"):
            print(f"{key.decode()}: {value.decode()}")
    offset += 12 + length
PY
grep -o 'previews: made .*' "$demo/previews-serve.log" || true
step "nothing was downloaded for it: the image is still dataless"
"$fpctl" ls previews:/albums/2024
kill "$serve_pid"
wait "$serve_pid" || true
serve_pid=''
