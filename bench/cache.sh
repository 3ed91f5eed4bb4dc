#!/usr/bin/env bash
# bench/cache.sh BUILD_DIR [ROWS]: the workers' cache of split outputs. A
# Criteo-like table of ROWS rows (default 1,000,000; examples/criteo.json's
# transforms, a shuffle, 3 epochs) read by `dppctl read` from a master and
# two workers on loopback, four ways in one run:
#   off    workers without a cache;
#   ram    --cache-ram-mb 1024 (the whole table's output fits);
#   disk   only the disk tier (--cache-dir, 4 GiB);
#   small  --cache-ram-mb 32 and a 64 MiB disk tier: the table's output is
#          more than 4x what the caches hold, so entries are evicted.
# For each epoch it prints the rows per CPU-second of the two workers (their
# utime + stime from /proc between the epoch's first and last batch) and
# the ratio of epochs 2-3 to epoch 1; then, for ram, a second session of the
# same spec on the same workers and its share of splits served from the
# caches; for small, the workers' peak RSS and the bytes on disk beside the
# bounds. Every epoch's sums must equal the uncached run's (checked).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}
build=${1:?usage: bench/cache.sh BUILD_DIR [ROWS]}
rows=${2:-1000000}
# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir cache "$build"
dpp_setup bench-cache

root=$DPP_TMP/root
"$DPP_GEN" --rows "$rows" --shards 8 --partitions 2 --seed 11 --out "$root/criteo" >/dev/null
spec=$DPP_TMP/spec.json
sed 's/"epochs": 1,/"epochs": 3, "shuffle": {"seed": 5}, "split_rows": 25000,/' \
    "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"
grep -q '"shuffle"' "$spec" || dpp_fail "could not set epochs and shuffle in examples/criteo.json"
dpp_start_master --data-root "$root"

# cpu_ticks: utime + stime of the running workers, in clock ticks
cpu_ticks() {
    local pid t=0 stat
    for pid in "${workers[@]}"; do
        stat=$(</proc/"$pid"/stat)
        stat=${stat##*) }
        read -r -a f <<<"$stat"
        t=$((t + f[11] + f[12]))
    done
    echo "$t"
}
hz=$(getconf CLK_TCK)

# start_workers RAM_MB DISK_GB: stops the workers of the run before, starts
# two with a RAM tier of RAM_MB and a disk tier of DISK_GB (0: none) in a
# fresh folder each; their pids go into workers[]
workers=()
names=()
start_workers() {
    local n k args
    for n in "${names[@]}"; do dpp_stop "$n"; done
    names=()
    workers=()
    for k in 0 1; do
        n=worker-$DPP_NWORKERS
        args=(--cache-ram-mb "$1")
        [[ $2 == 0 ]] || args+=(--cache-dir "$DPP_TMP/$n-cache" --cache-disk-gb "$2")
        dpp_start_worker --threads 1 "${args[@]}"
        names+=("$n")
        workers+=("$(dpp_pid_of "$n")")
    done
}

# read_session NAME: submits the spec and reads it, sampling the workers'
# CPU when each epoch's line arrives; NAME.sums (the epochs' sums, rate
# left out) and NAME.cpu (ticks per epoch)
read_session() {
    local name=$1 line before after
    dpp_submit "$spec"
    : >"$DPP_TMP/$name.cpu"
    before=$(cpu_ticks)
    while IFS= read -r line; do
        after=$(cpu_ticks)
        echo $((after - before)) >>"$DPP_TMP/$name.cpu"
        before=$after
        sed 's/,"rows_per_s":[0-9.]*//' <<<"$line" >>"$DPP_TMP/$name.sums"
    done < <(timeout -k 5 600 "$DPPCTL" read "$DPP_SESSION" --output json)
    DPP_CTL_TIMEOUT=20 dpp_ctl status "$DPP_SESSION" --output json >"$DPP_TMP/$name.status"
    [[ $(wc -l <"$DPP_TMP/$name.cpu") == 3 ]] || dpp_fail "$name: dppctl read did not deliver 3 epochs"
}

# report NAME: rows per worker CPU-second per epoch, epochs 2-3 over 1,
# the splits made and served from each tier, the workers' peak RSS
report() {
    local name=$1 pid hwm=0
    for pid in "${workers[@]}"; do
        hwm=$((hwm > $(awk '/^VmHWM/ {print $2}' /proc/"$pid"/status) ? hwm : $(awk '/^VmHWM/ {print $2}' /proc/"$pid"/status)))
    done
    python3 - "$DPP_TMP/$name.cpu" "$rows" "$hz" "$name" "$DPP_TMP/$name.status" "$hwm" <<'PY'
import json, sys
ticks = [int(x) for x in open(sys.argv[1])]
rows, hz, name = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
c = json.load(open(sys.argv[5])).get("cache", {})
rate = [rows / max(t / hz, 1e-3) for t in ticks]
later = 2 * rows / max((ticks[1] + ticks[2]) / hz, 1e-3)
print(f"{name:6} rows per worker CPU-s: epoch 1 {rate[0]:>10,.0f}  epoch 2 {rate[1]:>10,.0f}"
      f"  epoch 3 {rate[2]:>10,.0f}   epochs 2-3 / epoch 1: {later / rate[0]:5.1f}x   splits:"
      f" {c.get('splits_made', '-')} made, {c.get('splits_from_ram', '-')} RAM,"
      f" {c.get('splits_from_disk', '-')} disk; peak RSS {int(sys.argv[6]) // 1024} MiB")
PY
}

same_sums() {
    cmp -s "$DPP_TMP/off.sums" "$DPP_TMP/$1.sums" ||
        dpp_fail "$1: the epochs' sums differ from the run without a cache: $(diff "$DPP_TMP/off.sums" "$DPP_TMP/$1.sums")"
}

start_workers 0 0
read_session off
report off
start_workers 1024 0
read_session ram
report ram
same_sums ram
read_session ram2
same_sums ram2
hit_line() {
    python3 - "$DPP_TMP/$1.status" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])).get("cache", {})
print(f"{c.get('hit_ratio', 0) * 100:.1f}% ({c.get('splits_from_ram', 0)} from RAM, "
      f"{c.get('splits_from_disk', 0)} from disk, {c.get('splits_made', 0)} made)")
PY
}
echo "ram    second session of the same spec: $(hit_line ram2) of its splits served from the caches"
start_workers 0 4
read_session disk
report disk
same_sums disk

# small: RAM 32 MiB, disk 64 MiB per worker
start_workers 32 0.0625
read_session small
report small
same_sums small
out_mb=$(python3 - "$DPP_TMP/ram2.status" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s["cache"]
hits = c["splits_from_ram"] + c["splits_from_disk"]
print(c["bytes_from_cache"] * (hits + c["splits_made"]) // max(hits, 1) // 3 // 2**20)
PY
)
echo "small  the table's output: about $out_mb MiB (entries of all splits, from the ram run); the two workers cache at most 2 x 64 MiB"
k=0
for pid in "${workers[@]}"; do
    n=${names[k]}
    disk=$(du -sk "$DPP_TMP/$n-cache" | cut -f1)
    echo "small  $n: peak RSS $(($(awk '/^VmHWM/ {print $2}' /proc/"$pid"/status) / 1024)) MiB (RAM tier bound 32 MiB;" \
        "compare the off run's), disk tier $((disk / 1024)) MiB (bound 64 MiB)"
    ((disk <= 64 * 1024 + 1024)) || dpp_fail "$n: the disk tier holds $disk KiB, over its 64 MiB bound"
    k=$((k + 1))
done
