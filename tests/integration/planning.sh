#!/usr/bin/env bash
# Planning stays linear in the number of files: a table of 20,000 one-row
# files with .idx sidecars is submitted, and what the master did to plan it
# is counted, not timed (the times belong in bench/ttfb.sh): one index task
# per file and no more, index tasks handed out many to a reply, the grants'
# scans a small multiple of the files, one journal record per file, and the
# workers' index tasks done once each. Then every row is read once.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup planning
SCRAPE=(/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/scrape.py")

files=20000
# the sanitizers make each file dearer; the counts hold at any size
[[ ${DPP_SANITIZE:-OFF} != ON ]] || files=5000
root=$DPP_TMP/root
dpp_gen --rows $files --shards $files --partitions 1 --seed 21 --index --out "$root/tiny"
spec=$DPP_TMP/spec.json
cat >"$spec" <<JSON
{"table": "tiny", "batch_size": 1000, "remainder": "keep",
 "features": {"sparse": [{"name": "row_id"}]}, "label": {"name": "label"}}
JSON

http_port() { sed -n 's/.*http_listening .*port=\([0-9]*\).*/\1/p' "$DPP_TMP/$1.log" | tail -1; }
value() { /usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1])).get(sys.argv[2], -1)))' "$1" "$2"; }

dpp_start_master --data-root "$root" --http 127.0.0.1:0
dpp_start_worker --threads 2 --http 127.0.0.1:0
dpp_start_worker --threads 2 --http 127.0.0.1:0
mport=$(http_port master)
"${SCRAPE[@]}" "http://127.0.0.1:$mport/metrics" "$DPP_TMP/before.json" >/dev/null

dpp_step "submit $files files and wait until they are planned"
t_submit=$(date +%s%3N)
dpp_submit "$spec"
for _ in $(seq 1 600); do
    dpp_ctl status "$DPP_SESSION" --output json >"$DPP_TMP/status.json" 2>/dev/null || true
    grep -q '"state":"indexing"' "$DPP_TMP/status.json" || break
    sleep 0.1
done
grep -q '"splits_per_epoch":'$files "$DPP_TMP/status.json" ||
    dpp_fail "the session is not planned into $files splits: $(cat "$DPP_TMP/status.json")"
"${SCRAPE[@]}" "http://127.0.0.1:$mport/metrics" "$DPP_TMP/planned.json" >/dev/null

delta() { echo $(($(value "$DPP_TMP/planned.json" "$1") - $(value "$DPP_TMP/before.json" "$1"))); }
index_leased=$(delta dpp_index_tasks_leased_total)
index_done=$(delta dpp_index_tasks_done_total)
replies=$(delta dpp_lease_replies_total)
scanned=$(delta dpp_lease_scan_entries_total)
records=$(delta dpp_journal_records)
worker_done=0
for w in worker-0 worker-1; do
    "${SCRAPE[@]}" "http://127.0.0.1:$(http_port $w)/metrics" "$DPP_TMP/$w.json" >/dev/null
    worker_done=$((worker_done + $(value "$DPP_TMP/$w.json" dpp_index_tasks_done_total)))
done
dpp_log "planning $files files: $index_leased index tasks leased in $replies lease replies," \
    "$index_done done ($worker_done by the workers), $scanned entries scanned by grants," \
    "$records journal records"
((index_leased == files && index_done == files && worker_done == files)) ||
    dpp_fail "expected exactly one index task per file"
# workers ask for 16 index tasks per pipeline thread: many to a reply
((replies * 8 <= files)) || dpp_fail "$replies lease replies for $files files: index tasks not batched"
# a grant looks from the first file still waiting: a linear scan overall
((scanned <= 3 * files)) || dpp_fail "grants scanned $scanned entries for $files files (quadratic?)"
# one record per file's index (written lazily: durable with the next
# commit), the session's, and a few more
((records >= files && records <= files + 16)) ||
    dpp_fail "$records journal records for $files files"

dpp_log "planned after $(( $(date +%s%3N) - t_submit )) ms"
dpp_step "read every row"
dpp_read "$DPP_SESSION" "$DPP_TMP/read.jsonl"
grep -q '"rows":'$files',' "$DPP_TMP/read.jsonl" ||
    dpp_fail "expected $files rows: $(cat "$DPP_TMP/read.jsonl")"
dpp_log "read after $(( $(date +%s%3N) - t_submit )) ms: ok"
