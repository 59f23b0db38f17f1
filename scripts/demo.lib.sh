# Sourced by the demo scripts: how each shows a step and runs fileproviderctl ($fpctl).

bold='' plain=''
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; fi

# Prints a step's title.
step() {
    printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"
}

# Shows and runs one fileproviderctl command.
run() {
    step "fileproviderctl $*"
    "$fpctl" "$@"
}
