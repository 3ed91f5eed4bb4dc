#!/usr/bin/env bash
# R5: a trainer's client started while neither the master nor any worker
# runs (the session was submitted before the master went down): it waits for
# the master with backoff, and the session completes once the master
# (replaying its journal) and the workers come up: 0 missing, 0 duplicates.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup r5 "$DPP_FAULT_CHECK"

rows=20000
fault_setup $rows
dpp_start_master --data-root "$FAULT_ROOT"
addr=$DPP_MASTER_ADDR
dpp_submit "$FAULT_SPEC"
dpp_stop master
dpp_log "session $DPP_SESSION submitted; the master is down, no worker runs"

t0=$(date +%s%3N)
fault_check_bg 0
sleep 1.5
kill -0 "$FAULT_CHECK_PID" 2>/dev/null || dpp_fail "the client gave up before the master came up"
dpp_start_daemon master "$DPP_MASTER_BIN" --listen "$addr" \
    --state-dir "$DPP_TMP/master-state" --data-root "$FAULT_ROOT"
dpp_start_worker --threads 1
dpp_start_worker --threads 1
fault_check_wait
t1=$(date +%s%3N)
dpp_log "R5: rows $rows x 2 epochs, client started 1.5 s before the master, session done $((t1 - t0)) ms after the client started, 0 missing, 0 duplicates"
