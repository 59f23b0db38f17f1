#!/usr/bin/env bash
# Installs the Debian packages FileProviderKit needs to build, test, demo and benchmark.
# Idempotent: checks each package with dpkg-query and touches apt only when one is missing.
# Quiet on success.
set -euo pipefail

PACKAGES=(
    libsqlite3-dev       # ProviderStore (GRDB links the system SQLite)
    libssh2-1-dev        # Adapters/SFTP via CLibSSH2
    libcurl4-openssl-dev # Adapters/MediaAPI via CCurl
    libgd-dev            # Thumbnails via CGD (media-server, engine thumbnails)
    pkg-config           # system library targets
    openssh-server       # loopback sshd for the SFTP adapter tests
    rclone               # benchmark peer
    hyperfine            # ad-hoc benchmarking
    python3              # Benchmarks/bench.py
    jq                   # JSON output in scripts
    sqlite3              # CLI tests: another process holding the database's write lock
)

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
