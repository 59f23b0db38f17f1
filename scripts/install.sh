#!/usr/bin/env bash
# Installs fileproviderctl from a release build (`make install`), or removes what it installed
# (`make uninstall`). Idempotent both ways: installing again replaces every file (a running
# `serve` keeps its old binary: files are renamed into place, never written over), removing
# again finds nothing to remove.
#
#   scripts/install.sh install BIN_FOLDER [MAN_PAGE]
#       MAN_PAGE defaults to BIN_FOLDER/fileproviderctl.1, which `make release` writes there:
#       a release build's folder copied to another machine installs without the toolchain.
#   scripts/install.sh install-backends               (`make install-backends`; builds cfolder
#                                                     with $CC, default cc)
#   scripts/install.sh uninstall
#
# Environment (the Makefile passes them): PREFIX (default ~/.local), DESTDIR (staging root for
# packagers, default none), BINDIR, LIBEXECDIR, MANDIR, DATADIR (defaults under PREFIX),
# BACKENDDIR (default BINDIR), CC (install-backends: the C compiler, default cc).
#
# What goes where (each shell's and systemd's own search paths under PREFIX):
#   BINDIR/fileproviderctl                          the program (Swift runtime linked in,
#                                                   stripped: no debug information, no symbols)
#   LIBEXECDIR/fileprovider-guard                   the on-access guardian serve starts (stripped)
#   MANDIR/man1/fileproviderctl.1                   man page (generate-manual)
#   DATADIR/bash-completion/completions/fileproviderctl
#   DATADIR/zsh/site-functions/_fileproviderctl
#   DATADIR/fish/vendor_completions.d/fileproviderctl.fish
#   DATADIR/systemd/user/fileproviderctl-serve.service
# and with install-backends, the reference external backends (Docs/ExternalBackends.md), where
# fileproviderctl finds them (a folder of PATH, or $XDG_DATA_HOME/fileprovider/backends):
#   BACKENDDIR/fileprovider-backend-pyfolder        Python, standard library only
#   BACKENDDIR/fileprovider-backend-cfolder         C (built with $CC -O2, stripped)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix=${PREFIX:-$HOME/.local}
destdir=${DESTDIR:-}
bindir=${BINDIR:-$prefix/bin}
libexecdir=${LIBEXECDIR:-$prefix/libexec/fileprovider}
mandir=${MANDIR:-$prefix/share/man}
datadir=${DATADIR:-$prefix/share}
backenddir=${BACKENDDIR:-$bindir}

files=(
    "$bindir/fileproviderctl"
    "$libexecdir/fileprovider-guard"
    "$mandir/man1/fileproviderctl.1"
    "$datadir/bash-completion/completions/fileproviderctl"
    "$datadir/zsh/site-functions/_fileproviderctl"
    "$datadir/fish/vendor_completions.d/fileproviderctl.fish"
    "$datadir/systemd/user/fileproviderctl-serve.service"
    "$backenddir/fileprovider-backend-pyfolder"
    "$backenddir/fileprovider-backend-cfolder"
)

# Copies $1 to $2 with mode $3 through a temporary file renamed into place.
place() {
    local source=$1 target=$destdir$2 mode=$3
    mkdir -p "$(dirname "$target")"
    cp "$source" "$target.tmp-$$"
    chmod "$mode" "$target.tmp-$$"
    mv -f "$target.tmp-$$" "$target"
    echo "  $target"
}

case "${1:-}" in
install)
    bin=${2:?usage: install.sh install BIN_FOLDER [MAN_PAGE]}
    manual=${3:-$bin/fileproviderctl.1}
    for file in "$bin/fileproviderctl" "$bin/fileprovider-guard" "$manual"; do
        [ -f "$file" ] || { echo "install: $file is missing; run 'make install', which builds it" >&2; exit 1; }
    done
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "installing under ${destdir}${prefix}:"
    # Fully stripped: the build's 118 MB less its debug information (28 MB) and symbol table
    # (19 MB); a user's machine has no Swift backtracer to use them. To debug the installed
    # program, give gdb the build's copy: gdb -e BINDIR/fileproviderctl -s BIN_FOLDER/fileproviderctl
    for program in fileproviderctl fileprovider-guard; do
        if command -v strip >/dev/null; then
            strip -o "$work/$program" "$bin/$program"
        else
            echo "install: strip not found (binutils): $program is installed with its debug information" >&2
            cp "$bin/$program" "$work/$program"
        fi
    done
    place "$work/fileproviderctl" "$bindir/fileproviderctl" 755
    place "$work/fileprovider-guard" "$libexecdir/fileprovider-guard" 755
    place "$manual" "$mandir/man1/fileproviderctl.1" 644
    # The completion scripts come from the program itself (swift-argument-parser); at each Tab
    # they ask it for domain names and DOMAIN:/paths from the database.
    for shell in bash zsh fish; do
        "$bin/fileproviderctl" --generate-completion-script "$shell" > "$work/completion.$shell"
    done
    # bash splits DOMAIN:/path at the colon; the addition joins the words again.
    cat "$root/Packaging/completions/bash-colon-words.bash" >> "$work/completion.bash"
    place "$work/completion.bash" "$datadir/bash-completion/completions/fileproviderctl" 644
    place "$work/completion.zsh" "$datadir/zsh/site-functions/_fileproviderctl" 644
    place "$work/completion.fish" "$datadir/fish/vendor_completions.d/fileproviderctl.fish" 644
    sed "s|@BINDIR@|$bindir|g" "$root/Packaging/systemd/fileproviderctl-serve.service.in" > "$work/unit"
    place "$work/unit" "$datadir/systemd/user/fileproviderctl-serve.service" 644
    cat <<EOF
done. Next:
  systemctl --user daemon-reload && systemctl --user enable --now fileproviderctl-serve
  (make sure $bindir is on your PATH; zsh: add $datadir/zsh/site-functions to fpath)
EOF
    ;;
install-backends)
    # cfolder is built here with the C compiler, not SwiftPM: an executable SwiftPM links gets
    # the Swift runtime with -static-stdlib (8.8 MB) though the program is C; this is 40 KB.
    cc=${CC:-cc}
    command -v "$cc" >/dev/null ||
        { echo "install: no C compiler ($cc) to build fileprovider-backend-cfolder; install gcc or set CC" >&2; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$cc" -O2 -o "$work/fileprovider-backend-cfolder" "$root/Backends/c/main.c" ||
        { echo "install: $cc could not build Backends/c/main.c" >&2; exit 1; }
    if command -v strip >/dev/null; then strip "$work/fileprovider-backend-cfolder"; fi
    echo "installing the reference backends into ${destdir}${backenddir}:"
    place "$root/Backends/python/fileprovider-backend-pyfolder" "$backenddir/fileprovider-backend-pyfolder" 755
    place "$work/fileprovider-backend-cfolder" "$backenddir/fileprovider-backend-cfolder" 755
    case ":$PATH:" in
    *":$backenddir:"*) ;;
    *) [ "$backenddir" = "${XDG_DATA_HOME:-$HOME/.local/share}/fileprovider/backends" ] ||
        echo "(fileproviderctl finds them once $backenddir is on your PATH)" ;;
    esac
    echo "done: 'fileproviderctl backend list' shows pyfolder and cfolder"
    ;;
uninstall)
    echo "removing from ${destdir}${prefix}:"
    for file in "${files[@]}"; do
        if [ -e "$destdir$file" ]; then
            rm -f "$destdir$file"
            echo "  $destdir$file"
        fi
    done
    # The folders this installed into, if nothing else is in them now.
    rmdir "$destdir$libexecdir" 2>/dev/null || true
    [ "$backenddir" = "$bindir" ] || rmdir "$destdir$backenddir" 2>/dev/null || true
    ;;
*)
    echo "usage: scripts/install.sh install BIN_FOLDER MAN_PAGE | install-backends | uninstall" >&2
    exit 2
    ;;
esac
