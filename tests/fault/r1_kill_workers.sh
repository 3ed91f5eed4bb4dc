#!/usr/bin/env bash
# R1: four workers; a worker is killed with SIGKILL three times during the
# session (and a new one started each time): every row arrives exactly once
# in each epoch. Prints the time from each kill to the master re-leasing.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup r1 "$DPP_FAULT_CHECK"

rows=40000
fault_setup $rows
dpp_start_master --data-root "$FAULT_ROOT"
for _ in 1 2 3 4; do dpp_start_worker --threads 1; done
dpp_submit "$FAULT_SPEC"
fault_check_bg 15

latencies=()
for kill in 1 2 3; do
    sleep 0.5
    victim=$(random_live_worker)
    pid=$(dpp_pid_of "$victim")
    t0=$(date +%s%3N)
    kill -KILL "$pid"
    dpp_log "kill $kill: $victim (pid $pid)"
    # the master re-leases when it sees the connection drop
    line=""
    for _ in $(seq 1 100); do
        line=$(grep 'worker_lost' "$DPP_TMP/master.log" | sed -n "${kill}p" || true)
        [[ -z $line ]] || break
        sleep 0.05
    done
    [[ -n $line ]] || dpp_fail "the master never logged worker_lost after kill $kill"
    latencies+=($(($(ms_of_log_line "$line") - t0)))
    dpp_start_worker --threads 1
done
fault_check_wait
dpp_log "R1: rows $rows x 2 epochs, kills 3, reassignment latency (kill -> re-leased) ms: ${latencies[*]}"
