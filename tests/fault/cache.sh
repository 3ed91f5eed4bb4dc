#!/usr/bin/env bash
# The workers' cache of split outputs (--cache-ram-mb, --cache-dir) under
# the fault suite's checks. Two ranks, a shuffle, three epochs; every run is
# checked for exactly once per epoch over both ranks, and its batches (a
# hash of each, per rank, in order) must be bit for bit those of the run
# with "cache": "off":
#   off      the spec turns the cache off: the reference batches;
#   cached   the cache on: epochs 2 and 3 come from it, split by split;
#   again    a second session of the same spec: >= 95% of its splits served
#            from the workers' caches (cache-aware leasing);
#   killed   caches emptied, then workers killed (SIGKILL) three times while
#            the first epoch writes entries, each restarted on its cache dir;
#   damaged  the workers stopped, entries on disk truncated, bit-flipped and
#            a half-written temporary file left, the workers restarted: the
#            damaged entries are misses (deleted, made again), never served.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup cache "$DPP_FAULT_CHECK"

rows=30000 epochs=3
fault_setup $rows
sed -i "s/\"epochs\": 2,/\"epochs\": $epochs, \"consumers\": 2, \"shuffle\": {\"seed\": 77},/" "$FAULT_SPEC"
off_spec=$DPP_TMP/spec-off.json
sed 's/"epochs"/"cache": "off", "epochs"/' "$FAULT_SPEC" >"$off_spec"
dpp_start_master --data-root "$FAULT_ROOT"

# Worker k keeps its entries in $DPP_TMP/cache-k; worker 0 has a RAM tier
# too, worker 1 only the disk. cache_of maps a daemon's name to its k.
declare -A cache_of
start_cached_worker() {
    local k=$1 ram=0
    ((k == 0)) && ram=64
    cache_of[worker-$DPP_NWORKERS]=$k
    dpp_start_worker --threads 1 --cache-ram-mb "$ram" --cache-dir "$DPP_TMP/cache-$k" \
        --cache-disk-gb 1
}
start_cached_worker 0
start_cached_worker 1

# A worker's first mistakes with the cache flags are refused, saying what
# to do: a disk size without a folder, a file for a folder, the folder of
# a running worker.
dpp_expect_reject "dpp-worker: --cache-disk-gb sizes the disk cache, which needs --cache-dir DIR (a folder of its own on a local disk)" \
    "$DPP_WORKER_BIN" --master "$DPP_MASTER_ADDR" --cache-disk-gb 2 ||
    dpp_fail "--cache-disk-gb without --cache-dir was not refused as expected"
touch "$DPP_TMP/not-a-dir"
for bad in "$DPP_TMP/not-a-dir:Not a directory" "$DPP_TMP/cache-0:in use by another worker"; do
    rc=0
    dpp_timeout 30 "$DPP_WORKER_BIN" --master "$DPP_MASTER_ADDR" --listen 127.0.0.1:0 \
        --cache-dir "${bad%%:*}" >"$DPP_TMP/bad.log" 2>&1 || rc=$?
    ((rc != 0)) && grep -q "cache_open_failed error=\"cache dir ${bad%%:*}: ${bad#*:}" "$DPP_TMP/bad.log" ||
        { cat "$DPP_TMP/bad.log"; dpp_fail "--cache-dir ${bad%%:*}: expected a refusal naming it (${bad#*:}), exit $rc"; }
done

# run NAME SPEC KILLS: reads SPEC's session with both ranks (hashes in
# NAME-R.hashes) while killing KILLS workers 0.3 s apart, each restarted on
# its cache dir; checks exactly once per epoch over both ranks; leaves the
# session's status in NAME.status.
run() {
    local name=$1 spec=$2 kills=$3 pids=() r k victim
    dpp_submit "$spec"
    for r in 0 1; do
        timeout -k 5 180 "$DPP_FAULT_CHECK" --share 1 --hashes "$DPP_TMP/$name-$r.hashes" \
            "$DPP_MASTER_ADDR" "$DPP_SESSION" "$r" "$FAULT_IDS" 20 >"$DPP_TMP/$name-$r.out" 2>&1 &
        pids+=($!)
        dpp_track "$!"
    done
    for ((k = 1; k <= kills; k++)); do
        sleep 0.3
        victim=$(random_live_worker)
        kill -KILL "$(dpp_pid_of "$victim")"
        dpp_log "$name: kill $k: $victim (cache-${cache_of[$victim]})"
        start_cached_worker "${cache_of[$victim]}"
    done
    for r in 0 1; do
        wait "${pids[r]}" || { cat "$DPP_TMP/$name-$r.out"; dpp_fail "$name: rank $r's reader failed"; }
    done
    local e sum_rows sum_ids line want_ids=$((rows * (rows - 1) / 2))
    for ((e = 0; e < epochs; e++)); do
        sum_rows=0
        sum_ids=0
        for r in 0 1; do
            line=$(grep "^epoch $e rank $r:" "$DPP_TMP/$name-$r.out") ||
                dpp_fail "$name: rank $r reported no epoch $e"
            grep -q ' duplicates 0 foreign 0 ' <<<"$line" || dpp_fail "$name: $line"
            sum_rows=$((sum_rows + $(sed 's/.* rows \([0-9]*\) .*/\1/' <<<"$line")))
            sum_ids=$((sum_ids + $(sed 's/.* ids_sum \([0-9]*\).*/\1/' <<<"$line")))
        done
        ((sum_rows == rows && sum_ids == want_ids)) ||
            dpp_fail "$name epoch $e: $sum_rows rows, id sum $sum_ids over the ranks; expected $rows and $want_ids"
    done
    DPP_CTL_TIMEOUT=20 dpp_ctl status "$DPP_SESSION" --output json >"$DPP_TMP/$name.status"
    for r in 0 1; do
        [[ $name == off ]] || cmp "$DPP_TMP/off-$r.hashes" "$DPP_TMP/$name-$r.hashes" ||
            dpp_fail "rank $r: the run '$name' delivered other batches than the run without the cache"
    done
}

# cache_field RUN FIELD: the session's cache.FIELD from its status (0: none)
cache_field() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("cache", {}).get(sys.argv[2], 0))' \
        "$DPP_TMP/$1.status" "$2"
}

run off "$off_spec" 0
[[ $(cache_field off splits_made) == 0 ]] || dpp_fail "a session with \"cache\": \"off\" used the cache"

run cached "$FAULT_SPEC" 0
made=$(cache_field cached splits_made)
hits=$(($(cache_field cached splits_from_ram) + $(cache_field cached splits_from_disk)))
dpp_log "cached: $made splits made, $hits served from the cache"
((made > 0 && hits > 0)) || dpp_fail "cached: expected splits made in epoch 1 and served from the cache after; status: $(cat "$DPP_TMP/cached.status")"
((hits >= made)) || dpp_fail "cached: only $hits of $((hits + made)) splits served from the cache over $epochs epochs"

run again "$FAULT_SPEC" 0
ratio=$(cache_field again hit_ratio)
dpp_log "again: hit ratio $ratio"
python3 -c 'import sys; sys.exit(float(sys.argv[1]) < 0.95)' "$ratio" ||
    dpp_fail "a second session of the same spec: only $ratio of its splits served from the caches (>= 0.95 expected)"

# killed: empty caches, so that the first epoch writes every entry while
# the kills land
for name in "${!cache_of[@]}"; do
    dpp_alive "$name" && dpp_stop "$name"
done
rm -rf -- "$DPP_TMP"/cache-0 "$DPP_TMP"/cache-1
start_cached_worker 0
start_cached_worker 1
lost_before=$(grep -c 'worker_lost' "$DPP_TMP/master.log" || true)
run killed "$FAULT_SPEC" 3
requeued=$(grep 'worker_lost' "$DPP_TMP/master.log" | tail -n +"$((lost_before + 1))" |
    sed -n 's/.*splits_requeued=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
dpp_log "killed: $requeued splits re-leased after the kills"

# damaged: three entries on disk spoiled while the workers are down
for name in "${!cache_of[@]}"; do
    dpp_alive "$name" && dpp_stop "$name"
done
mapfile -t entries < <(find "$DPP_TMP"/cache-0 "$DPP_TMP"/cache-1 -name '*.dpc' | sort)
((${#entries[@]} >= 4)) || dpp_fail "only ${#entries[@]} entries on disk after the killed run"
truncate -s 100 "${entries[0]}"                                     # cut short
printf '\xff' | dd of="${entries[1]}" bs=1 seek=5000 conv=notrunc status=none  # a flipped payload byte
printf 'DPC1' >"$(dirname "${entries[2]}")/.tmp-half"                # a write cut off
truncate -s 39 "${entries[3]}"                                      # not even a header
for k in 0 1; do
    start_cached_worker "$k"
done
run damaged "$FAULT_SPEC" 0
[[ ! -e "$(dirname "${entries[2]}")/.tmp-half" ]] || dpp_fail "the leftover temporary file was not removed at start"
removed=$(cat "$DPP_TMP"/worker-*.log | sed -n 's/.*cache_opened.* damaged_removed=\([0-9]*\).*/\1/p' |
    awk '{s += $1} END {print s + 0}')
((removed >= 2)) || dpp_fail "the workers removed $removed damaged entries at start; the 2 cut short were expected"
for e in "${entries[0]}" "${entries[3]}"; do
    [[ ! -e $e ]] || (($(stat -c %s "$e") > 100)) || dpp_fail "$e: a damaged entry was kept"
done
read_damaged=$(cat "$DPP_TMP"/worker-*.log | grep -c 'cache_entry_damaged' || true)
dpp_log "Cache: rows $rows x $epochs epochs x 2 ranks, shuffled: batches identical to the uncached run with the cache on, in a second session (hit ratio $ratio), with 3 worker kills while entries were written ($requeued splits re-leased), and with 4 damaged entries ($removed removed at start, $read_damaged found damaged when read)"
