#!/usr/bin/env bash
# End to end: a generated table served by a master and two workers, read with
# dppctl and checked against dpp-refsum. Case 1: examples/criteo.json over
# two epochs, one consumer. Case 2: two consumers reading one partition
# concurrently, each rank checked on its own. Case 3: "epochs": "unbounded"
# runs epoch after epoch (each checked) until dppctl cancel ends it.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup e2e "$DPP_REFSUM"

root=$DPP_TMP/root
table=$root/criteo
criteo_spec=$DPP_SOURCE_DIR/examples/criteo.json
[[ -f $criteo_spec ]] || dpp_fail "$criteo_spec is missing"

dpp_step "generate 60000 rows: 2 partitions x 3 shards"
dpp_gen --rows 60000 --shards 3 --partitions 2 --seed 20240601 --out "$table"
partitions=("$table"/*"="*/)
((${#partitions[@]} == 2)) || dpp_fail "expected 2 partition folders in $table, found ${#partitions[@]}"

dpp_step "start a master and two workers"
dpp_start_master --data-root "$root"
dpp_log "master at $DPP_MASTER_ADDR"
dpp_start_worker --threads 2
dpp_start_worker --threads 2
dpp_log "workers up"

# ---- case 1: examples/criteo.json with epochs = 2 ----
dpp_step "case 1: examples/criteo.json, 2 epochs, 1 consumer"
spec1=$DPP_TMP/criteo-2epochs.json
if grep -q '"epochs"' "$criteo_spec"; then
    sed -E 's/"epochs"[[:space:]]*:[[:space:]]*[0-9]+/"epochs": 2/' "$criteo_spec" >"$spec1"
else
    sed -E '0,/\{/s//{"epochs": 2,/' "$criteo_spec" >"$spec1"
fi
grep -q '"epochs": 2' "$spec1" || dpp_fail "could not set epochs in $spec1"
dpp_ctl validate "$spec1" || dpp_fail "dppctl validate $spec1 rejected the spec"

dpp_submit "$spec1"
session1=$DPP_SESSION
dpp_log "session $session1"
dpp_read "$session1" "$DPP_TMP/read1.jsonl"
cat -- "$DPP_TMP/read1.jsonl"
dpp_refsum_check "$spec1" "$table" "$DPP_TMP/read1.jsonl"
dpp_wait_done "$session1"
dpp_log "dppctl status $session1:"
cat -- "$DPP_TMP/status.out"

# ---- case 2: two consumers, one partition ----
last_partition=${partitions[-1]%/}
last_partition=${last_partition##*/}
dpp_step "case 2: 2 consumers, partition $last_partition, both ranks read concurrently"
spec2=$DPP_TMP/two-ranks.json
cat >"$spec2" <<EOF
{
  "table": "criteo",
  "partitions": ["$last_partition"],
  "batch_size": 777,
  "remainder": "keep",
  "epochs": 2,
  "consumers": 2,
  "features": {
    "dense": [
      {"name": "i1", "transforms": [{"op": "fill_missing", "value": 0},
                                    {"op": "clamp", "max": 1000}]},
      {"name": "i2", "transforms": [{"op": "fill_missing", "value": 0},
                                    {"op": "clamp", "min": 0}, {"op": "log1p"}]},
      {"name": "i13", "transforms": [{"op": "fill_missing", "value": -1}]}
    ],
    "sparse": [
      {"name": "c1", "transforms": []},
      {"name": "c2", "transforms": [{"op": "modulo", "n": 7}, {"op": "truncate", "max_len": 2}]},
      {"name": "c26", "transforms": [{"op": "truncate", "max_len": 1}]}
    ]
  },
  "label": {"name": "label"}
}
EOF
dpp_ctl validate "$spec2" || dpp_fail "dppctl validate $spec2 rejected the spec"
dpp_submit "$spec2"
session2=$DPP_SESSION
dpp_log "session $session2"

dpp_read_bg "$session2" "$DPP_TMP/rank0.jsonl" --rank 0
reader0=$DPP_LAST_PID
dpp_read_bg "$session2" "$DPP_TMP/rank1.jsonl" --rank 1
reader1=$DPP_LAST_PID
dpp_read_wait "$reader0" "$DPP_TMP/rank0.jsonl"
dpp_read_wait "$reader1" "$DPP_TMP/rank1.jsonl"
for rank in 0 1; do
    dpp_log "rank $rank:"
    cat -- "$DPP_TMP/rank$rank.jsonl"
    dpp_refsum_check "$spec2" "$table" "$DPP_TMP/rank$rank.jsonl" --rank "$rank"
done
dpp_wait_done "$session2"

# ---- case 3: unbounded epochs, cancel ----
dpp_step "case 3: \"epochs\": \"unbounded\", then dppctl cancel"
spec3=$DPP_TMP/unbounded.json
sed 's/"epochs": 2,/"epochs": "unbounded",/' "$spec2" | sed 's/"consumers": 2,/"consumers": 1,/' >"$spec3"
grep -q '"unbounded"' "$spec3" || dpp_fail "could not make $spec3 unbounded"
dpp_submit "$spec3"
session3=$DPP_SESSION
dpp_read "$session3" "$DPP_TMP/unbounded.jsonl" --epochs 3
(($(wc -l <"$DPP_TMP/unbounded.jsonl") == 3)) || dpp_fail "read --epochs 3 printed other than 3 epochs"
# every epoch delivers the same rows: each checked as epoch 0 of a one-epoch spec
sed 's/"epochs": "unbounded",/"epochs": 1,/' "$spec3" >"$DPP_TMP/one-epoch.json"
for e in 0 1 2; do
    sed -n "$((e + 1))p" "$DPP_TMP/unbounded.jsonl" | sed "s/\"epoch\":$e,/\"epoch\":0,/" \
        >"$DPP_TMP/unbounded-$e.jsonl"
    dpp_refsum_check "$DPP_TMP/one-epoch.json" "$table" "$DPP_TMP/unbounded-$e.jsonl"
done
dpp_ctl status "$session3" | tee "$DPP_TMP/status3.out"
grep -q "running" "$DPP_TMP/status3.out" || dpp_fail "an unbounded session stopped by itself"
dpp_ctl cancel "$session3" | tee "$DPP_TMP/cancel.out"
grep -q "session $session3 cancelled" "$DPP_TMP/cancel.out" || dpp_fail "dppctl cancel did not say so"
rc=0
dpp_ctl status "$session3" --output json >"$DPP_TMP/status3.json" || rc=$?
cat "$DPP_TMP/status3.json"
((rc == 3)) || dpp_fail "dppctl status of a cancelled session should exit 3, not $rc"
grep -q '"state":"cancelled"' "$DPP_TMP/status3.json" &&
    grep -q '"error":"cancelled (dppctl cancel)"' "$DPP_TMP/status3.json" &&
    grep -q '"epochs":"unbounded"' "$DPP_TMP/status3.json" ||
    dpp_fail "after cancel the session should be in state cancelled"
rc=0
dpp_ctl read "$session3" >"$DPP_TMP/read3.out" 2>&1 || rc=$?
cat "$DPP_TMP/read3.out"
((rc == 3)) && grep -q 'cancelled' "$DPP_TMP/read3.out" ||
    dpp_fail "reading a cancelled session should exit 3 saying so (exit $rc)"
# the list, the workers and the live view (--watch, not on a terminal)
dpp_ctl list | tee "$DPP_TMP/list.out"
grep -Eq "^$session3[[:space:]]+cancelled" "$DPP_TMP/list.out" || dpp_fail "dppctl list lacks $session3"
# the control plane's line: the splits read above were leased and their
# acknowledgements committed, so both counts since start are positive. The
# last-minute figures are not asserted on: a slow machine (an ASan build)
# can take longer than that minute from case 1 to here. Session 3 is
# cancelled and the others done, so the master says it is idle.
grep -Eq '^master: (idle \(no session running\)|[0-9]+ splits/s); since start: [1-9][0-9]* lease replies, [1-9][0-9]* journal commits($|; last [0-9]+ s: .*$)' "$DPP_TMP/list.out" ||
    dpp_fail "dppctl list has no master line with lease replies and journal commits since start"
dpp_ctl workers | tee "$DPP_TMP/workers.out"
(($(grep -c '^[0-9]' "$DPP_TMP/workers.out") == 2)) || dpp_fail "dppctl workers should list 2 workers"
dpp_ctl status "$session1" --watch --interval-s 0.1 | tee "$DPP_TMP/watch.out"
grep -q "rank 0 .*\[#*\] .*splits" "$DPP_TMP/watch.out" || dpp_fail "no progress bar in the status view"
dpp_ctl cancel "$session3" | grep -q "already cancelled" || dpp_fail "a second cancel should say so"
rc=0
dpp_ctl cancel s-no-such-session 2>"$DPP_TMP/cancel.err" || rc=$?
((rc == 1)) && grep -q 'no session' "$DPP_TMP/cancel.err" || dpp_fail "cancel of an unknown session: exit $rc"

dpp_log "PASS"
