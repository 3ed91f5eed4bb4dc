#!/usr/bin/env bash
# bench/e2e.sh: end-to-end throughput of dpp on one machine. Generates a
# Criteo-like table (dpp-gen --index, 1M rows by default), starts a master and
# two workers on loopback, submits examples/criteo.json, reads the session
# with `dppctl read SESSION --output json` and prints
#   - rows/s: rows read / wall time of the read (from right after submit, so
#     it includes indexing from the .idx sidecars), and dppctl's own figure;
#   - rows per CPU-second: rows / (utime + stime of the master, both workers
#     and dppctl, each over its whole life).
# Builds nothing. Usage: bench/e2e.sh BUILD_DIR [ROWS]. Every daemon it starts
# is stopped on exit (tests/integration/lib.sh's trap). A benchmark: it prints
# figures and fails only when the read fails or rows are missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
if (($# < 1)) || [[ $1 == -h || $1 == --help ]]; then
    echo "usage: $0 BUILD_DIR [ROWS]   (ROWS default 1000000)" >&2
    exit 2
fi
bin_dir=$(cd "$1" 2>/dev/null && pwd) || {
    echo "e2e: no build directory $1" >&2
    exit 1
}
rows=${2:-1000000}
[[ $rows =~ ^[1-9][0-9]*$ ]] || {
    echo "e2e: ROWS must be a positive integer, got '$rows'" >&2
    exit 2
}
export DPP_BIN_DIR=$bin_dir
export DPP_MISSING_RC=1 # a missing binary is an error here, not a skip
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}

# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_setup e2e

spec=$DPP_SOURCE_DIR/examples/criteo.json
root=$DPP_TMP/root
hz=$(getconf CLK_TCK)

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

# secs NUM DEN: NUM / DEN with 3 decimals.
secs() { awk -v n="$1" -v d="$2" 'BEGIN { printf "%.3f", n / d }'; }

dpp_log "binaries from $DPP_BIN_DIR, scratch space in $DPP_TMP, $(nproc) cores"
dpp_log "generating $rows rows (4 shards x 2 partitions, with .idx sidecars)"
dpp_gen --rows "$rows" --shards 4 --partitions 2 --seed 1 --index --out "$root/criteo" \
    >"$DPP_TMP/gen.out"

dpp_start_master --data-root "$root"
dpp_start_worker
dpp_start_worker
dpp_log "master $DPP_MASTER_ADDR, 2 workers (default threads)"

dpp_submit "$spec"
session=$DPP_SESSION
dpp_log "session $session: reading it with dppctl read --output json"

out=$DPP_TMP/read.jsonl
time_out=$DPP_TMP/read.time
use_time=0
[[ -x /usr/bin/time ]] && use_time=1
# Without /usr/bin/time: the shell's children times (user + sys) before and
# after. `times` runs in this shell (a $(...) subshell would start from zero);
# the daemons are children too but count only once waited for, after this.
child_cpu() {
    times >"$DPP_TMP/times.out"
    awk 'END { s = 0; for (i = 1; i <= 2; i++) { split($i, m, "m"); s += m[1] * 60 + m[2] }
               printf "%.3f", s }' "$DPP_TMP/times.out"
}
child_cpu >"$DPP_TMP/c0"
t0=$(date +%s%N)
rc=0
if ((use_time)); then
    dpp_timeout "${DPP_CTL_TIMEOUT:-600}" /usr/bin/time -f '%U %S' -o "$time_out" \
        "$DPPCTL" read "$session" --output json >"$out" 2>"$out.err" || rc=$?
else
    dpp_timeout "${DPP_CTL_TIMEOUT:-600}" "$DPPCTL" read "$session" --output json \
        >"$out" 2>"$out.err" || rc=$?
fi
t1=$(date +%s%N)
child_cpu >"$DPP_TMP/c1"
if ((rc != 0)); then
    cat -- "$out.err" >&2
    dpp_fail "dppctl read $session exited $rc"
fi
if ((use_time)); then
    read -r u s <"$time_out"
    ctl_cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
else
    ctl_cpu=$(awk 'NR == 1 { a = $1 } NR == 2 { b = $1 } END { printf "%.3f", b - a }' \
        "$DPP_TMP/c0" "$DPP_TMP/c1")
fi

# Daemon CPU, read before the trap stops them.
declare -a names=() cpus=()
total_ticks=0
for i in "${!DPP_DAEMON_NAMES[@]}"; do
    pid=${DPP_DAEMON_PIDS[i]}
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || dpp_fail "${DPP_DAEMON_NAMES[i]} is not running"
    ticks=$(cpu_ticks "$pid")
    names+=("${DPP_DAEMON_NAMES[i]}")
    cpus+=("$(secs "$ticks" "$hz")")
    total_ticks=$((total_ticks + ticks))
done

# Rows and dppctl's own rate from its JSON lines (one per epoch).
got=0
ctl_rate=""
while IFS= read -r line; do
    [[ $line =~ \"rows\":([0-9]+) ]] || continue
    got=$((got + BASH_REMATCH[1]))
    if [[ $line =~ \"rows_per_s\":([0-9.eE+-]+) ]]; then
        ctl_rate+="${ctl_rate:+, }${BASH_REMATCH[1]}"
    fi
done <"$out"
epochs=$(grep -c '"rows"' "$out" || true)
((got == rows * epochs && epochs > 0)) ||
    dpp_fail "read $got rows in $epochs epoch(s), expected $rows per epoch: $(cat -- "$out")"

wall=$(secs $((t1 - t0)) 1000000000)
all_cpu=$(awk -v d="$(secs "$total_ticks" "$hz")" -v c="$ctl_cpu" 'BEGIN { printf "%.3f", d + c }')

printf '\ne2e: %d rows (%d epoch(s)) of examples/criteo.json, 1 master + 2 workers + dppctl read, loopback\n' \
    "$got" "$epochs"
printf '  read wall time   %s s (from right after submit to the last batch; includes indexing)\n' "$wall"
printf '  rows/s           %s   (dppctl read reports %s)\n' \
    "$(awk -v r="$got" -v w="$wall" 'BEGIN { printf "%.0f", r / w }')" "$ctl_rate"
printf '  CPU seconds      '
for i in "${!names[@]}"; do
    printf '%s %s, ' "${names[i]}" "${cpus[i]}"
done
printf 'dppctl %s (%s); total %s\n' "$ctl_cpu" \
    "$( ((use_time)) && echo /usr/bin/time || echo 'bash times')" "$all_cpu"
printf '  rows per CPU-s   %s   (over all dpp processes; daemons over their whole life)\n' \
    "$(awk -v r="$got" -v c="$all_cpu" 'BEGIN { printf "%.0f", r / c }')"
