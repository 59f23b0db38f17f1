#!/usr/bin/env bash
# The WebDAV part of the demo (run by scripts/demo.sh): starts Apache with mod_dav on 127.0.0.1
# with a configuration of its own and a free port, adds a webdav domain beside the others,
# syncs, lists, materializes, uploads a file made in the replica and evicts, then stops Apache
# (its whole process group) by its pid.
#
#   FILEPROVIDERCTL   the binary to run
#   DEMO_ROOT         the demo's folder (the server's files and configuration go under webdav-server/)
#   FILEPROVIDER_HOME exported by demo.sh
#   APACHE2           the Apache binary (default: /usr/sbin/apache2, apt apache2)
set -euo pipefail

fpctl=${FILEPROVIDERCTL:?FILEPROVIDERCTL is not set}
root=${DEMO_ROOT:?DEMO_ROOT is not set}
apache=${APACHE2:-/usr/sbin/apache2}
modules=/usr/lib/apache2/modules
if [ ! -x "$apache" ] || [ ! -e "$modules/mod_dav_fs.so" ]; then
    echo "demo-webdav: apache2 with mod_dav is not installed; skipping the WebDAV domain" >&2
    exit 0
fi

server=$root/webdav-server
rm -rf "$server"
mkdir -p "$server/dav/reports" "$server/dav/pictures" "$server/lock"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

# Files on the server.
printf 'Quarterly report, served by Apache mod_dav.\n' > "$server/dav/reports/q3.txt"
printf 'Budget: 42\n' > "$server/dav/reports/budget.csv"
head -c 250000 /dev/urandom > "$server/dav/pictures/meadow.jpg"

run_as=''
if [ "$(id -u)" = 0 ] && id www-data >/dev/null 2>&1; then
    # Apache started as root serves as www-data: the served folder is that user's.
    run_as=$'User www-data\nGroup www-data'
    chown -R www-data:www-data "$server"
fi
cat > "$server/httpd.conf" <<CONFIG
ServerRoot "$server"
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile "$server/apache.pid"
ErrorLog "$server/error.log"
LogLevel warn
Mutex file:$server/lock
DefaultRuntimeDir "$server/lock"
LoadModule mpm_event_module $modules/mod_mpm_event.so
LoadModule authz_core_module $modules/mod_authz_core.so
LoadModule mime_module $modules/mod_mime.so
LoadModule alias_module $modules/mod_alias.so
TypesConfig /etc/mime.types
LoadModule dav_module $modules/mod_dav.so
LoadModule dav_fs_module $modules/mod_dav_fs.so
StartServers 1
ServerLimit 1
ThreadsPerChild 8
MaxRequestWorkers 8
DAVLockDB "$server/lock/davlock"
Alias /dav "$server/dav"
<Directory "$server/dav">
    Dav On
    AllowOverride None
    Options None
    Require all granted
</Directory>
$run_as
CONFIG

# In a process group of its own (setsid), so that stopping it reaches its workers.
setsid "$apache" -f "$server/httpd.conf" -DFOREGROUND 2>>"$server/stderr.log" &
apache_pid=$!
stop_apache() {
    kill -KILL -- "-$apache_pid" 2>/dev/null || true
    wait "$apache_pid" 2>/dev/null || true
}
trap stop_apache EXIT

# Ready when it answers OPTIONS; bounded.
ready=no
for _ in $(seq 1 200); do
    if curl -fsS -X OPTIONS "http://127.0.0.1:$port/dav/" >/dev/null 2>&1; then
        ready=yes
        break
    fi
    kill -0 "$apache_pid" 2>/dev/null || break
    sleep 0.05
done
if [ "$ready" != yes ]; then
    echo "demo-webdav: Apache did not start; its logs:" >&2
    cat "$server/stderr.log" "$server/error.log" >&2 2>/dev/null || true
    exit 1
fi

. "$(dirname "$0")/demo.lib.sh"

echo "Apache mod_dav: pid $apache_pid on 127.0.0.1:$port, serving $server/dav at /dav"
run domain add web --mode placeholder-files --backend webdav --url "http://127.0.0.1:$port/dav"
run domain list
run sync web
run ls web:/ -R
run materialize web:/reports/q3.txt
replica=$("$fpctl" domain show web --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["replica"])')
cat "$replica/reports/q3.txt"
printf '\n%s==> a file made in the replica goes up with PUT%s\n' "$bold" "$plain"
printf 'Minutes of the meeting.\n' > "$replica/reports/minutes.txt"
run sync web
echo "on the server: $(cat "$server/dav/reports/minutes.txt")"
run evict web:/reports/q3.txt
run ls web:/reports

stop_apache
trap - EXIT
echo "Apache stopped (pid $apache_pid)"
