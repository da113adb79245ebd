#!/usr/bin/env bash
# Builds vfsr and vfsrd and runs the main job: a live router between two network namespaces
# that learns the synthetic full table over BGP (FRR's bgpd and zebra feeding vfsrd over FPM,
# a GoBGP speaker holding the table), then forwards ping, traceroute and iperf3 (in memory
# when not root).
# Works on a fresh Debian 12 machine: installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
# clang builds the XDP program and libbpf-dev, libelf-dev and zlib1g-dev are what vfsr-io
# links; the rest are the live demo's network tools.
ensure_packages build-essential pkg-config clang libbpf-dev libelf-dev zlib1g-dev iproute2 ethtool iputils-ping traceroute iperf3
# The routing daemons the demo runs; without them it gives vfsrd the table in its config.
ensure_packages frr gobgpd || echo "vfsr: FRR or GoBGP could not be installed; the demo loads the table from vfsrd's config" >&2
ensure_rust
cargo build --release --locked -p vfsr -p vfsrd
exec target/release/vfsr demo "$@"
