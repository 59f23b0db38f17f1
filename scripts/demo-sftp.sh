#!/usr/bin/env bash
# The SFTP part of the demo (run by scripts/demo.sh): starts an OpenSSH sshd on 127.0.0.1 with
# its own host and user keys, adds an sftp domain beside the local ones, syncs, lists,
# materializes and evicts a file, then stops sshd by its pid.
#
#   FILEPROVIDERCTL   the binary to run
#   DEMO_ROOT         the demo's folder (the server's files and keys go under sftp-server/)
#   FILEPROVIDER_HOME exported by demo.sh
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?FILEPROVIDERCTL is not set}
root=${DEMO_ROOT:?DEMO_ROOT is not set}
sshd=/usr/sbin/sshd
if [ ! -x "$sshd" ] || ! command -v ssh-keygen >/dev/null; then
    echo "demo-sftp: openssh-server is not installed; skipping the SFTP domain" >&2
    exit 0
fi

server=$root/sftp-server
rm -rf "$server"
mkdir -p "$server/data/notes" "$server/data/photos"
mkdir -p /run/sshd 2>/dev/null || true

ssh-keygen -q -t ed25519 -N '' -C demo-host -f "$server/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C demo-user -f "$server/id_ed25519"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
user=$(id -un)

cat > "$server/sshd_config" <<CONFIG
ListenAddress 127.0.0.1
Port $port
HostKey $server/host_ed25519
PidFile $server/sshd.pid
AuthorizedKeysFile $server/id_ed25519.pub
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin yes
StrictModes no
UsePAM no
LogLevel ERROR
Subsystem sftp internal-sftp
CONFIG
# The server's key goes into a known_hosts file of its own, as ssh-keyscan would put it.
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$server/host_ed25519.pub")" > "$server/known_hosts"

# Files on the server.
printf 'Hello from the SFTP server.\n' > "$server/data/notes/hello.txt"
printf 'Notes synced over SFTP.\n' > "$server/data/notes/readme.md"
head -c 300000 /dev/urandom > "$server/data/photos/harbour.jpg"
head -c 200000 /dev/urandom > "$server/data/photos/lighthouse.jpg"

"$sshd" -D -e -f "$server/sshd_config" 2>>"$server/sshd.log" &
sshd_pid=$!
stop_sshd() {
    kill "$sshd_pid" 2>/dev/null || true
    wait "$sshd_pid" 2>/dev/null || true
}
trap stop_sshd EXIT

# Ready when it sends its SSH banner; bounded.
ready=no
for _ in $(seq 1 200); do
    if banner=$(timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && head -c 4 <&3" 2>/dev/null) && [ "$banner" = "SSH-" ]; then
        ready=yes
        break
    fi
    kill -0 "$sshd_pid" 2>/dev/null || break
    sleep 0.05
done
if [ "$ready" != yes ]; then
    echo "demo-sftp: sshd did not start; its log:" >&2
    cat "$server/sshd.log" >&2
    exit 1
fi

. "$(dirname "$0")/demo.lib.sh"

echo "sshd: pid $sshd_pid on 127.0.0.1:$port, serving $server/data"
run domain add remote --mode placeholder-files --backend sftp --host 127.0.0.1 --port "$port" --user "$user" \
    --identity "$server/id_ed25519" --known-hosts "$server/known_hosts" --root "$server/data"
run domain list
run sync remote
run ls remote:/ -R
run materialize remote:/notes/hello.txt
run ls remote:/notes
run evict remote:/notes/hello.txt
run ls remote:/notes

stop_sshd
trap - EXIT
echo "sshd stopped (pid $sshd_pid)"
