#!/usr/bin/env bash
# Bounded memory: a trainer that stops reading must not make the worker
# buffer the table. With --max-buffer-mb 48 and a table several times larger,
# the worker's peak RSS stays under its baseline + 48 MiB + one block being
# built, and the worker's own peak of buffered block bytes stays under the
# budget it logs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${DPP_STALL:=$DPP_BIN_DIR/tests/integration/dpp-stall-client}"
dpp_setup membound "$DPP_STALL"

budget_mb=48
root=$DPP_TMP/root
dpp_step "a table several times the worker's budget"
dpp_gen --rows 240000 --shards 2 --partitions 1 --seed 5 --out "$root/criteo"
table_mb=$(du -sm "$root/criteo" | cut -f1)
dpp_log "table: ${table_mb} MiB, worker budget: ${budget_mb} MiB"
((table_mb > 3 * budget_mb)) || dpp_fail "the table is too small to show anything"

spec=$DPP_TMP/spec.json
# Uncompressed blocks, so that every produced row costs the worker memory.
# Order "fastest": in plan order the master leases only a few splits ahead
# of a stalled client, which would never fill the worker's queue at all.
sed 's/"batch_size": 4096/"batch_size": 4096, "compression": "off", "order": "fastest"/' \
    "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"

# Under ASan freed memory waits in a quarantine and allocations carry red
# zones: keep the quarantine small and allow for the allocator's overhead.
slack_mb=16
if [[ ${DPP_SANITIZE:-OFF} == ON ]]; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"
    slack_mb=40
fi

dpp_start_master --data-root "$root"
dpp_start_worker --threads 1 --max-buffer-mb "$budget_mb" --log-level debug
wpid=${DPP_DAEMON_PIDS[-1]}
sleep 0.3
base_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$wpid/status")
dpp_log "worker baseline RSS: $((base_kb / 1024)) MiB"

dpp_submit "$spec"
dpp_step "a client that takes one batch and then stops reading for 6 s"
dpp_timeout 60 "$DPP_STALL" "$DPP_MASTER_ADDR" "$DPP_SESSION" 6 ||
    dpp_fail "the stalling client failed"

hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$wpid/status")
# One block under construction (4096 rows ~ 3.3 MiB) and allocator slack
# come on top of the budget.
limit_kb=$((base_kb + (budget_mb + slack_mb) * 1024))
dpp_log "worker peak RSS: $((hwm_kb / 1024)) MiB (limit $((limit_kb / 1024)) MiB)"
((hwm_kb <= limit_kb)) || dpp_fail "worker peak RSS $((hwm_kb / 1024)) MiB over $((limit_kb / 1024)) MiB"

dpp_step "the worker reports its peak of buffered blocks within its budget"
dpp_stop worker-0
line=$(grep -h 'worker_stopped' "$DPP_TMP/worker-0.log" | tail -n 1)
[[ -n $line ]] || dpp_fail "no worker_stopped line in the worker log"
peak=$(sed -n 's/.*buffered_peak_bytes=\([0-9]*\).*/\1/p' <<<"$line")
blocks_budget=$(sed -n 's/.*blocks_budget_bytes=\([0-9]*\).*/\1/p' <<<"$line")
dpp_log "peak buffered $peak of $blocks_budget bytes"
((peak > blocks_budget / 2)) || dpp_fail "the queue never filled: the test shows nothing"
((peak <= blocks_budget)) || dpp_fail "buffered $peak bytes, over the $blocks_budget budget"
dpp_log "PASS"
