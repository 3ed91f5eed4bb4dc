#!/usr/bin/env bash
# Faults an adversarial probe found (issue #10 of the tracker: lost rows,
# hangs, resources a cheap peer can take), each reproduced here and checked
# to be fixed. Case 1: a worker whose open-file limit is low serves a
# session while a crowd of idle connections sits on it (its connection cap
# leaves descriptors for the data files).
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup probe "$DPP_REFSUM"
command -v prlimit >/dev/null || dpp_skip "prlimit (util-linux) is not installed"

root=$DPP_TMP/root
spec=$DPP_TMP/spec.json
dpp_gen --rows 20000 --shards 4 --partitions 1 --seed 7 --index --out "$root/criteo"
sed -E 's/"epochs"[[:space:]]*:[[:space:]]*[0-9]+/"epochs": 1/' \
    "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"

dpp_step "case 1: 400 idle connections against a worker limited to 300 open files"
dpp_start_master --data-root "$root"
# prlimit execs the worker: the pid tracked is the worker's
dpp_start_daemon worker-0 prlimit --nofile=300:300 "$DPP_WORKER_BIN" \
    --master "$DPP_MASTER_ADDR" --listen 127.0.0.1:0 --threads 2
worker_addr=$DPP_LAST_ADDR
grep -q 'max_connections_lowered from=1024' "$DPP_TMP/worker-0.log" ||
    dpp_fail "the worker did not fit --max-connections to its open-file limit"
mkfifo "$DPP_TMP/crowd.in"
python3 "$DPP_SOURCE_DIR/tests/integration/hold.py" "$worker_addr" 400 \
    <"$DPP_TMP/crowd.in" >"$DPP_TMP/crowd.out" 2>&1 &
dpp_track "$!"
crowd=$!
exec {crowd_fd}>"$DPP_TMP/crowd.in"
for _ in $(seq 1 200); do
    grep -q '^open' "$DPP_TMP/crowd.out" && break
    sleep 0.05
done
grep -q '^open' "$DPP_TMP/crowd.out" || dpp_fail "the crowd did not connect"
dpp_submit "$spec"
dpp_read "$DPP_SESSION" "$DPP_TMP/read1.jsonl"
dpp_refsum_check "$spec" "$root/criteo" "$DPP_TMP/read1.jsonl"
refused=$(grep -c 'connection_refused' "$DPP_TMP/worker-0.log" || true)
((refused > 0)) || dpp_fail "the worker refused none of the crowd"
exec {crowd_fd}>&-
wait "$crowd" || true
dpp_log "case 1: $(cat "$DPP_TMP/crowd.out"), $refused refused, the session read every row"

dpp_log "PASS"
