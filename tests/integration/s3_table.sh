#!/usr/bin/env bash
# TFRecord tables in an S3-compatible store (s3rver behind the
# signature-checking proxy of s3.sh, boto3 uploading): a session over
# s3://tables/... delivers what dpp-refsum reads from the same files on local
# disk, with .idx sidecars and without (the workers scan the objects), with
# two workers killed mid-epoch, and with 5% of the GETs answered 503 (retried,
# counted in dpp_storage_retries_total). An object rewritten after the
# listing fails the session with its name, never mixes two versions.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
dpp_setup s3_table
DPP_LOG_LEVEL=debug # the master's file_indexed lines say where each index came from
/usr/bin/python3 -c 'import boto3' 2>/dev/null || dpp_fail "python3-boto3 is not installed (scripts/install-deps.sh)"


local_root=$DPP_TMP/root
dpp_gen --rows 40000 --shards 3 --partitions 2 --seed 5 --index --out "$local_root/idx"
dpp_gen --rows 30000 --shards 2 --partitions 2 --seed 6 --out "$local_root/noidx"
dpp_start_s3 --hold-listings "$DPP_TMP/hold"
dpp_s3_put tables "$local_root/idx" warehouse/idx
dpp_s3_put tables "$local_root/noidx" warehouse/noidx
# A folder that is no partition and a '_' file: skipped, as on local disk.
printf 'not data' >"$DPP_TMP/junk"
/usr/bin/python3 -c '
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
for k in ("warehouse/idx/_SUCCESS", "warehouse/idx/notes/readme.txt"):
    s3.upload_file(sys.argv[1], "tables", k)' "$DPP_TMP/junk"

spec_for() { # TABLE OUT [EPOCHS]: examples/criteo.json on TABLE with small splits
    sed -e "s|\"table\": \"criteo\"|\"table\": \"$1\"|" \
        -e 's/"batch_size": 4096,/"batch_size": 1000, "split_rows": 4000,/' \
        -e "s/\"epochs\": 1,/\"epochs\": ${3:-1},/" "$DPP_SOURCE_DIR/examples/criteo.json" >"$2"
    grep -q "\"table\": \"$1\"" "$2" || dpp_fail "could not set the table in $2"
}

before=$(dpp_s3_stat requests)
dpp_start_master --data-root s3://tables/warehouse --http 127.0.0.1:0
# Its start checks the root with one page of one key, not a listing of all.
checks=$(($(dpp_s3_stat requests) - before))
[[ $checks == 1 ]] || dpp_fail "the master's start made $checks requests to check its root, expected 1"
dpp_start_worker --threads 2 --data-root s3://tables/warehouse --http 127.0.0.1:0
dpp_start_worker --threads 2 --data-root s3://tables/warehouse --http 127.0.0.1:0

dpp_step "case 1: a table with .idx sidecars and one without read whole, sums equal the local files'"
for t in idx noidx; do
    spec_for "s3://tables/warehouse/$t" "$DPP_TMP/$t.json"
    dpp_submit "$DPP_TMP/$t.json"
    dpp_read "$DPP_SESSION" "$DPP_TMP/$t.out"
    dpp_refsum_check "$DPP_TMP/$t.json" "$local_root/$t" "$DPP_TMP/$t.out"
    files=$(sed -n "s/.*session_submitted session=$DPP_SESSION .*files=\([0-9]*\).*/\1/p" "$DPP_TMP/master.log")
    want=$(find "$local_root/$t" -name '*.tfrecord' | wc -l)
    [[ $files == "$want" ]] || dpp_fail "case 1: $t: the master listed $files files, the table has $want"
    sidecars=$(grep -c "file_indexed session=$DPP_SESSION .*sidecar=1" "$DPP_TMP/master.log" || true)
    [[ $sidecars == "$([[ $t == idx ]] && echo "$want" || echo 0)" ]] ||
        dpp_fail "case 1: $t: $sidecars of $want files indexed from an .idx sidecar"
done
dpp_log "case 1: both tables exact (idx's sidecars read, noidx's $files objects scanned)"

dpp_step "case 1b: while a submit's table is listed, the master answers everyone else"
touch "$DPP_TMP/hold" # the proxy keeps listings waiting while this file exists
held=$(dpp_s3_stat held)
dpp_ctl submit "$DPP_TMP/idx.json" >"$DPP_TMP/held.out" 2>&1 &
submitter=$!
dpp_track "$submitter"
for _ in $(seq 1 600); do
    (($(dpp_s3_stat held) > held)) && break
    kill -0 "$submitter" 2>/dev/null || break
    sleep 0.05
done
(($(dpp_s3_stat held) > held)) || dpp_fail "case 1b: the submit's listing never reached the store"
# With the listing on the master's loop thread, this would wait for it.
DPP_CTL_TIMEOUT=30 dpp_ctl list >"$DPP_TMP/list.out" ||
    dpp_fail "case 1b: dppctl list got no answer while a submit's table was being listed"
kill -0 "$submitter" 2>/dev/null || dpp_fail "case 1b: the submit ended while its listing was held"
rm -f "$DPP_TMP/hold"
wait "$submitter" || dpp_fail "case 1b: the held submit failed: $(cat "$DPP_TMP/held.out")"
held_id=$(tail -n 1 "$DPP_TMP/held.out")
dpp_ctl cancel "$held_id" >/dev/null
dpp_log "case 1b: dppctl list answered while the listing was held; the submit then made $held_id"

dpp_step "case 2: two workers killed mid-epoch: every row exactly once in each of 3 epochs"
spec_for "s3://tables/warehouse/idx" "$DPP_TMP/kill.json" 3
dpp_submit "$DPP_TMP/kill.json"
dpp_read_bg "$DPP_SESSION" "$DPP_TMP/kill.out"
reader=$DPP_LAST_PID
for victim in worker-0 worker-1; do
    dpp_kill_mid_read "$reader" "$DPP_SESSION" "$victim" --threads 2 --data-root s3://tables/warehouse \
        --http 127.0.0.1:0
done
dpp_read_wait "$reader" "$DPP_TMP/kill.out"
dpp_refsum_check "$DPP_TMP/kill.json" "$local_root/idx" "$DPP_TMP/kill.out"
lost=$(grep -c 'worker_lost\|worker_timeout' "$DPP_TMP/master.log" || true)
((lost >= 2)) || dpp_fail "case 2: the master noticed $lost lost workers, expected 2"
dpp_log "case 2: exact after 2 kills"

dpp_step "case 3: 5% of GETs answered 503 (or reset, or cut short): exact, and counted"
for n in "${DPP_DAEMON_NAMES[@]}"; do [[ $n == worker-* || $n == s3proxy ]] && dpp_stop "$n"; done
dpp_start_daemon s3proxy /usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/s3proxy.py" \
    --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --stats "$DPP_S3_STATS" --fault-every 20 --fault-only-get
# the proxy's new port: the daemons started from here on use it
export AWS_ENDPOINT_URL=http://$DPP_LAST_ADDR DPP_S3_BACKOFF_BASE_MS=10
dpp_stop master
dpp_start_master --data-root s3://tables/warehouse --http 127.0.0.1:0
dpp_start_worker --threads 2 --data-root s3://tables/warehouse --http 127.0.0.1:0
dpp_start_worker --threads 2 --data-root s3://tables/warehouse --http 127.0.0.1:0
spec_for "s3://tables/warehouse/noidx" "$DPP_TMP/faults.json" 2
dpp_submit "$DPP_TMP/faults.json"
dpp_read "$DPP_SESSION" "$DPP_TMP/faults.out"
dpp_refsum_check "$DPP_TMP/faults.json" "$local_root/noidx" "$DPP_TMP/faults.out"
metric() { # DAEMON NAME: a counter's value from DAEMON's /metrics
    local port
    port=$(sed -n 's/.*http_listening .*port=\([0-9]*\).*/\1/p' "$DPP_TMP/$1.log" | tail -1)
    /usr/bin/python3 -c '
import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(int(float(line.split()[1])))' "http://127.0.0.1:$port/metrics" "$2"
}
retries=0
for d in master "${DPP_DAEMON_NAMES[@]: -2}"; do
    r=$(metric "$d" dpp_storage_retries_total)
    [[ -n $r ]] || dpp_fail "case 3: $d has no dpp_storage_retries_total"
    retries=$((retries + r))
done
faults=$(dpp_s3_stat faults)
((faults > 0)) || dpp_fail "case 3: the proxy injected no fault"
[[ $retries == "$faults" ]] || dpp_fail "case 3: $faults faults injected, dpp_storage_retries_total adds up to $retries"
[[ $(dpp_s3_stat signature_failures) == 0 ]] || dpp_fail "case 3: botocore refused a signature"
dpp_log "case 3: $faults faults over $(dpp_s3_stat requests) requests, $retries retries; exact"

dpp_step "case 4: an object rewritten after the listing fails the session, naming it"
# A table of one file; the session is listed (submitted), the file replaced,
# and only then is anything read.
mkdir -p "$DPP_TMP/one/ds=1"
cp "$(find "$local_root/noidx" -name '*.tfrecord' | head -1)" "$DPP_TMP/one/ds=1/part-0.tfrecord"
dpp_s3_put tables "$DPP_TMP/one" warehouse/one
for n in "${DPP_DAEMON_NAMES[@]}"; do [[ $n == worker-* ]] && dpp_stop "$n"; done
spec_for "s3://tables/warehouse/one" "$DPP_TMP/one.json"
dpp_submit "$DPP_TMP/one.json"
cp "$(find "$local_root/noidx" -name '*.tfrecord' | tail -1)" "$DPP_TMP/one/ds=1/part-0.tfrecord"
dpp_s3_put tables "$DPP_TMP/one" warehouse/one
dpp_start_worker --threads 1 --data-root s3://tables/warehouse
if dpp_ctl read "$DPP_SESSION" --output json >"$DPP_TMP/one.out" 2>"$DPP_TMP/one.err"; then
    dpp_fail "case 4: a session over a changed object read to the end"
fi
grep -q 'GET s3://tables/warehouse/one/ds=1/part-0.tfrecord bytes=[0-9]*-[0-9]*: changed since the session was planned (ETag "[0-9a-f]*" expected, "[0-9a-f]*" read; HTTP 206)' "$DPP_TMP/one.err" ||
    dpp_fail "case 4: $(cat "$DPP_TMP/one.err")"
[[ ! -s $DPP_TMP/one.out ]] || [[ $(grep -c '"rows"' "$DPP_TMP/one.out" || true) == 0 ]] ||
    dpp_fail "case 4: rows were delivered from a changed object"
dpp_log "case 4: $(grep -o 'GET s3://[^ ]* bytes=[0-9-]*: changed since the session was planned[^)]*)' "$DPP_TMP/one.err" | head -1)"

dpp_step "case 4b: a worker started without an s3:// root says so"
for n in "${DPP_DAEMON_NAMES[@]}"; do [[ $n == worker-* ]] && dpp_stop "$n"; done
spec_for "s3://tables/warehouse/idx" "$DPP_TMP/noroot.json"
dpp_submit "$DPP_TMP/noroot.json"
dpp_start_worker --threads 1
if dpp_ctl read "$DPP_SESSION" --output json >/dev/null 2>"$DPP_TMP/noroot.err"; then
    dpp_fail "case 4b: read through a worker without an s3:// root"
fi
grep -q 'under no s3:// data root of this worker (it has none): start it with --data-root s3://BUCKET\[/PREFIX\]' "$DPP_TMP/noroot.err" ||
    dpp_fail "case 4b: $(cat "$DPP_TMP/noroot.err")"
dpp_log "case 4b: $(grep -o 'file s3://[^;]*' "$DPP_TMP/noroot.err" | head -1)"

dpp_step "case 5: tables outside the roots, and prefixes without objects, are refused"
dpp_expect_reject "dppctl: $DPP_TMP/out.json: table \"s3://other/t\": not under an s3:// data root of this master (s3://tables/warehouse): start it with --data-root s3://BUCKET[/PREFIX] covering the table" \
    bash -c "sed 's|s3://tables/warehouse/one|s3://other/t|' '$DPP_TMP/one.json' >'$DPP_TMP/out.json' && '$DPPCTL' submit '$DPP_TMP/out.json'" ||
    dpp_fail "case 5: outside the roots"
dpp_expect_reject "dppctl: $DPP_TMP/none.json: table \"s3://tables/warehouse/none\": no objects under s3://tables/warehouse/none/" \
    bash -c "sed 's|warehouse/one|warehouse/none|' '$DPP_TMP/one.json' >'$DPP_TMP/none.json' && '$DPPCTL' submit '$DPP_TMP/none.json'" ||
    dpp_fail "case 5: no objects"
dpp_log "case 5: both refused with the table's name"

dpp_log "PASS"
