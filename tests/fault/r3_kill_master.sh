#!/usr/bin/env bash
# R3: the master killed with SIGKILL three times mid-session and restarted
# on the same address and state dir: it replays its journal, workers and the
# client reconnect by themselves, and every row arrives exactly once in each
# epoch. A fourth kill lands while journal writes are under way (right after
# a burst of acknowledgements). The journal is compacted every few KiB, so
# replays start from snapshots too.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup r3 "$DPP_FAULT_CHECK"

rows=30000
fault_setup $rows
dpp_start_master --data-root "$FAULT_ROOT" --journal-compact-kb 1
addr=$DPP_MASTER_ADDR
dpp_start_worker --threads 1
dpp_start_worker --threads 1
dpp_submit "$FAULT_SPEC"
session=$DPP_SESSION
fault_check_bg 20

restarts=()
for kill in 1 2 3 4; do
    sleep "$([[ $kill == 4 ]] && echo 0.15 || echo 0.5)"
    pid=$(dpp_pid_of master)
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    t0=$(date +%s%3N)
    dpp_log "kill $kill: master (pid $pid)"
    # same address, same state dir: lib.sh keeps one "master" entry per start
    dpp_start_daemon master "$DPP_MASTER_BIN" --listen "$addr" \
        --state-dir "$DPP_TMP/master-state" --data-root "$FAULT_ROOT" --journal-compact-kb 1
    t1=$(date +%s%3N)
    replays=$(grep -c "journal_replayed.*sessions=1" "$DPP_TMP/master.log" || true)
    ((replays == kill)) ||
        dpp_fail "the restarted master did not replay the session: $(grep journal "$DPP_TMP/master.log")"
    restarts+=($((t1 - t0)))
done
fault_check_wait
compactions=$(grep -c journal_compacted "$DPP_TMP"/master.log || true)
((compactions > 0)) || dpp_fail "the journal was never compacted"
DPP_MASTER=$addr dpp_ctl status "$session" --output json >"$DPP_TMP/status.json"
grep -q '"state":"done"' "$DPP_TMP/status.json" ||
    dpp_fail "the session is not done after the restarts: $(cat "$DPP_TMP/status.json")"
dpp_log "R3: rows $rows x 2 epochs, master killed 4 times, restart to listening ms: ${restarts[*]}, journal compactions $compactions, 0 missing, 0 duplicates"
