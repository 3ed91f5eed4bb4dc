#!/usr/bin/env bash
# R13: three ranks on a table whose row count is not divisible by
# 3 x batch_size.
# drop: the master deals the records so that every rank gets the same number
# of full batches in every epoch, dropping fewer than 3 x batch_size rows;
# the ranks' rows do not overlap (row_id sums add up to the kept rows' sum,
# checked against the ids the plan keeps).
# pad: every row is delivered once, every rank gets the same number of
# batches, each of batch_size rows; the last ones are filled with rows the
# mask marks as padding (counted: ranks x batches x batch_size - rows).
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
dpp_setup r13

rows=10007
bs=100
root=$DPP_TMP/root
dpp_gen --rows $rows --shards 3 --partitions 2 --seed 1313 --out "$root/criteo"
spec=$DPP_TMP/spec.json
cat >"$spec" <<JSON
{
  "table": "criteo",
  "batch_size": $bs,
  "epochs": 2,
  "consumers": 3,
  "split_rows": 700,
  "remainder": "REMAINDER",
  "features": {"sparse": [{"name": "row_id"}]},
  "label": {"name": "label"}
}
JSON
dpp_start_master --data-root "$root"
dpp_start_worker --threads 1
dpp_start_worker --threads 1

# read_ranks REMAINDER: submits the spec with it; rank r's output in rank$r.jsonl
read_ranks() {
    sed "s/REMAINDER/$1/" "$spec" >"$DPP_TMP/spec-$1.json"
    dpp_submit "$DPP_TMP/spec-$1.json"
    local pids=() r
    for r in 0 1 2; do
        dpp_read_bg "$DPP_SESSION" "$DPP_TMP/rank$r.jsonl" --rank "$r"
        pids+=("$DPP_LAST_PID")
    done
    for r in 0 1 2; do dpp_read_wait "${pids[r]}" "$DPP_TMP/rank$r.jsonl"; done
}
field() { grep -o "\"$1\":[0-9]*" <<<"$2" | cut -d: -f2; }

read_ranks drop
per_rank=$((rows / 3 / bs))
total_rows=0
ids_sum=0
for r in 0 1 2; do
    for e in 0 1; do
        line=$(sed -n "$((e + 1))p" "$DPP_TMP/rank$r.jsonl")
        b=$(grep -o '"batches":[0-9]*' <<<"$line" | cut -d: -f2)
        n=$(grep -o '"rows":[0-9]*' <<<"$line" | cut -d: -f2)
        ((b == per_rank)) || dpp_fail "rank $r epoch $e: $b batches, expected $per_rank: $line"
        ((n == b * bs)) || dpp_fail "rank $r epoch $e: $n rows in $b full batches of $bs"
        if ((e == 0)); then
            total_rows=$((total_rows + n))
            ids_sum=$((ids_sum + $(grep -o '"sparse_ids_sum":[0-9]*' <<<"$line" | cut -d: -f2)))
        fi
    done
done
dropped=$((rows - total_rows))
((dropped >= 0 && dropped < 3 * bs)) || dpp_fail "dropped $dropped rows, expected fewer than $((3 * bs))"
# dpp-gen numbers rows in file order and the plan deals records in file order,
# so the kept rows are ids 0 .. total_rows-1, once each across the ranks.
want=$((total_rows * (total_rows - 1) / 2))
((ids_sum == want)) || dpp_fail "row_id sum over the ranks $ids_sum, expected $want (overlap or gap)"
dpp_log "R13 drop: rows $rows, 3 ranks x $per_rank batches of $bs in each of 2 epochs, $dropped rows dropped per epoch, ranks disjoint"

read_ranks pad
per_rank=$(((rows + 2) / 3))
per_rank=$(((per_rank + bs - 1) / bs))
for e in 0 1; do
    total_rows=0
    padded=0
    ids_sum=0
    for r in 0 1 2; do
        line=$(sed -n "$((e + 1))p" "$DPP_TMP/rank$r.jsonl")
        b=$(field batches "$line")
        ((b == per_rank)) || dpp_fail "pad: rank $r epoch $e: $b batches, expected $per_rank: $line"
        n=$(field rows "$line")
        p=$(field rows_padded "$line")
        ((n + p == b * bs)) || dpp_fail "pad: rank $r epoch $e: $n rows + $p padded in $b batches of $bs"
        total_rows=$((total_rows + n))
        padded=$((padded + p))
        ids_sum=$((ids_sum + $(field sparse_ids_sum "$line")))
    done
    ((total_rows == rows)) || dpp_fail "pad: epoch $e delivered $total_rows rows of $rows"
    want=$((rows * (rows - 1) / 2))
    ((ids_sum == want)) || dpp_fail "pad: epoch $e: row_id sum $ids_sum, expected $want (overlap or gap)"
    ((padded == 3 * per_rank * bs - rows)) || dpp_fail "pad: epoch $e: $padded rows padded"
done
dpp_log "R13 pad: rows $rows, 3 ranks x $per_rank batches of $bs in each of 2 epochs, every row once, $padded rows padded (masked) per epoch"
