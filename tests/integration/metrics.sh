#!/usr/bin/env bash
# Observability: the master and two workers serve /metrics, /healthz and
# /readyz (--http). Scrapes during a session parse with prometheus_client's
# parser and the format rules (scrape.py), and the counters move: splits
# leased and done, rows read and emitted, bytes, stage seconds, the trainer
# wait histogram and the session's starvation ratio; /readyz follows a
# worker's registration and drain.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup metrics
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null ||
    dpp_fail "python3-prometheus-client is missing (scripts/install-deps.sh installs it)"
SCRAPE=(/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/scrape.py")

root=$DPP_TMP/root
dpp_gen --rows 60000 --shards 4 --partitions 1 --seed 11 --out "$root/criteo"
spec=$DPP_TMP/spec.json
cat >"$spec" <<JSON
{
  "table": "criteo", "batch_size": 500, "split_rows": 2000, "epochs": 2, "remainder": "keep",
  "features": {
    "dense": [{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}, {"op": "log1p"}]}],
    "sparse": [{"name": "row_id"}, {"name": "c1", "transforms": [{"op": "modulo", "n": 1000}]}]
  },
  "label": {"name": "label"}
}
JSON

http_port() { sed -n 's/.*http_listening .*port=\([0-9]*\).*/\1/p' "$DPP_TMP/$1.log" | tail -1; }
get() { /usr/bin/python3 -c '
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5); print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())' "$1"; }
value() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], -1))' "$1" "$2"; }

dpp_start_master --data-root "$root" --http 127.0.0.1:0
dpp_start_worker --threads 1 --http 127.0.0.1:0
dpp_start_worker --threads 1 --http 127.0.0.1:0
mport=$(http_port master)
w0=$(http_port worker-0)
w1=$(http_port worker-1)
[[ -n $mport && -n $w0 && -n $w1 ]] || dpp_fail "a daemon did not log its http port"

dpp_step "health and readiness"
[[ $(get "http://127.0.0.1:$mport/healthz") == "200 ok" ]] || dpp_fail "master /healthz"
[[ $(get "http://127.0.0.1:$mport/readyz") == "200 ready" ]] || dpp_fail "master /readyz"
for _ in $(seq 1 50); do
    [[ $(get "http://127.0.0.1:$w0/readyz") == "200 ready" ]] && break
    sleep 0.1
done
[[ $(get "http://127.0.0.1:$w0/readyz") == "200 ready" ]] || dpp_fail "worker /readyz once registered"
[[ $(get "http://127.0.0.1:$w0/nope") == "404 not found" ]] || dpp_fail "unknown path"

dpp_step "scrapes before, during and after a session"
"${SCRAPE[@]}" "http://127.0.0.1:$mport/metrics" "$DPP_TMP/m0.json" >/dev/null ||
    dpp_fail "the master's idle metrics do not parse"
dpp_submit "$spec"
seq 0 59999 >"$DPP_TMP/ids"
# a slow trainer (20 ms per batch), so that the session is running while we scrape
timeout -k 5 120 "$DPP_BIN_DIR/tests/fault/dpp-fault-check" "$DPP_MASTER_ADDR" "$DPP_SESSION" 0 \
    "$DPP_TMP/ids" 20 >"$DPP_TMP/reader.out" 2>&1 &
reader=$!
dpp_track "$reader"
sleep 2.5
"${SCRAPE[@]}" "http://127.0.0.1:$mport/metrics" "$DPP_TMP/m1.json" >"$DPP_TMP/m1.txt" ||
    { cat "$DPP_TMP/m1.txt"; dpp_fail "the master's metrics do not parse"; }
"${SCRAPE[@]}" "http://127.0.0.1:$w0/metrics" "$DPP_TMP/w1.json" >"$DPP_TMP/w1.txt" ||
    { cat "$DPP_TMP/w1.txt"; dpp_fail "the worker's metrics do not parse"; }
"${SCRAPE[@]}" "http://127.0.0.1:$w1/metrics" "$DPP_TMP/w1b.json" >/dev/null
ratio=$(value "$DPP_TMP/m1.json" "dpp_session_starvation_ratio{session=\"$DPP_SESSION\"}")
python3 -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 0 <= r <= 1 else 1)" "$ratio" ||
    dpp_fail "no starvation ratio for the running session: $ratio"
grep -q "^dpp_trainer_wait_seconds_bucket{le=\"+Inf\",rank=\"0\",session=\"$DPP_SESSION\"}" \
    "$DPP_TMP/m1.txt" || dpp_fail "no trainer wait histogram for rank 0"
wait "$reader" || { cat "$DPP_TMP/reader.out"; dpp_fail "the reader failed"; }
"${SCRAPE[@]}" "http://127.0.0.1:$mport/metrics" "$DPP_TMP/m2.json" >"$DPP_TMP/m2.txt"
"${SCRAPE[@]}" "http://127.0.0.1:$w0/metrics" "$DPP_TMP/w2.json" >"$DPP_TMP/w2.txt"
"${SCRAPE[@]}" "http://127.0.0.1:$w1/metrics" "$DPP_TMP/w2b.json" >"$DPP_TMP/w2b.txt"

# counter moved name FILE_BEFORE FILE_AFTER: strictly greater after
moved() {
    local a b
    a=$(value "$2" "$1")
    b=$(value "$3" "$1")
    python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) > max(float(sys.argv[1]), 0) else 1)" \
        "$a" "$b" || dpp_fail "$1 did not move: $a -> $b"
    dpp_log "$1: $a -> $b"
}
moved dpp_splits_leased_total "$DPP_TMP/m0.json" "$DPP_TMP/m2.json"
moved dpp_splits_done_total "$DPP_TMP/m1.json" "$DPP_TMP/m2.json"
moved dpp_rows_produced_total "$DPP_TMP/m1.json" "$DPP_TMP/m2.json"
moved dpp_lease_latency_seconds_count "$DPP_TMP/m0.json" "$DPP_TMP/m2.json"
# the workers' counters, summed over both (either may have taken the later splits)
python3 - "$DPP_TMP" <<'PY' || dpp_fail "the workers' counters did not move"
import json, sys
d = sys.argv[1]
load = lambda f: json.load(open("%s/%s" % (d, f)))
before, after = [load("w1.json"), load("w1b.json")], [load("w2.json"), load("w2b.json")]
for name in ["dpp_rows_emitted_total", "dpp_bytes_read_total", "dpp_bytes_emitted_total",
             'dpp_pipeline_stage_seconds_total{stage="decode"}', "dpp_splits_done_total"]:
    a, b = sum(x.get(name, 0) for x in before), sum(x.get(name, 0) for x in after)
    print("metrics: workers' %s: %s -> %s" % (name, a, b))
    if not b > a:
        sys.exit(1)
PY
# every row of both epochs was produced by one worker or the other
rows=$(python3 -c 'import json,sys; print(int(sum(json.load(open(f))["dpp_rows_produced_total"] for f in sys.argv[1:])))' \
    "$DPP_TMP/w2.json" "$DPP_TMP/w2b.json")
((rows >= 120000)) || dpp_fail "the workers produced $rows rows of 120000"
batches=$(value "$DPP_TMP/m2.json" "dpp_trainer_batches_total{rank=\"0\",session=\"$DPP_SESSION\"}")
dpp_log "trainer batches reported: $batches of 240, starvation ratio while running: $ratio"
grep -q '^dpp_build_info{role="master",version="' "$DPP_TMP/m2.txt" || dpp_fail "no dpp_build_info"
grep -q '^dpp_sessions{state="done"} 1' "$DPP_TMP/m2.txt" || dpp_fail "the session is not counted done"
# the process families under Prometheus' standard names, on both daemons,
# with values that can be true of the process (checked against its /proc)
for d in master:m2 worker-0:w2; do
    name=${d%%:*}
    python3 - "$DPP_TMP/${d#*:}.json" "$(dpp_pid_of "$name")" "$name" <<'PY' ||
import json, os, sys, time
m, pid, name = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
rss = int(open("/proc/%d/statm" % pid).read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
fds = len(os.listdir("/proc/%d/fd" % pid))
checks = {
    "process_cpu_seconds_total": lambda v: 0 < v < 3600,
    "process_resident_memory_bytes": lambda v: 0.25 * rss < v < 4 * rss,
    "process_virtual_memory_bytes": lambda v: v >= m["process_resident_memory_bytes"],
    "process_open_fds": lambda v: 3 <= v <= fds + 64,
    "process_max_fds": lambda v: v >= m["process_open_fds"],
    "process_start_time_seconds": lambda v: time.time() - 600 < v <= time.time(),
}
bad = [k for k, ok in checks.items() if k not in m or not ok(m[k])]
print("metrics: %s: %s" % (name, ", ".join("%s %s" % (k, m.get(k)) for k in checks)))
sys.exit(1 if bad else 0)
PY
        dpp_fail "$name: the process_* metrics are missing or wrong"
done

dpp_step "a worker that cannot reach its master is alive but not ready"
saved=$DPP_MASTER_ADDR
DPP_MASTER_ADDR=127.0.0.1:1 dpp_start_worker --threads 1 --http 127.0.0.1:0
DPP_MASTER_ADDR=$saved
w2=$(http_port worker-2)
[[ $(get "http://127.0.0.1:$w2/healthz") == "200 ok" ]] || dpp_fail "worker-2 /healthz"
[[ $(get "http://127.0.0.1:$w2/readyz") == "503 not registered with the master" ]] ||
    dpp_fail "worker-2 says it is ready without a master"
"${SCRAPE[@]}" "http://127.0.0.1:$w2/metrics" "$DPP_TMP/w3.json" >/dev/null
[[ $(value "$DPP_TMP/w3.json" dpp_worker_registered) == 0.0 ]] || dpp_fail "dpp_worker_registered"
dpp_log "PASS"
