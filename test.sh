#!/usr/bin/env bash
# Runs vfsr's whole test suite on a fresh Debian 12 machine: installs what is missing, checks
# formatting and lints, and runs every test. Tests that need the reference data in
# ../shared/data skip with a printed reason when it is absent. The DPDK peers (optional
# feature) are built and tested when Debian's libdpdk-dev can be installed; set VFSR_DPDK=0 to
# leave them out.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
# clang builds the XDP programs and libbpf-dev, libelf-dev and zlib1g-dev are what vfsr-io
# (through the libbpf-sys crate) links; the others are the integration tests' tools, and the
# routing daemons the route-source tests run for real (FRR, BIRD 2, GoBGP).
ensure_packages build-essential pkg-config clang libbpf-dev libelf-dev zlib1g-dev iproute2 ethtool iputils-ping traceroute iperf3
ensure_packages frr bird2 gobgpd || echo "vfsr: the routing daemons could not be installed; their tests will skip" >&2
# promtool (Debian's prometheus) checks the metrics; tmux is the terminal vfsrctl top is
# tested in; systemd-analyze checks the unit file.
ensure_packages prometheus tmux systemd || echo "vfsr: promtool, tmux or systemd-analyze could not be installed; their checks will skip" >&2
# headless Chromium renders vfsr report's page in its test.
ensure_packages chromium || echo "vfsr: chromium could not be installed; the report's rendering test will skip" >&2
ensure_rust

# A test that cannot run here says why (crates/skip) and appends the reason to this file,
# listed at the end: the harness keeps a passing test's output to itself.
export VFSR_SKIP_LOG="$PWD/target/skipped-tests.txt"
mkdir -p target
: > "$VFSR_SKIP_LOG"

echo "== format"
cargo fmt --all -- --check
echo "== lints"
cargo clippy --locked --workspace --all-targets -- -D warnings
echo "== tests"
cargo test --locked --workspace
# The fuzz targets are a workspace of their own (cargo-fuzz runs them on nightly); here they
# are built on stable so they keep compiling, and the committed seed corpus is checked.
echo "== fuzz targets build; seed corpus (fuzz/tests/seeds.rs)"
CARGO_TARGET_DIR=target/fuzz-check cargo test --locked --manifest-path fuzz/Cargo.toml
echo "== loom model of the in-place FIB (crates/fib/tests/loom.rs)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --locked -p vfsr-fib --release --test loom

if [ "${VFSR_DPDK:-1}" != "0" ]; then
    if ensure_packages libdpdk-dev && pkg-config --exists libdpdk; then
        echo "== DPDK peers (feature dpdk)"
        cargo clippy --locked -p vfsr-bench --features dpdk --all-targets -- -D warnings
        cargo test --locked -p vfsr-bench --features dpdk
    else
        echo "== DPDK peers: skipped (libdpdk-dev could not be installed)"
    fi
fi
echo "== all tests passed"
if [ -s "$VFSR_SKIP_LOG" ]; then
    echo "== skipped here ($(sort -u "$VFSR_SKIP_LOG" | wc -l)), with the reason each gave:"
    sort -u "$VFSR_SKIP_LOG" | sed 's/^/   /'
else
    echo "== no test skipped"
fi
