#!/usr/bin/env bash
# Sessions have finite lives: a finished session is forgotten after
# --session-retention (memory, journal, metric series), and dppctl list
# says when; a live session no client attaches to within its idle timeout
# (the spec's idle_timeout_s, or --session-idle-timeout) ends as failed,
# "abandoned", journaled, while one whose client stays attached lives on;
# a stream of sessions leaves the journal bounded; a restarted master does
# not bring the forgotten back.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup lifecycle
SCRAPE=(/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/scrape.py")

root=$DPP_TMP/root
dpp_gen --rows 4000 --shards 2 --partitions 1 --seed 3 --out "$root/small"
mkdir -p "$root/empty/ds=1"
: >"$root/empty/ds=1/part-00000.tfrecord" # no records: the session is done when planned
spec() { # TABLE [EXTRA JSON KEYS]
    printf '{"table": "%s", "batch_size": 100, %s "features": {"sparse": [{"name": "row_id"}]},
 "label": {"name": "label"}}\n' "$1" "${2:-}"
}
spec small >"$DPP_TMP/small.json"
spec small '"idle_timeout_s": 2,' >"$DPP_TMP/idle.json"
spec empty >"$DPP_TMP/empty.json"

http_port() { sed -n 's/.*http_listening .*port=\([0-9]*\).*/\1/p' "$DPP_TMP/$1.log" | tail -1; }
metric() {
    "${SCRAPE[@]}" "http://127.0.0.1:$(http_port master)/metrics" "$DPP_TMP/m.json" >/dev/null
    /usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1])).get(sys.argv[2], -1)))' \
        "$DPP_TMP/m.json" "$1"
}
# gone SESSION SECS: waits until the master no longer knows SESSION
gone() {
    local deadline=$((SECONDS + $2))
    until dpp_ctl status "$1" >"$DPP_TMP/gone.out" 2>&1 && false; do
        grep -q 'no session' "$DPP_TMP/gone.out" && return 0
        ((SECONDS < deadline)) || dpp_fail "$1 is still known after ${2}s: $(cat "$DPP_TMP/gone.out")"
        sleep 0.2
    done
}

master_args=(--data-root "$root" --session-retention 2 --session-idle-timeout 600
    --journal-compact-kb 4 --http 127.0.0.1:0)
dpp_start_master "${master_args[@]}"
addr=$DPP_MASTER_ADDR
dpp_start_worker --threads 1

dpp_step "a finished session expires after --session-retention"
dpp_submit "$DPP_TMP/small.json"
done_session=$DPP_SESSION
dpp_read "$done_session" "$DPP_TMP/read.jsonl"
dpp_ctl list >"$DPP_TMP/list.out"
cat -- "$DPP_TMP/list.out"
grep -Eq "^$done_session +done .*expires in [0-9]+s" "$DPP_TMP/list.out" ||
    dpp_fail "dppctl list should say when the done session expires"
gone "$done_session" 10
(($(metric dpp_sessions_pruned_total) >= 1)) || dpp_fail "dpp_sessions_pruned_total did not move"
dpp_log "forgotten after its retention"

dpp_step "a session nobody attaches to ends as abandoned after its idle_timeout_s"
dpp_submit "$DPP_TMP/idle.json"
idle_session=$DPP_SESSION
dpp_ctl list >"$DPP_TMP/list.out"
grep -Eq "^$idle_session .*abandoned in [0-9]+s without a client" "$DPP_TMP/list.out" ||
    dpp_fail "dppctl list should say when the session will be abandoned: $(cat "$DPP_TMP/list.out")"
dpp_wait_status "$idle_session" "^$idle_session +failed .*abandoned: no client attached" 15
rc=0
dpp_ctl read "$idle_session" >"$DPP_TMP/abandoned.out" 2>&1 || rc=$?
cat -- "$DPP_TMP/abandoned.out"
((rc == 3)) && grep -q 'abandoned' "$DPP_TMP/abandoned.out" ||
    dpp_fail "reading an abandoned session should fail saying so (exit $rc)"
(($(metric dpp_sessions_abandoned_total) == 1)) || dpp_fail "dpp_sessions_abandoned_total is not 1"

dpp_step "a client that stays attached keeps the session alive past its idle timeout"
dpp_submit "$DPP_TMP/idle.json"
kept=$DPP_SESSION
"$DPP_BIN_DIR/tests/integration/dpp-stall-client" "$addr" "$kept" 5 >"$DPP_TMP/stall.out" 2>&1 &
stall=$!
dpp_track "$stall"
sleep 4
dpp_ctl status "$kept" --output json >"$DPP_TMP/kept.json"
grep -q '"state":"running"' "$DPP_TMP/kept.json" ||
    dpp_fail "the session with a client attached should still run: $(cat "$DPP_TMP/kept.json")"
wait "$stall" || dpp_fail "the stalling client failed: $(cat "$DPP_TMP/stall.out")"
dpp_ctl cancel "$kept" >/dev/null

dpp_step "a stream of sessions leaves the journal bounded"
for i in $(seq 1 200); do
    dpp_submit "$DPP_TMP/empty.json" >/dev/null
done
during=$(metric dpp_journal_bytes)
gone "$DPP_SESSION" 10
after=$(metric dpp_journal_bytes)
dpp_log "200 sessions submitted and done: journal $during bytes, $after once they expired"
# each session journals ~600 bytes: kept, 200 of them would be ~120 KB; the
# compaction after the pruning keeps only what is live
((after < 16384)) || dpp_fail "the journal holds $after bytes after 200 sessions expired"

dpp_step "a restarted master does not bring back what it forgot"
pid=$(dpp_pid_of master)
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
dpp_start_daemon master "$DPP_MASTER_BIN" --listen "$addr" --state-dir "$DPP_TMP/master-state" \
    "${master_args[@]}"
sleep 1.5
dpp_ctl list >"$DPP_TMP/list.out"
cat -- "$DPP_TMP/list.out"
for s in "$done_session" "$idle_session" "$DPP_SESSION"; do
    ! grep -q "^$s " "$DPP_TMP/list.out" || dpp_fail "$s came back after the restart"
done
dpp_log "ok"
