#!/usr/bin/env bash
# Builds vfsr and runs its main job on the embedded default (the synthetic full table).
# Works on a fresh Debian 12 machine: installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
ensure_packages build-essential pkg-config
ensure_rust
cargo build --release --locked -p vfsr
exec target/release/vfsr demo "$@"
