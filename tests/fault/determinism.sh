#!/usr/bin/env bash
# Determinism: the same spec and seed read twice, once undisturbed and once
# while workers are killed (SIGKILL) and replaced, gives every rank the same
# batches, bit for bit, in the same order (a hash of every batch compared).
# The spec shuffles (split order per epoch, rows within splits) and has two
# ranks: the order is the plan's, not the workers'. Each run is also checked
# for exactly once per epoch over both ranks.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup determinism "$DPP_FAULT_CHECK"

rows=30000
fault_setup $rows
sed -i 's/"epochs": 2,/"epochs": 2, "consumers": 2, "shuffle": {"seed": 2026},/' "$FAULT_SPEC"
dpp_start_master --data-root "$FAULT_ROOT"
for _ in 1 2 3; do dpp_start_worker --threads 1; done

# run NAME KILLS: reads the session with both ranks (hashes in NAME-R.hashes)
# while killing KILLS random workers, 0.4 s apart (each reader takes 40 ms
# per batch, about 2.4 s per run).
run() {
    local name=$1 kills=$2 pids=() r
    dpp_submit "$FAULT_SPEC"
    for r in 0 1; do
        timeout -k 5 180 "$DPP_FAULT_CHECK" --share 1 --hashes "$DPP_TMP/$name-$r.hashes" \
            "$DPP_MASTER_ADDR" "$DPP_SESSION" "$r" "$FAULT_IDS" 40 >"$DPP_TMP/$name-$r.out" 2>&1 &
        pids+=($!)
        dpp_track "$!"
    done
    local k victim
    for ((k = 1; k <= kills; k++)); do
        sleep 0.4
        victim=$(random_live_worker)
        kill -KILL "$(dpp_pid_of "$victim")"
        dpp_log "$name: kill $k: $victim"
        dpp_start_worker --threads 1
    done
    for r in 0 1; do
        wait "${pids[r]}" || { cat "$DPP_TMP/$name-$r.out"; dpp_fail "$name: rank $r's reader failed"; }
        cat "$DPP_TMP/$name-$r.out"
    done
    # exactly once per epoch over both ranks: row counts and id sums add up
    local e sum_rows sum_ids want_ids=$((rows * (rows - 1) / 2))
    for e in 0 1; do
        sum_rows=0
        sum_ids=0
        for r in 0 1; do
            line=$(grep "^epoch $e rank $r:" "$DPP_TMP/$name-$r.out")
            sum_rows=$((sum_rows + $(sed 's/.* rows \([0-9]*\) .*/\1/' <<<"$line")))
            sum_ids=$((sum_ids + $(sed 's/.* ids_sum \([0-9]*\).*/\1/' <<<"$line")))
        done
        ((sum_rows == rows && sum_ids == want_ids)) ||
            dpp_fail "$name epoch $e: $sum_rows rows, id sum $sum_ids over the ranks; expected $rows and $want_ids"
    done
}

run clean 0
lost_before=$(grep -c 'worker_lost' "$DPP_TMP/master.log" || true)
run faulty 3
requeued=$(grep 'worker_lost' "$DPP_TMP/master.log" | tail -n +"$((lost_before + 1))" |
    sed -n 's/.*splits_requeued=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
((requeued > 0)) || dpp_fail "no kill took a split away from a worker: the faulty run proves nothing"
batches=0
for r in 0 1; do
    cmp "$DPP_TMP/clean-$r.hashes" "$DPP_TMP/faulty-$r.hashes" ||
        dpp_fail "rank $r: the run with worker kills delivered other batches than the clean run"
    batches=$((batches + $(wc -l <"$DPP_TMP/clean-$r.hashes")))
    # shuffled: the epochs differ, and rows within batches are out of file order
    cmp -s <(grep '^0 ' "$DPP_TMP/clean-$r.hashes" | cut -d' ' -f2,3) \
        <(grep '^1 ' "$DPP_TMP/clean-$r.hashes" | cut -d' ' -f2,3) &&
        dpp_fail "rank $r: epochs 0 and 1 delivered the same batches despite shuffle"
    grep -q ' inversions 0 ' "$DPP_TMP/clean-$r.out" && dpp_fail "rank $r: an epoch came in file order"
done
dups=$(cat "$DPP_TMP"/faulty-*.out | sed -n 's/.*duplicates dropped \([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
dpp_log "Determinism: rows $rows x 2 epochs x 2 ranks, shuffled, 3 worker kills ($requeued splits re-leased): $batches batch hashes identical to the clean run, $dups duplicate blocks dropped"
