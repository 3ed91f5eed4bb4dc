#!/usr/bin/env bash
# R18: SIGTERM on a worker in the middle of its splits: it takes no new
# leases, finishes the splits it runs and delivers their blocks, then exits
# 0; what it had not started goes to the other worker. 0 missing, 0 duplicate
# rows.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup r18 "$DPP_FAULT_CHECK"

rows=30000
fault_setup $rows
dpp_start_master --data-root "$FAULT_ROOT"
dpp_start_worker --threads 1
dpp_start_worker --threads 1
dpp_submit "$FAULT_SPEC"
fault_check_bg 10

sleep 0.6
pid=$(dpp_pid_of worker-0)
t0=$(date +%s%3N)
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
t1=$(date +%s%3N)
((rc == 0)) || dpp_fail "the drained worker exited $rc"
grep -q 'worker_drained complete=1' "$DPP_TMP/worker-0.log" ||
    dpp_fail "the worker did not finish its work before exiting: $(grep worker_drained "$DPP_TMP/worker-0.log")"
fault_check_wait
dpp_log "R18: rows $rows x 2 epochs, drain took $((t1 - t0)) ms, exit 0, 0 missing, 0 duplicates"
