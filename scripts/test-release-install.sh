#!/usr/bin/env bash
# `make install` into a temporary prefix, then the installed program used as a user would,
# without the Swift toolchain: its size under the bound Docs/Install.md states, fully stripped,
# and the libraries it needs (`readelf -d`) only those Install.md's table names; run with a bare environment (the toolchain off PATH and no
# LD_LIBRARY_PATH) and checked for library paths into the toolchain; its man page read with
# `man -l`; its bash and zsh (and, where installed, fish) completions asked for domain names and
# DOMAIN:/paths; the systemd user unit verified; `make install-backends` puts the reference
# external backends where the program finds them (PREFIX/bin, or BACKENDDIR) and a domain of each
# syncs; a second install changes nothing; uninstall removes it all. Reuses the release build of test-release-build.sh (same flags as
# `make install`). Works from any directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work=$(mktemp -d /tmp/fpk-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "test-release-install: FAILED: $*" >&2; exit 1; }
# `program | grep -q` fails under pipefail when grep exits at the first match and the program,
# still writing, dies of SIGPIPE (CI saw it with --help): the whole output is read first.
has() { # has PATTERN COMMAND...: the command succeeds and a line of its output matches PATTERN
    local pattern=$1 out; shift
    out=$("$@") || return
    grep -q -- "$pattern" <<<"$out"
}

echo "== make install PREFIX=$prefix"
make -s -C "$root" install PREFIX="$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "make install"; }
for file in bin/fileproviderctl libexec/fileprovider/fileprovider-guard share/man/man1/fileproviderctl.1 \
    share/bash-completion/completions/fileproviderctl share/zsh/site-functions/_fileproviderctl \
    share/fish/vendor_completions.d/fileproviderctl.fish share/systemd/user/fileproviderctl-serve.service; do
    [ -s "$prefix/$file" ] || fail "$file was not installed"
done
fpctl=$prefix/bin/fileproviderctl

echo "== no path into the toolchain"
toolchain=$(cd "$(dirname "$(command -v swift)")/.." && pwd -P)
if readelf -d "$fpctl" | grep -E 'RPATH|RUNPATH' | grep -F "$toolchain"; then fail "the binary's RUNPATH points into $toolchain"; fi
if readelf -d "$fpctl" | grep -E 'NEEDED.*lib(swift|Foundation|dispatch|BlocksRuntime)'; then
    fail "the binary needs the Swift runtime's shared libraries"
fi
# ldd with the same bare environment the program runs in below.
if env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= ldd "$fpctl" | grep -E "not found|$toolchain"; then
    fail "ldd finds a missing library or one in the toolchain"
fi

echo "== its size and the libraries it needs (Docs/Install.md)"
guard=$prefix/libexec/fileprovider/fileprovider-guard
max_mb=75
bytes=$(stat -c %s "$fpctl")
(( bytes <= max_mb * 1000000 )) ||
    fail "the installed program is $((bytes / 1000000)) MB, over the $max_mb MB Docs/Install.md states"
# Both programs installed fully stripped: no debug information, no symbol table (scripts/install.sh).
for program in "$fpctl" "$guard"; do
    if readelf -S -W "$program" | grep -oE '\.(debug_[a-z_]+|symtab)' | sort -u | grep .; then
        fail "$program keeps debug information or its symbol table"
    fi
done
# Every library they need must be one of the sonames in Install.md's table of libraries.
documented=$(sed -n '/^| Library | soname/,/^$/p' "$root/Docs/Install.md" | grep -oE '`[^`]+\.so(\.[0-9]+)*`' | tr -d '`' | sort -u)
[ -n "$documented" ] || fail "Docs/Install.md has no table of libraries (| Library | soname | ...)"
for program in "$fpctl" "$guard"; do
    needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | sort -u)
    [ -n "$needed" ] || fail "readelf -d lists no NEEDED library for $program"
    undocumented=$(comm -23 <(echo "$needed") <(echo "$documented"))
    [ -z "$undocumented" ] ||
        fail "$program needs libraries Docs/Install.md does not list: $(echo $undocumented)"
done

echo "== the installed program, toolchain hidden"
# A bare environment: no toolchain on PATH, no LD_LIBRARY_PATH, a home of its own.
bare() { env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= HOME="$work/user" LANG=C.UTF-8 "$@"; }
mkdir -p "$work/user" "$work/store/photos-2024" "$work/store/docs"
echo hello >"$work/store/readme.txt"
echo beach >"$work/store/photos-2024/beach.jpg"
has "fileproviderctl" bare "$fpctl" --help || fail "--help"
bare "$fpctl" domain add family --mode placeholder-files --backend local --root "$work/store" --home "$work/home" >/dev/null || fail "domain add"
bare "$fpctl" sync --home "$work/home" >/dev/null || fail "sync"
has "readme.txt" bare "$fpctl" ls family:/ --home "$work/home" || fail "ls does not list readme.txt"
bare "$fpctl" materialize family:/readme.txt --home "$work/home" >/dev/null || fail "materialize"
[ "$(cat "$work/home/domains/family/readme.txt")" = hello ] || fail "the materialized file's contents"

echo "== make install-backends"
make -s -C "$root" install-backends PREFIX="$prefix" >"$work/backends.log" 2>&1 || { cat "$work/backends.log"; fail "make install-backends"; }
for kind in pyfolder cfolder; do
    [ -x "$prefix/bin/fileprovider-backend-$kind" ] || fail "fileprovider-backend-$kind was not installed"
done
# cfolder is C built with cc: no Swift runtime in it (it was 8.8 MB through SwiftPM), only glibc.
cfolder=$prefix/bin/fileprovider-backend-cfolder
(( $(stat -c %s "$cfolder") <= 1000000 )) || fail "fileprovider-backend-cfolder is $(stat -c %s "$cfolder") bytes, over 1 MB"
if readelf -d "$cfolder" | grep NEEDED | grep -v -E '\[(libc\.so\.6|ld-linux-x86-64\.so\.2)\]'; then
    fail "fileprovider-backend-cfolder needs more than glibc"
fi
# Found on PATH, without the toolchain: listed as external, and a domain of each syncs.
with_backends() { env -i PATH="$prefix/bin:/usr/bin:/bin" LD_LIBRARY_PATH= HOME="$work/user" LANG=C.UTF-8 "$@"; }
listed=$(with_backends "$fpctl" backend list) || fail "backend list"
for kind in pyfolder cfolder; do
    grep -q "^$kind  external  $prefix/bin/fileprovider-backend-$kind" <<<"$listed" || fail "backend list does not show $kind: $listed"
    with_backends "$fpctl" domain add "by-$kind" --mode placeholder-files --backend "$kind" --root "$work/store" --home "$work/backends-home" >/dev/null ||
        fail "domain add with --backend $kind"
    with_backends "$fpctl" sync "by-$kind" --home "$work/backends-home" >/dev/null || fail "sync of a $kind domain"
    has "readme.txt" with_backends "$fpctl" ls "by-$kind:/" --home "$work/backends-home" || fail "ls of a $kind domain"
done
# Into the backends folder of the user's data (searched without PATH), then removed from it.
xdg_backends=$work/user/.local/share/fileprovider/backends
make -s -C "$root" install-backends PREFIX="$prefix" BACKENDDIR="$xdg_backends" >/dev/null || fail "make install-backends BACKENDDIR=…"
has "^cfolder  external  $xdg_backends/fileprovider-backend-cfolder" bare "$fpctl" backend list ||
    fail "backend list does not find cfolder in $xdg_backends"
make -s -C "$root" uninstall PREFIX="$prefix" BACKENDDIR="$xdg_backends" >/dev/null || fail "make uninstall BACKENDDIR=…"
[ ! -e "$xdg_backends" ] || fail "uninstall left $xdg_backends"
# That uninstall removed the rest too: install it again.
make -s -C "$root" install PREFIX="$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "make install after uninstall"; }
make -s -C "$root" install-backends PREFIX="$prefix" >"$work/backends.log" 2>&1 || { cat "$work/backends.log"; fail "make install-backends"; }

echo "== man -l"
command -v man >/dev/null || fail "man is not installed (scripts/install-deps.sh installs man-db)"
page=$(MANWIDTH=100 MANPAGER=cat man -l "$prefix/share/man/man1/fileproviderctl.1" 2>"$work/man.err") || { cat "$work/man.err"; fail "man -l"; }
for heading in NAME SYNOPSIS DESCRIPTION; do
    grep -q "^$heading" <<<"$page" || fail "the man page has no $heading section"
done
grep -q "fileproviderctl sync" <<<"$page" || fail "the man page does not describe 'sync'"
grep -q -- "--progress" <<<"$page" || fail "the man page does not describe --progress"

echo "== completions"
# bash: the installed script, asked as readline would at a Tab.
complete_bash() { # complete_bash WORDS... (the last is the word being completed)
    local line="$*"
    HOME="$work/user" bash --norc --noprofile -c '
        source "$1"; shift
        COMP_LINE=$1; COMP_POINT=${#1}
        # Split as readline does: at blanks, and at the word-break characters (among them :).
        read -r -a COMP_WORDS <<<"$(sed -e "s/:/ : /g" <<<"$1")"
        [[ $1 == *" " ]] && COMP_WORDS+=("")
        COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
        # As bash calls the function the script registers (complete -p names it): the
        # command, the word being completed, the word before it.
        function=$(complete -p fileproviderctl | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
        "$function" fileproviderctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}"
    ' bash "$prefix/share/bash-completion/completions/fileproviderctl" "$line"
}
export FILEPROVIDER_HOME=$work/home
out=$(PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl sync ") || fail "bash completion ran with an error"
grep -qx family <<<"$out" || fail "bash: 'sync <Tab>' does not offer the domain family: $out"
out=$(PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl ls fam")
grep -qx "family:/" <<<"$out" || fail "bash: 'ls fam<Tab>' does not offer family:/: $out"
# After the colon bash completes the part after it (it splits words at ':'); `ls` takes one
# path, which must still count as one word.
out=$(PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl ls family:/pho")
[ "$out" = "/photos-2024/" ] || fail "bash: 'ls family:/pho<Tab>' does not offer the folder: $out"
out=$(PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl materialize family:/readme.txt family:/photos-2024/")
[ "$out" = "/photos-2024/beach.jpg" ] || fail "bash: the folder's item is not offered: $out"
out=$(PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl why family:")
grep -qx "/readme.txt" <<<"$out" || fail "bash: 'why family:<Tab>' does not offer the root's items: $out"
# --home on the command line wins over FILEPROVIDER_HOME.
out=$(FILEPROVIDER_HOME=$work/nowhere PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl status --home $work/home ")
grep -qx family <<<"$out" || fail "bash: the domain of the --home given is not offered: $out"
out=$(PATH="$prefix/bin:$PATH" complete_bash "fileproviderctl domain add x --backend ")
grep -qx sftp <<<"$out" || fail "bash: --backend <Tab> does not offer sftp: $out"
# What the scripts of every shell call: the program itself, answering from the database.
out=$("$fpctl" ---completion sync -- positional@0 2 0 fileproviderctl sync "")
grep -qx family <<<"$out" || fail "---completion sync does not answer family: $out"
out=$(SAP_SHELL=zsh "$fpctl" ---completion ls -- positional@0 2 9 fileproviderctl ls "family:/r")
grep -qx 'family\\:/readme.txt' <<<"$out" || fail "zsh: the colon is not escaped: $out"
zsh_script=$prefix/share/zsh/site-functions/_fileproviderctl
complete_zsh() { # complete_zsh LINE: what zsh lists for LINE (Tests/Fixtures/ScriptTests/zsh_complete.py)
    FILEPROVIDER_HOME=$work/home HOME="$work/user" PATH="$prefix/bin:$PATH" \
        python3 "$root/Tests/Fixtures/ScriptTests/zsh_complete.py" "$zsh_script" "$1"
}
out=$(complete_zsh "fileproviderctl sync ") || fail "zsh completion ran with an error: $out"
grep -qx family <<<"$out" || fail "zsh: 'sync <Tab>' does not offer family: $out"
out=$(complete_zsh "fileproviderctl ls family:/r")
grep -qx "family:/readme.txt" <<<"$out" || fail "zsh: 'ls family:/r<Tab>' does not offer family:/readme.txt: $out"
out=$(complete_zsh "fileproviderctl domain add x --backend ")
grep -qx sftp <<<"$out" || fail "zsh: --backend <Tab> does not offer sftp: $out"
if command -v fish >/dev/null; then
    fish_script=$prefix/share/fish/vendor_completions.d/fileproviderctl.fish
    out=$(FILEPROVIDER_HOME=$work/home HOME="$work/user" PATH="$prefix/bin:$PATH" \
        python3 "$root/Tests/Fixtures/ScriptTests/fish_complete.py" "$fish_script" "fileproviderctl sync ")
    grep -q "^family" <<<"$out" || fail "fish: 'sync <Tab>' does not offer family: $out"
    out=$(FILEPROVIDER_HOME=$work/home HOME="$work/user" PATH="$prefix/bin:$PATH" \
        python3 "$root/Tests/Fixtures/ScriptTests/fish_complete.py" "$fish_script" "fileproviderctl why fam")
    grep -q "^family:/" <<<"$out" || fail "fish: 'why fam<Tab>' does not offer family:/: $out"
else
    echo "   (fish not installed: its script checked through ---completion only)"
fi
unset FILEPROVIDER_HOME

echo "== the systemd user unit"
unit=$prefix/share/systemd/user/fileproviderctl-serve.service
grep -qx "ExecStart=$prefix/bin/fileproviderctl serve" "$unit" || fail "the unit's ExecStart is not the installed program"
grep -qx "Type=notify" "$unit" || fail "the unit is not Type=notify"
# The guardian must outlive serve in the system unit (it holds the on-access group).
grep -qx "KillMode=process" "$root/Packaging/systemd/fileproviderctl-serve-system.service.in" ||
    fail "the system unit would kill fileprovider-guard with serve"
# A replica mount left by serve and its guardian killed together is detached after any stop.
grep -qx "ExecStopPost=-@BINDIR@/fileproviderctl domain check-mounts" "$root/Packaging/systemd/fileproviderctl-serve-system.service.in" ||
    fail "the system unit does not check the replica mounts after serve stops"
if command -v systemd-analyze >/dev/null; then
    # --user needs a user manager; a unit file is checked the same without one.
    if ! systemd-analyze verify --man=no "$unit" >"$work/verify.log" 2>&1; then
        cat "$work/verify.log"
        fail "systemd-analyze verify"
    fi
    # The system unit for dataless domains (documented in Docs/Install.md, not installed).
    mkdir -p "$work/system"
    sed "s|@BINDIR@|$prefix/bin|" "$root/Packaging/systemd/fileproviderctl-serve-system.service.in" \
        >"$work/system/fileproviderctl-serve.service"
    if ! systemd-analyze verify --man=no "$work/system/fileproviderctl-serve.service" >"$work/verify.log" 2>&1; then
        cat "$work/verify.log"
        fail "systemd-analyze verify of the system unit"
    fi
else
    echo "   (systemd-analyze not installed: fields checked only)"
fi

echo "== install again (idempotent), then uninstall"
before=$(cd "$prefix" && find . -type f -exec sha256sum {} + | sort)
make -s -C "$root" install PREFIX="$prefix" >"$work/install2.log" 2>&1 || { cat "$work/install2.log"; fail "a second make install"; }
make -s -C "$root" install-backends PREFIX="$prefix" >"$work/install2.log" 2>&1 || { cat "$work/install2.log"; fail "a second make install-backends"; }
after=$(cd "$prefix" && find . -type f -exec sha256sum {} + | sort)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") || true; fail "a second install changed files"; }
make -s -C "$root" uninstall PREFIX="$prefix" >/dev/null || fail "make uninstall"
left=$(find "$prefix" -type f)
[ -z "$left" ] || fail "uninstall left files: $left"
make -s -C "$root" uninstall PREFIX="$prefix" >/dev/null || fail "a second make uninstall"
echo "test-release-install: OK"
