#!/usr/bin/env bash
# R2: a worker paused with SIGSTOP past its lease timeout, then continued.
# The master re-leases its splits to the other worker; the paused worker,
# waking, must deliver nothing under its stale leases (it fences itself after
# half the timeout without hearing from the master, and drops its work when
# it finds the master connection gone): 0 missing, 0 duplicate rows.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup r2 "$DPP_FAULT_CHECK"

rows=30000
fault_setup $rows
dpp_start_master --data-root "$FAULT_ROOT" --heartbeat-ms 200 --worker-timeout-ms 1500
dpp_start_worker --threads 1
dpp_start_worker --threads 1
dpp_submit "$FAULT_SPEC"
fault_check_bg 10

sleep 0.6
pid=$(dpp_pid_of worker-0)
kill -STOP "$pid"
t0=$(date +%s%3N)
dpp_log "SIGSTOP worker-0 (pid $pid) for 3 s, twice its lease timeout"
sleep 3
kill -CONT "$pid"
dpp_log "SIGCONT worker-0"
fault_check_wait
grep -q 'worker_timeout' "$DPP_TMP/master.log" || dpp_fail "the master never timed the worker out"
grep -q 'leases=revoked' "$DPP_TMP/worker-0.log" ||
    dpp_fail "the paused worker did not revoke its leases on waking"
line=$(grep 'worker_timeout' "$DPP_TMP/master.log" | head -n 1)
dpp_log "R2: rows $rows x 2 epochs, paused 3 s, master re-leased after $(($(ms_of_log_line "$line") - t0)) ms, 0 duplicates, stale leases revoked"
