#!/usr/bin/env bash
# Builds vfsr and vfsrd and runs the main job: a live router with the synthetic full table
# between two network namespaces (in memory when not root).
# Works on a fresh Debian 12 machine: installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
# clang and libbpf-dev build the XDP program; the rest are the live demo's network tools.
ensure_packages build-essential pkg-config clang libbpf-dev iproute2 ethtool iputils-ping traceroute iperf3
ensure_rust
cargo build --release --locked -p vfsr -p vfsrd
exec target/release/vfsr demo "$@"
