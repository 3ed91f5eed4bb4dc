#!/usr/bin/env bash
# bench/e2e.sh: end-to-end throughput of dpp on one machine. Generates a
# Criteo-like table (dpp-gen --index, 1M rows by default), starts a master and
# two workers on loopback, then ROUNDS times submits examples/criteo.json and
# reads the session with `dppctl read SESSION --output json`. Per round and as
# the median over rounds it prints
#   - rows/s: rows read / wall time of `dppctl read` (started right after
#     submit; round 1 includes indexing the files from their .idx sidecars,
#     later rounds reuse the master's record counts), and dppctl's own figure;
#   - rows per CPU-second: rows / CPU seconds (utime + stime) of the master
#     and both workers from just before submit to the end of the read (from
#     /proc/PID/stat) plus dppctl's (/usr/bin/time, else bash `times`).
# Builds nothing. Usage: bench/e2e.sh BUILD_DIR [ROWS [ROUNDS]]. Every daemon
# it starts is stopped on exit (tests/integration/lib.sh's trap). A benchmark:
# it prints figures and fails only when a read fails or rows are missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
if (($# < 1)) || [[ $1 == -h || $1 == --help ]]; then
    echo "usage: $0 BUILD_DIR [ROWS [ROUNDS]]   (ROWS default 1000000, ROUNDS default 3)" >&2
    exit 2
fi
rows=${2:-1000000}
rounds=${3:-3}
for n in "$rows" "$rounds"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || {
        echo "e2e: ROWS and ROUNDS must be positive integers, got '$n'" >&2
        exit 2
    }
done
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}

# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir e2e "$1"
dpp_setup e2e

spec=$DPP_SOURCE_DIR/examples/criteo.json
root=$DPP_TMP/root
hz=$(getconf CLK_TCK)
use_time=0
[[ -x /usr/bin/time ]] && use_time=1

# cpu_ticks PID: utime + stime of a live process in clock ticks (fields 14
# and 15 of /proc/PID/stat, counted after the parenthesised command name).
cpu_ticks() {
    local stat rest
    stat=$(<"/proc/$1/stat") || dpp_fail "cannot read /proc/$1/stat"
    rest=${stat##*) }
    # shellcheck disable=SC2206 # word splitting is the point
    local f=($rest)
    printf '%d' $((f[11] + f[12]))
}

# daemon_ticks: "NAME=TICKS ..." of every daemon started here, in order.
daemon_ticks() {
    local i pid out=""
    for i in "${!DPP_DAEMON_NAMES[@]}"; do
        pid=${DPP_DAEMON_PIDS[i]}
        if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
            dpp_fail "${DPP_DAEMON_NAMES[i]} is not running"
        fi
        out+="${out:+ }$(cpu_ticks "$pid")"
    done
    printf '%s' "$out"
}

# Without /usr/bin/time: the shell's children times (user + sys) before and
# after. `times` must run in this shell (a $(...) subshell starts from zero);
# the daemons are children too but count only once waited for, at the end.
child_cpu() {
    times >"$DPP_TMP/times.out"
    awk 'END { s = 0; for (i = 1; i <= 2; i++) { split($i, m, "m"); s += m[1] * 60 + m[2] }
               printf "%.3f\n", s }' "$DPP_TMP/times.out"
}

# calc EXPR: awk arithmetic.
calc() { awk "BEGIN { $1 }"; }

# median FILE: the median of the numbers in FILE, one per line.
median() { sort -g -- "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

dpp_log "binaries from $DPP_BIN_DIR, scratch space in $DPP_TMP, $(nproc) cores"
dpp_log "generating $rows rows (4 shards x 2 partitions, with .idx sidecars)"
dpp_gen --rows "$rows" --shards 4 --partitions 2 --seed 1 --index --out "$root/criteo" \
    >"$DPP_TMP/gen.out"
sync # the table stays in the page cache; its writeback must not overlap the reads

dpp_start_master --data-root "$root"
dpp_start_worker
dpp_start_worker
dpp_log "master $DPP_MASTER_ADDR, 2 workers (default threads); $rounds rounds"
printf '\n'

: >"$DPP_TMP/rate"
: >"$DPP_TMP/per_cpu"
for ((r = 1; r <= rounds; r++)); do
    read -ra before <<<"$(daemon_ticks)"
    dpp_submit "$spec"
    session=$DPP_SESSION
    out=$DPP_TMP/read-$r.jsonl
    child_cpu >"$DPP_TMP/c0"
    t0=$(date +%s%N)
    rc=0
    if ((use_time)); then
        dpp_timeout "${DPP_CTL_TIMEOUT:-600}" /usr/bin/time -f '%U %S' -o "$out.time" \
            "$DPPCTL" read "$session" --output json >"$out" 2>"$out.err" || rc=$?
    else
        dpp_timeout "${DPP_CTL_TIMEOUT:-600}" "$DPPCTL" read "$session" --output json \
            >"$out" 2>"$out.err" || rc=$?
    fi
    t1=$(date +%s%N)
    child_cpu >"$DPP_TMP/c1"
    read -ra after <<<"$(daemon_ticks)"
    if ((rc != 0)); then
        cat -- "$out.err" >&2
        dpp_fail "dppctl read $session exited $rc"
    fi
    if ((use_time)); then
        ctl_cpu=$(awk '{ printf "%.3f", $1 + $2 }' "$out.time")
    else
        ctl_cpu=$(calc "printf \"%.3f\", $(cat "$DPP_TMP/c1") - $(cat "$DPP_TMP/c0")")
    fi

    # Rows and dppctl's own rate from its JSON lines (one per epoch).
    got=0 epochs=0 ctl_rate=""
    while IFS= read -r line; do
        [[ $line =~ \"rows\":([0-9]+) ]] || continue
        got=$((got + BASH_REMATCH[1]))
        epochs=$((epochs + 1))
        if [[ $line =~ \"rows_per_s\":([0-9.eE+-]+) ]]; then
            ctl_rate+="${ctl_rate:+, }$(calc "printf \"%.0f\", ${BASH_REMATCH[1]}")"
        fi
    done <"$out"
    ((epochs > 0 && got == rows * epochs)) ||
        dpp_fail "round $r: read $got rows in $epochs epoch(s), expected $rows per epoch: $(cat -- "$out")"

    cpu_text="" daemon_ticks_sum=0
    for i in "${!DPP_DAEMON_NAMES[@]}"; do
        d=$((after[i] - before[i]))
        daemon_ticks_sum=$((daemon_ticks_sum + d))
        cpu_text+="${DPP_DAEMON_NAMES[i]} $(calc "printf \"%.2f\", $d / $hz"), "
    done
    wall=$(calc "printf \"%.3f\", $((t1 - t0)) / 1e9")
    total=$(calc "printf \"%.3f\", $daemon_ticks_sum / $hz + $ctl_cpu")
    rate=$(calc "printf \"%.0f\", $got / $wall")
    per_cpu=$(calc "printf \"%.0f\", $got / $total")
    echo "$rate" >>"$DPP_TMP/rate"
    echo "$per_cpu" >>"$DPP_TMP/per_cpu"
    printf 'round %d: %d rows in %s s: %s rows/s (dppctl: %s)%s\n' "$r" "$got" "$wall" "$rate" \
        "$ctl_rate" "$( ((r == 1)) && echo ', includes indexing')"
    printf '         CPU s: %sdppctl %s; total %s -> %s rows per CPU-s\n' "$cpu_text" "$ctl_cpu" \
        "$total" "$per_cpu"
done

printf '\ne2e: %d rows of examples/criteo.json per round, 1 master + 2 workers + dppctl read, loopback, %d cores\n' \
    "$rows" "$(nproc)"
printf '  rows/s          %s   (median of %d rounds; wall time of dppctl read)\n' \
    "$(median "$DPP_TMP/rate")" "$rounds"
printf '  rows per CPU-s  %s   (median; master + workers + dppctl, dppctl via %s)\n' \
    "$(median "$DPP_TMP/per_cpu")" "$( ((use_time)) && echo /usr/bin/time || echo 'bash times')"

# The C++ peer of bench/peers.sh (libprotobuf's generated classes, one
# thread) over the same table and transforms, when peers.sh has built it:
# dpp's rows per CPU-second above beside its own, from this run.
cxx=$DPP_BIN_DIR/bench/peers/cxx_reader
if [[ -x $cxx ]]; then
    : >"$DPP_TMP/cxx"
    for ((r = 1; r <= 3; r++)); do # a noisy machine: the median of 3
        line=$(taskset -c 0 "$cxx" --table "$root/criteo" | grep 'rows per CPU-s') ||
            dpp_fail "the C++ reader failed on $root/criteo"
        [[ $line =~ ([0-9]+)\ rows\ per\ CPU-s ]] || dpp_fail "no figure in the C++ reader's line: $line"
        echo "${BASH_REMATCH[1]}" >>"$DPP_TMP/cxx"
    done
    cxx_per_cpu=$(median "$DPP_TMP/cxx")
    printf '  C++ reader      %s   rows per CPU-s (bench/peers.sh'"'"'s, one thread, the same table, median of 3)\n' "$cxx_per_cpu"
    printf '  dpp / C++       %sx  per CPU-second, end to end\n' \
        "$(calc "printf \"%.2f\", $(median "$DPP_TMP/per_cpu") / $cxx_per_cpu")"
else
    printf '  (no %s: run bench/peers.sh %s once to set the C++ reader beside these)\n' "$cxx" "$1"
fi
