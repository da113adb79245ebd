#!/usr/bin/env bash
# Counts the instructions and simulated L1 data-cache misses of `vfsr fib bench`'s update
# loop (`stream`: the single-route phases, batched and one by one, and the update trace)
# under valgrind's callgrind, for one or more vfsr binaries and each address family.
#
# Timed runs on a shared host move by a third between runs; these counts move far less (the
# publication bound is in wall-clock time, so batches can still differ a little between
# runs), so two builds compare closely, a few minutes per family. They say nothing of the
# misses' latency: read them beside a timed A/B, not instead of one.
#
#   scripts/count-updates.sh [--updates N] [--families v4,v6] BIN [BIN...]
#
# Prints one line per binary and family; with COUNT_JSON=FILE set, also appends each as a
# JSON line to FILE.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/setup.sh
. "$here/setup.sh"

updates=20000
families="v4,v6"
bins=()
while [ $# -gt 0 ]; do
    case "$1" in
        --updates) updates="${2:-}"; shift $(($# > 1 ? 2 : 1)) ;;
        --families) families="${2:-}"; shift $(($# > 1 ? 2 : 1)) ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        -*) echo "count-updates: unknown option $1" >&2; exit 2 ;;
        *) bins+=("$(realpath -m "$1")"); shift ;;
    esac
done
case "$updates" in
    ''|*[!0-9]*) echo "count-updates: --updates takes a number" >&2; exit 2 ;;
esac
[ -n "$families" ] || { echo "count-updates: --families takes v4, v6 or v4,v6" >&2; exit 2; }
[ ${#bins[@]} -gt 0 ] || { echo "count-updates: name at least one vfsr binary" >&2; exit 2; }
for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "count-updates: $b is not an executable" >&2; exit 2; }
done
ensure_packages valgrind || { echo "count-updates: valgrind is needed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-40s %-4s %16s %14s\n' binary fam instructions "D1 misses"
for b in "${bins[@]}"; do
    for fam in ${families//,/ }; do
        out="$tmp/cg.out"
        # One pass of the update trace, as binaries before --trace-passes ran it, so that
        # old and new builds count the same work.
        passes=()
        if "$b" fib bench --help 2>/dev/null | grep -q -- --trace-passes; then
            passes=(--trace-passes 1)
        fi
        valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no \
            --toggle-collect='vfsr::fibbench::stream*' --callgrind-out-file="$out" \
            "$b" fib bench --families "$fam" --phase-s 0.05 --updates "$updates" "${passes[@]}" \
            >"$tmp/log" 2>&1 || { tail -5 "$tmp/log" >&2; exit 1; }
        # Events: Ir Dr Dw I1mr D1mr D1mw ...
        read -r ir d1 < <(awk '/^summary:/ { print $2, $6 + $7 }' "$out")
        printf '%-40s %-4s %16s %14s\n' "$b" "$fam" "$ir" "$d1"
        if [ -n "${COUNT_JSON:-}" ]; then
            printf '{"binary":"%s","family":"%s","updates":%s,"instructions":%s,"d1_misses":%s}\n' \
                "$b" "$fam" "$updates" "$ir" "$d1" >>"$COUNT_JSON"
        fi
    done
done
