#!/usr/bin/env bash
# The media domain of the demo: started by scripts/demo.sh with FILEPROVIDERCTL, DEMO_ROOT and
# FILEPROVIDER_HOME set. Starts media-server on loopback over a folder of generated images,
# adds a `media` domain beside the local ones, syncs, lists, materializes, makes a thumbnail,
# evicts, and stops the server.
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
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

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
