# Shared set-up for ./demo.sh and ./test.sh: installs what a fresh Debian 12 machine lacks.
# Sourced, not run.

# Makes cargo reachable (rustup installs it under ~/.cargo/bin).
ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        echo "vfsr: cargo not found; install Rust 1.89 or newer (https://rustup.rs) and retry" >&2
        exit 1
    fi
}

_apt_updated=""

# Installs the Debian packages named that are not installed yet. Returns non-zero when they
# cannot be installed (no root, no apt), so callers can skip optional parts.
ensure_packages() {
    local missing=()
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "vfsr: need root to install ${missing[*]}" >&2; return 1; }
        sudo="sudo"
    fi
    command -v apt-get >/dev/null 2>&1 || { echo "vfsr: no apt-get to install ${missing[*]}" >&2; return 1; }
    echo "vfsr: installing ${missing[*]}" >&2
    if [ -z "$_apt_updated" ]; then
        $sudo apt-get update -qq >/dev/null || return 1
        _apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
