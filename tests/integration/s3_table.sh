#!/usr/bin/env bash
# TFRecord tables in an S3-compatible store (s3rver behind the
# signature-checking proxy of s3.sh, boto3 uploading): a session over
# s3://tables/... delivers what dpp-refsum reads from the same files on local
# disk, with .idx sidecars and without (the workers scan the objects), with
# two workers killed mid-epoch, and with 5% of the GETs answered 503 (retried,
# counted in dpp_storage_retries_total). An object rewritten after the
# listing fails the session with its name, never mixes two versions. And a
# store that lies (tests/integration/s3proxy.py's lies, each on tables of
# its own): ranges answered short, listings that repeat keys or stray from
# their prefix, answers without ETags, listings without end or dripping a
# few bytes a second.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
dpp_setup s3_table
DPP_LOG_LEVEL=debug # the master's file_indexed lines say where each index came from
/usr/bin/python3 -c 'import boto3' 2>/dev/null || dpp_fail "python3-boto3 is not installed (scripts/install-deps.sh)"


local_root=$DPP_TMP/root
dpp_gen --rows 40000 --shards 3 --partitions 2 --seed 5 --index --out "$local_root/idx"
dpp_gen --rows 30000 --shards 2 --partitions 2 --seed 6 --out "$local_root/noidx"
# The lying store's tables, of one small file each: with an .idx sidecar,
# and without ("short", which workers scan).
lies=$DPP_TMP/lies
dpp_gen --rows 2000 --shards 1 --partitions 1 --seed 9 --index --out "$lies/small"
dpp_gen --rows 2000 --shards 1 --partitions 1 --seed 10 --out "$lies/other"
mkdir -p "$lies/up"
for t in noetag forbid dup stray drip; do cp -r "$lies/small" "$lies/up/$t"; done
cp -r "$lies/other" "$lies/up/short"
# An object store that shifted a body by one byte (or a bad copy): one byte
# inserted at 1 MiB of a file without a sidecar.
dpp_gen --rows 3000 --shards 1 --partitions 1 --seed 11 --out "$lies/gapped"
gapped=$lies/gapped/ds=2026-01-01/part-00000.tfrecord
{ head -c 1048576 -- "$gapped"; printf 'X'; tail -c +1048577 -- "$gapped"; } >"$gapped.new"
mv -- "$gapped.new" "$gapped"
cp -r "$lies/gapped" "$lies/up/gapped"
part=ds=2026-01-01/part-00000.tfrecord # the one data file of each
LIES=(--short-ranges 'tables/warehouse/short/*' --no-etag 'tables/warehouse/noetag/*.tfrecord'
    --forbid 'tables/warehouse/forbid/*.tfrecord' --dup-keys tables/warehouse/dup/
    --stray-keys tables/warehouse/stray/ --endless tables/warehouse/endless/
    --endless-empty tables/warehouse/empty/ --drip tables/warehouse/drip/)
dpp_start_s3 --hold-listings "$DPP_TMP/hold" "${LIES[@]}"
dpp_s3_put tables "$lies/up" warehouse
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

# expect_refused SPEC WHAT: dppctl submit SPEC is refused, its error holding WHAT.
expect_refused() {
    if dpp_ctl submit "$1" >"$DPP_TMP/refused.out" 2>"$DPP_TMP/refused.err"; then
        dpp_fail "$1: accepted ($(cat "$DPP_TMP/refused.out")), expected a refusal holding: $2"
    fi
    grep -qF -- "$2" "$DPP_TMP/refused.err" || dpp_fail "$1: $(cat "$DPP_TMP/refused.err"); expected: $2"
    dpp_log "refused: $(cut -c1-300 "$DPP_TMP/refused.err")"
}

# expect_read_fails WHAT PATTERN: reading $DPP_SESSION fails with an error
# matching PATTERN (grep), and delivers no row.
expect_read_fails() {
    if dpp_ctl read "$DPP_SESSION" --output json >"$DPP_TMP/read.out" 2>"$DPP_TMP/read.err"; then
        dpp_fail "$1: the session read to the end"
    fi
    grep -q -- "$2" "$DPP_TMP/read.err" || dpp_fail "$1: $(cat "$DPP_TMP/read.err")"
    [[ $(grep -c '"rows"' "$DPP_TMP/read.out" || true) == 0 ]] || dpp_fail "$1: rows were delivered"
    dpp_log "$1: $(grep -o -- "$2" "$DPP_TMP/read.err" | head -1)"
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

dpp_step "case 1c: an object whose framing breaks mid-object loses only the record it broke"
# (scanned by a worker through ranged GETs, then read split by split: both
# find where records resume after the inserted byte)
spec_for s3://tables/warehouse/gapped "$DPP_TMP/gapped.json"
dpp_submit "$DPP_TMP/gapped.json"
dpp_read "$DPP_SESSION" "$DPP_TMP/gapped.out"
dpp_refsum_check "$DPP_TMP/gapped.json" "$lies/gapped" "$DPP_TMP/gapped.out" --skip-corrupt
rows=$(grep -o '"rows":[0-9]*' "$DPP_TMP/gapped.out" | head -1 | cut -d: -f2)
((rows >= 2998)) || dpp_fail "case 1c: $rows of 3000 rows delivered"
dpp_log "case 1c: $rows of 3000 rows (the record holding the byte, if any, rejected), as dpp-refsum reads them"

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
# read from the store, not from the outputs case 1 left in the workers'
# caches: those are served too fast for a worker to be killed mid-read
sed -i 's/"batch_size": 1000,/& "cache": "off",/' "$DPP_TMP/kill.json"
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
    --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --stats "$DPP_S3_STATS" --fault-every 20 --fault-only-get \
    "${LIES[@]}"
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

dpp_step "case 3b: ranges answered short (a 206 ending mid-object): read on, exact, counted"
# The proxy answers each range of "short" with at most 100,000 bytes; with
# max_reject_ratio 1 a short answer taken for the object's end would lose
# rows and still end "done".
spec_for s3://tables/warehouse/short "$DPP_TMP/short.json"
sed -i 's/"batch_size": 1000,/& "max_reject_ratio": 1,/' "$DPP_TMP/short.json"
before=$(dpp_s3_stat short_ranges)
dpp_submit "$DPP_TMP/short.json"
dpp_read "$DPP_SESSION" "$DPP_TMP/short.out"
dpp_refsum_check "$DPP_TMP/short.json" "$lies/up/short" "$DPP_TMP/short.out"
short=$(($(dpp_s3_stat short_ranges) - before)) counted=0
for d in "${DPP_DAEMON_NAMES[@]: -2}"; do
    counted=$((counted + $(metric "$d" dpp_storage_short_reads_total)))
done
# (an answer the proxy also cut, or one to a read given up when its split
# ended early, is not read on: fewer may be counted than were sent)
((short > 0)) || dpp_fail "case 3b: the proxy answered no range short"
((counted > 0 && counted <= short)) ||
    dpp_fail "case 3b: $short ranges answered short, dpp_storage_short_reads_total adds up to $counted"
dpp_log "case 3b: $short ranges answered short, $counted read on and counted; exact"

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
expect_read_fails "case 4" 'GET s3://tables/warehouse/one/ds=1/part-0.tfrecord bytes=[0-9]*-[0-9]*: changed since the session was planned (ETag "[0-9a-f]*" expected, "[0-9a-f]*" read; HTTP 206)'


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

dpp_step "case 6: a listing that repeats a key, or holds keys outside its prefix, is refused by name"
spec_for s3://tables/warehouse/dup "$DPP_TMP/dup.json"
expect_refused "$DPP_TMP/dup.json" "table \"s3://tables/warehouse/dup\": the store listed key \"warehouse/dup/$part\" twice (objects 1 and 2 of the listing)"
# "w" is shorter than the prefix: once read past its end (a heap overflow)
spec_for s3://tables/warehouse/stray "$DPP_TMP/stray.json"
expect_refused "$DPP_TMP/stray.json" "table \"s3://tables/warehouse/stray\": the store listed key \"w\" (object 1 of the listing), which is not under the prefix \"warehouse/stray/\" asked for"
dpp_alive master || dpp_fail "case 6: the master died"

dpp_step "case 7: answers without the ETag planned with, and refused reads, name request, status and ETags"
for n in "${DPP_DAEMON_NAMES[@]}"; do [[ $n == worker-* ]] && dpp_stop "$n"; done
spec_for s3://tables/warehouse/noetag "$DPP_TMP/noetag.json"
dpp_submit "$DPP_TMP/noetag.json"
# the store drops ETags and ignores If-Match for this object: rewritten now,
# only the ETag would tell the versions apart
planned=$(md5sum "$lies/small/$part" | cut -d' ' -f1)
mkdir -p "$lies/rewrite/ds=2026-01-01"
cp "$lies/other/$part" "$lies/rewrite/$part"
dpp_s3_put tables "$lies/rewrite" warehouse/noetag
dpp_start_worker --threads 1 --data-root s3://tables/warehouse
expect_read_fails "case 7: no ETag" "GET s3://tables/warehouse/noetag/$part bytes=[0-9]*-[0-9]*: the answer names no version (ETag \"$planned\" expected, none read; HTTP 206)"
spec_for s3://tables/warehouse/forbid "$DPP_TMP/forbid.json"
dpp_submit "$DPP_TMP/forbid.json"
expect_read_fails "case 7: 403" "GET s3://tables/warehouse/forbid/$part bytes=[0-9]*-[0-9]*: access denied (HTTP 403 AccessDenied: Access Denied)"

dpp_step "case 8: listings dripping 2 bytes/s hold neither a local submit nor shutdown, and stop with their submitter"
for n in "${DPP_DAEMON_NAMES[@]}"; do [[ $n == worker-* ]] && dpp_stop "$n"; done
dpp_stop master
dpp_start_master --data-root "$local_root" --data-root s3://tables/warehouse
spec_for s3://tables/warehouse/drip "$DPP_TMP/drip.json"
drips=()
for _ in 1 2 3 4; do # as many as libuv's threadpool has threads
    timeout -k 5 120 "$DPPCTL" submit "$DPP_TMP/drip.json" >/dev/null 2>&1 &
    drips+=("$!")
    dpp_track "$!"
done
for _ in $(seq 1 300); do
    (($(dpp_s3_stat dripping) >= 4)) && break
    sleep 0.1
done
(($(dpp_s3_stat dripping) >= 4)) || dpp_fail "case 8: $(dpp_s3_stat dripping) of 4 listings reached the dripping store"
spec_for idx "$DPP_TMP/local.json"
DPP_CTL_TIMEOUT=30 dpp_ctl submit "$DPP_TMP/local.json" >"$DPP_TMP/local.out" 2>&1 ||
    dpp_fail "case 8: a local table's submit got no answer while 4 listings dripped: $(cat "$DPP_TMP/local.out")"
dpp_ctl cancel "$(tail -n 1 "$DPP_TMP/local.out")" >/dev/null
kill -TERM "${drips[0]}"
dpp_wait_log master 'submit_dropped table=s3://tables/warehouse/drip .*listing=stopped'
pid=$(dpp_pid_of master)
kill -TERM "$pid"
for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
! kill -0 "$pid" 2>/dev/null || dpp_fail "case 8: the master still runs 10 s after SIGTERM, 3 listings dripping"
dpp_stop master
dpp_log "case 8: a local submit answered, a listing stopped with its submitter, the master stopped on SIGTERM"

dpp_step "case 9: a listing past its deadline, or without end, is refused naming the budget"
# (a master for each: a deadline short enough for the test would make the
# other two depend on the machine's speed)
dpp_start_master --data-root s3://tables/warehouse --s3-list-timeout 2
expect_refused "$DPP_TMP/drip.json" "LIST s3://tables/warehouse/drip/: not answered by its deadline"
grep -qF -- "within 2 s (--s3-list-max-keys, --s3-list-max-pages, --s3-list-timeout)" "$DPP_TMP/refused.err" ||
    dpp_fail "case 9: the deadline's refusal does not name the flags: $(cat "$DPP_TMP/refused.err")"
dpp_stop master
dpp_start_master --data-root s3://tables/warehouse --s3-list-max-keys 2500 --s3-list-max-pages 20
spec_for s3://tables/warehouse/endless "$DPP_TMP/endless.json"
expect_refused "$DPP_TMP/endless.json" "LIST s3://tables/warehouse/endless/: over 2500 keys (3000 in 3 pages, and the store says there are more): this master lists a table of at most 2500 keys in 20 pages within 300 s (--s3-list-max-keys, --s3-list-max-pages, --s3-list-timeout)"
spec_for s3://tables/warehouse/empty "$DPP_TMP/empty.json"
expect_refused "$DPP_TMP/empty.json" "LIST s3://tables/warehouse/empty/: over 20 pages (0 keys so far, and the store says there are more)"

dpp_log "PASS"
