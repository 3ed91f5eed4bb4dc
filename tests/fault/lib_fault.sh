# shellcheck shell=bash
# Shared set-up of the fault tests: a table whose rows carry a unique row_id,
# a spec that delivers row_id as a sparse feature, and dpp-fault-check, which
# counts missing and duplicate rows per epoch. Sourced after lib.sh.

# fault_setup ROWS [DPP_GEN_ARGS...]: table ($FAULT_ROOT/criteo), spec
# ($FAULT_SPEC) and expected ids ($FAULT_IDS); extra arguments go to dpp-gen
# (--index for sidecars). With DPP_FAULT_FORMAT=parquet the table is Parquet,
# in row groups of 3,000 rows cut into splits of 2,000 (ctest runs the core
# cases both ways: fault/parquet_*). DPP_FAULT_SPLIT_ROWS=N cuts splits of N
# rows instead of 2,000 (fault/*_small_splits: many splits at a high rate).
# With DPP_FAULT_STORE=s3 the table is uploaded to a loopback S3 store
# (dpp_start_s3) and read from there: FAULT_ROOT becomes s3://faults/w, the
# spec names the table by URL, and every worker gets that root
# (DPP_WORKER_ARGS).
fault_setup() {
    local rows=$1 format=${DPP_FAULT_FORMAT:-tfrecord}
    shift
    FAULT_ROOT=${FAULT_ROOT:-$DPP_TMP/root}
    if [[ $format == parquet ]]; then
        set -- --format parquet --row-group-rows 3000 "$@"
    fi
    dpp_gen --rows "$rows" --shards 4 --partitions 2 --seed 5150 "$@" --out "$FAULT_ROOT/criteo"
    local table=criteo
    if [[ ${DPP_FAULT_STORE:-} == s3 ]]; then
        dpp_start_s3
        dpp_s3_put faults "$FAULT_ROOT/criteo" w/criteo
        FAULT_ROOT=s3://faults/w
        table=$FAULT_ROOT/criteo
        DPP_WORKER_ARGS=(--data-root "$FAULT_ROOT")
    fi
    FAULT_SPEC=$DPP_TMP/spec.json
    cat >"$FAULT_SPEC" <<JSON
{
  "table": "$table",
  "format": "$format",
  "batch_size": 500,
  "remainder": "keep",
  "epochs": 2,
  "split_rows": ${DPP_FAULT_SPLIT_ROWS:-2000},
  "compression": "zstd",
  "features": {
    "dense": [{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}, {"op": "log1p"}]}],
    "sparse": [{"name": "row_id"},
               {"name": "c1", "transforms": [{"op": "modulo", "n": 1000}]}]
  },
  "label": {"name": "label"}
}
JSON
    FAULT_IDS=$DPP_TMP/ids.txt
    seq 0 $((rows - 1)) >"$FAULT_IDS"
}

# fault_check_bg DELAY_MS: starts dpp-fault-check on the submitted session
# (rank 0) in the background; its output goes to $DPP_TMP/check.out.
fault_check_bg() {
    timeout -k 5 180 "$DPP_FAULT_CHECK" "$DPP_MASTER_ADDR" "$DPP_SESSION" 0 "$FAULT_IDS" "$1" \
        >"$DPP_TMP/check.out" 2>&1 &
    FAULT_CHECK_PID=$!
    dpp_track "$FAULT_CHECK_PID"
}

# fault_check_wait: waits for the checker; fails unless every epoch had 0
# missing and 0 duplicate rows.
fault_check_wait() {
    local rc=0
    wait "$FAULT_CHECK_PID" || rc=$?
    cat -- "$DPP_TMP/check.out"
    ((rc == 0)) || dpp_fail "dpp-fault-check exited $rc: rows missing, duplicated or the read failed"
    local epochs
    epochs=$(grep -c ' missing 0 duplicates 0 foreign 0 ' "$DPP_TMP/check.out" || true)
    ((epochs == 2)) || dpp_fail "expected 2 clean epochs, got $epochs"
}

# random_live_worker: the name of a random worker started by lib.sh that is
# still running.
random_live_worker() {
    local live=() n
    for n in "${DPP_DAEMON_NAMES[@]}"; do
        [[ $n == worker-* ]] && dpp_alive "$n" && live+=("$n")
    done
    echo "${live[RANDOM % ${#live[@]}]}"
}

# ms_of_log_line LINE: the ts= of a log line as milliseconds since the epoch.
ms_of_log_line() {
    local ts
    ts=$(sed -n 's/^ts=\([^ ]*\) .*/\1/p' <<<"$1")
    date -d "$ts" +%s%3N
}
