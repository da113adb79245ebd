#!/usr/bin/env bash
# Runs the fuzz targets of fuzz/ one after another, each for a given time, growing their
# corpora (fuzz/corpus/<target>/). Stops at the first crash: names the target and the
# crashing input and exits 1. Ends with a table: target, seconds, runs, corpus size, result.
#
#   scripts/fuzz.sh [--seconds N] [--prefix CMD] [target...]
#
#   --seconds N   time per target (default 60)
#   --prefix CMD  runs each fuzzer under CMD, e.g. --prefix "taskset -c 0"
#   target...     the targets to run (default: every target of fuzz/Cargo.toml)
#
# Installs what is missing first: the nightly toolchain (rustup) and cargo-fuzz.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fuzz="$root/fuzz"
seconds=60
prefix=""
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --seconds=*) seconds="${1#*=}"; shift ;;
        --prefix) prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
case "$seconds" in
    ''|*[!0-9]*) echo "fuzz.sh: --seconds takes a whole number" >&2; exit 2 ;;
esac

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz.sh: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd "$fuzz"
all=$(cargo +nightly fuzz list)
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets <<<"$all"
fi
for t in "${targets[@]}"; do
    if ! grep -qx "$t" <<<"$all"; then
        echo "fuzz.sh: no target $t (there are: $(echo $all))" >&2
        exit 2
    fi
done

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rows=()
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    # Built first, so that the time given is all fuzzing.
    cargo +nightly fuzz build "$t"
    log="$logs/$t.log"
    echo "== $t: $seconds s"
    set +e
    # -timeout: an input taking longer than 10 s counts as a hang (a crash).
    $prefix cargo +nightly fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [ -z "$runs" ]; then
        runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    fi
    size=$(find "corpus/$t" -maxdepth 1 -type f | wc -l)
    if [ $rc -eq 0 ]; then
        result=ok
    else
        input=$(grep 'Test unit written to' "$log" | awk '{print $NF}' | tail -1)
        case "$input" in
            ''|/*) ;;
            *) input="$fuzz/${input#./}" ;;
        esac
        result="CRASH ${input:-(no input written; see the log)}"
        tail -n 60 "$log" >&2
        echo "fuzz.sh: $t crashed (exit $rc); input: ${input:-?}" >&2
        echo "fuzz.sh: reproduce with: cd fuzz && cargo +nightly fuzz run $t ${input:-}" >&2
        status=1
    fi
    rows+=("$t|$seconds|${runs:-?}|$size|$result")
    [ $status -eq 0 ] || break
done

echo
printf '%-16s %8s %12s %8s  %s\n' target seconds runs corpus result
for r in "${rows[@]}"; do
    IFS='|' read -r t s n c res <<<"$r"
    printf '%-16s %8s %12s %8s  %s\n' "$t" "$s" "$n" "$c" "$res"
done
exit $status
