#!/usr/bin/env bash
# bench/scaling.sh: does the worker's data path scale with cores? One
# bench_pipeline --once (read + CRC, decode, transform, block encode; one
# thread) pinned to core 0, then two at once pinned to cores 0 and 1 over the
# same table (from the page cache), ROUNDS times alternately. Prints rows/s of
# one, the two together, and their ratio (2.0: perfect; what two workers on
# separate cores can do at most, since each worker's path is this one).
# Usage: bench/scaling.sh BUILD_DIR [ROWS (default 1000000) [ROUNDS (default 3)]].
# Needs 2 cores; builds nothing.
set -euo pipefail
if (($# < 1)) || [[ $1 == -h || $1 == --help ]]; then
    echo "usage: $0 BUILD_DIR [ROWS [ROUNDS]]" >&2
    exit 2
fi
[[ -d $1 ]] || {
    echo "scaling.sh: no build directory $1 (build first: make build)" >&2
    exit 2
}
build=$(cd "$1" && pwd)
rows=${2:-1000000}
rounds=${3:-3}
bench=$build/bench/bench_pipeline
[[ -x $bench && -x $build/dpp-gen ]] || {
    echo "scaling.sh: needs $bench and $build/dpp-gen (cmake --build $build)" >&2
    exit 2
}
(($(nproc) >= 2)) || {
    echo "scaling.sh: needs 2 cores, this machine has $(nproc)" >&2
    exit 2
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-scaling.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$build/dpp-gen" --rows "$rows" --shards 4 --partitions 2 --seed 1 --out "$tmp/criteo" >/dev/null
cat "$tmp"/criteo/*/* >/dev/null # into the page cache

# once CPU: seconds of one pass pinned to CPU
once() {
    taskset -c "$1" "$bench" --table "$tmp/criteo" --once 2>&1 |
        sed -n 's/^bench_pipeline --once: [0-9]* rows in \([0-9.]*\) s$/\1/p'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for r in $(seq 1 "$rounds"); do
    one=$(once 0)
    once 0 >"$tmp/a" &
    pa=$!
    once 1 >"$tmp/b" &
    pb=$!
    wait "$pa" "$pb"
    a=$(cat "$tmp/a") b=$(cat "$tmp/b")
    [[ -n $one && -n $a && -n $b ]] || {
        echo "scaling.sh: a bench_pipeline run failed" >&2
        exit 1
    }
    single=$(awk -v n="$rows" -v s="$one" 'BEGIN { printf "%.0f", n / s }')
    pair=$(awk -v n="$rows" -v a="$a" -v b="$b" 'BEGIN { printf "%.0f", n / a + n / b }')
    echo "$single" >>"$tmp/single"
    echo "$pair" >>"$tmp/pair"
    printf 'round %d: one on core 0: %s rows/s (%s s); two on cores 0 and 1: %s rows/s together (%s s, %s s)\n' \
        "$r" "$single" "$one" "$pair" "$a" "$b"
done
s=$(median <"$tmp/single")
p=$(median <"$tmp/pair")
printf '\nscaling: %d rows, examples/criteo.json, bench_pipeline --once, medians of %d rounds\n' "$rows" "$rounds"
printf '  one data path   %s rows/s\n  two, two cores  %s rows/s\n  ratio           %s (floor 1.8)\n' \
    "$s" "$p" "$(awk -v s="$s" -v p="$p" 'BEGIN { printf "%.2f", p / s }')"
