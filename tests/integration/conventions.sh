#!/usr/bin/env bash
# Sessions that tell the truth (issue #14 of the tracker): the ordinary
# mistakes of a new user end loudly, with texts that say what to do.
# Case 1: a misspelt label, dense or sparse feature fails the session with
# the feature named and "did you mean"; `read` and `status` exit 3; a
# feature marked "optional" may be absent. Case 2: a table whose records
# lack a dense value now and then: over max_reject_ratio the session fails
# with the reason and the first record; a fill_missing or a higher ratio
# lets it through. Case 3: reading a finished session ends at once, exit 0
# (-o json: one line saying so); its status reads as finished, without
# rates or waits; case 3b: an unread session says it waits for a reader, a
# cancelled unbounded one shows its epoch as N/unbounded.
# Case 4: Ctrl-C during `read` releases the rank; a new read goes on where
# it stopped and `status` counts the takeover. Case 5: connection errors
# (refused, DNS, not an address), unknown sessions, ranks out of range.
# Case 6: CLI habits: --version on every binary, -o json, `help CMD` and
# `CMD --help`, epochs counted from 0; validate and submit name every
# problem of a spec, each with its JSON path. Case 7: `dppctl validate --table`
# finds the mistakes of cases 1 and 2 and wrong types in a sample of the
# table, for TFRecord and Parquet, before a session runs; `submit --table`
# submits nothing then.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup conventions "$DPP_REFSUM"

root=$DPP_TMP/root
dpp_gen --rows 3000 --shards 1 --partitions 1 --seed 5 --complete --out "$root/clean"
dpp_gen --rows 20000 --shards 2 --partitions 1 --seed 6 --nulls --out "$root/holes"
dpp_start_master --data-root "$root"
dpp_start_worker --threads 2

# spec FILE TABLE LABEL DENSE SPARSE [EXTRA_TOP_LEVEL_JSON]: a spec reading
# one dense and one sparse feature (DENSE and SPARSE are JSON objects).
spec() {
    cat >"$1" <<EOF
{"table": "$2", "batch_size": 100, "remainder": "keep",${6:-}
 "features": {"dense": [$4], "sparse": [$5]}, "label": {"name": "$3"}}
EOF
}

# expect_line FILE TEXT: FILE holds the line TEXT, exactly.
expect_line() {
    grep -qxF -- "$2" "$1" || dpp_fail "expected the line
  $2
in $1, which holds:
$(cat -- "$1")"
}

# read_fails SPEC EXPECTED: the session of SPEC fails; dppctl read exits 3
# printing EXPECTED, and dppctl status exits 3 showing the error.
read_fails() {
    local spec=$1 expected=$2 rc=0
    dpp_submit "$spec"
    dpp_ctl read "$DPP_SESSION" >"$DPP_TMP/fail.out" 2>"$DPP_TMP/fail.err" || rc=$?
    ((rc == 3)) || dpp_fail "read of $spec exited $rc, expected 3: $(cat "$DPP_TMP/fail.err")"
    expect_line "$DPP_TMP/fail.err" "dppctl: read $DPP_SESSION: session failed: $expected"
    rc=0
    dpp_ctl status "$DPP_SESSION" >"$DPP_TMP/fail.status" 2>&1 || rc=$?
    ((rc == 3)) || dpp_fail "status of the failed session $DPP_SESSION exited $rc, expected 3"
    expect_line "$DPP_TMP/fail.status" "  error: $expected"
    dpp_log "$(basename "$spec"): $expected"
}

dpp_step "case 1: misspelt features"
i1='{"name": "i1"}'
c1='{"name": "c1"}'
spec "$DPP_TMP/label.json" clean lable "$i1" "$c1"
read_fails "$DPP_TMP/label.json" \
    'feature "lable" (the label) is in none of the 3000 records of epoch 0: fix its name in the spec; did you mean "label"?'
spec "$DPP_TMP/dense.json" clean label '{"name": "i_1"}' "$c1"
read_fails "$DPP_TMP/dense.json" \
    'feature "i_1" (a dense feature) is in none of the 3000 records of epoch 0: fix its name in the spec (or, if it may be missing from every record, mark it "optional": true and give it a fill_missing transform); did you mean "i1"?'
spec "$DPP_TMP/sparse.json" clean label "$i1" '{"name": "C1"}'
read_fails "$DPP_TMP/sparse.json" \
    'feature "C1" (a sparse feature) is in none of the 3000 records of epoch 0: fix its name in the spec (or mark it "optional": true if it may be missing from every record); did you mean "c1"?'
# a name near nothing: what the records hold is listed
spec "$DPP_TMP/far.json" clean label "$i1" '{"name": "clicks"}'
dpp_submit "$DPP_TMP/far.json"
rc=0
dpp_ctl read "$DPP_SESSION" >/dev/null 2>"$DPP_TMP/far.err" || rc=$?
((rc == 3)) && grep -qF 'record) (the records hold: row_id, label, i1, i2, ' "$DPP_TMP/far.err" ||
    dpp_fail "case 1: a far name did not list the record's features (exit $rc): $(cat "$DPP_TMP/far.err")"
spec "$DPP_TMP/optional.json" clean label "$i1" '{"name": "C1", "optional": true}'
dpp_submit "$DPP_TMP/optional.json"
dpp_read "$DPP_SESSION" "$DPP_TMP/optional.jsonl"
grep -q '"epoch":0,"rows":3000,' "$DPP_TMP/optional.jsonl" ||
    dpp_fail "case 1: an optional absent feature did not deliver every row: $(cat "$DPP_TMP/optional.jsonl")"
dpp_wait_done "$DPP_SESSION"
optional_session=$DPP_SESSION

dpp_step "case 2: rejected records over max_reject_ratio"
# --nulls leaves i1 out of 1 record in 32: 3% of the records are rejected
spec "$DPP_TMP/holes.json" holes label "$i1" "$c1"
dpp_submit "$DPP_TMP/holes.json"
rc=0
dpp_ctl read "$DPP_SESSION" >/dev/null 2>"$DPP_TMP/holes.err" || rc=$?
((rc == 3)) || dpp_fail "case 2: the read exited $rc, expected 3: $(cat "$DPP_TMP/holes.err")"
grep -Eq "^dppctl: read $DPP_SESSION: session failed: rejected [0-9]+ of [0-9]+ records \(3\.[0-9]%\), more than the spec's max_reject_ratio 0\.01 \(missing feature [0-9]+\); the first: file ds=2026-01-01/part-0000[01]\.tfrecord, record at offset [0-9]+: missing feature \"i1\"\$" \
    "$DPP_TMP/holes.err" || dpp_fail "case 2: the failure does not say why: $(cat "$DPP_TMP/holes.err")"
dpp_log "case 2: $(cut -c1-200 "$DPP_TMP/holes.err")"
spec "$DPP_TMP/holes-ratio.json" holes label "$i1" "$c1" ' "max_reject_ratio": 0.05,'
spec "$DPP_TMP/holes-fill.json" holes label \
    '{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}]}' "$c1"
for s in holes-ratio holes-fill; do
    dpp_submit "$DPP_TMP/$s.json"
    dpp_read "$DPP_SESSION" "$DPP_TMP/$s.jsonl"
    dpp_wait_done "$DPP_SESSION"
done
dpp_refsum_check "$DPP_TMP/holes-fill.json" "$root/holes" "$DPP_TMP/holes-fill.jsonl"
rows=$(sed -n 's/.*"rows":\([0-9]*\).*/\1/p' "$DPP_TMP/holes-ratio.jsonl")
((rows > 19000 && rows < 20000)) ||
    dpp_fail "case 2: with max_reject_ratio 0.05, $rows rows of 20000 were read"
dpp_log "case 2: max_reject_ratio 0.05 read $rows rows; fill_missing read all, checked by dpp-refsum"

dpp_step "case 3: reading a finished session"
t0=$(date +%s%N)
rc=0
dpp_ctl read "$optional_session" >"$DPP_TMP/again.out" 2>"$DPP_TMP/again.err" || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
((rc == 0)) || dpp_fail "case 3: reading a done session exited $rc: $(cat "$DPP_TMP/again.err")"
expect_line "$DPP_TMP/again.err" \
    "dppctl: read $optional_session: the session is done: nothing is left to read for rank 0"
((ms < 5000)) || dpp_fail "case 3: reading a done session took $ms ms"
dpp_ctl read "$optional_session" -o json >"$DPP_TMP/again.json" 2>/dev/null
python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).read()); assert d == {"session": sys.argv[2], "rank": 0, "state": "done", "epochs_read": 0, "rows": 0}, d' \
    "$DPP_TMP/again.json" "$optional_session" ||
    dpp_fail "case 3: read -o json of a done session printed: $(cat "$DPP_TMP/again.json")"
# a finished session's status: how long it ran, no rates, waits or ETAs
dpp_ctl status "$optional_session" >"$DPP_TMP/done.status"
grep -Eq '^  planned in [0-9.]+ s  ran [0-9.]+ s  expires in ' "$DPP_TMP/done.status" ||
    dpp_fail "case 3: the done session's second line: $(cat "$DPP_TMP/done.status")"
grep -Eq '^  rank 0 +\[#+\] +([0-9]+)/\1 +splits  [1-9][0-9]* batches$' "$DPP_TMP/done.status" ||
    dpp_fail "case 3: the done session's rank line: $(cat "$DPP_TMP/done.status")"
! grep -Eq 'splits/s|wait|ETA|no client' "$DPP_TMP/done.status" ||
    dpp_fail "case 3: a done session shows rates or waits: $(cat "$DPP_TMP/done.status")"
dpp_log "case 3: ended in $ms ms; status: $(sed -n 2p "$DPP_TMP/done.status")"

dpp_step "case 3b: a session nobody reads yet, then cancelled"
spec "$DPP_TMP/forever.json" clean label '{"name": "i1"}' "$c1" ' "epochs": "unbounded",'
dpp_submit "$DPP_TMP/forever.json"
forever=$DPP_SESSION
dpp_ctl status "$forever" >"$DPP_TMP/forever.status"
grep -Eq '^  (planned in [0-9.]+ s  )?waiting for a reader \(dppctl read, dpp.Client\)' "$DPP_TMP/forever.status" ||
    dpp_fail "case 3b: an unread session: $(cat "$DPP_TMP/forever.status")"
grep -Eq '^  rank 0 .* wait +-  ETA -  \(no client\)$' "$DPP_TMP/forever.status" ||
    dpp_fail "case 3b: the rank nobody reads: $(cat "$DPP_TMP/forever.status")"
dpp_ctl cancel "$forever" >/dev/null
dpp_ctl status "$forever" >"$DPP_TMP/forever.status" || true
grep -Eq "^session $forever +cancelled +table clean +epoch 0/unbounded " "$DPP_TMP/forever.status" ||
    dpp_fail "case 3b: the cancelled session: $(head -n 1 "$DPP_TMP/forever.status")"
dpp_log "case 3b: $(head -n 1 "$DPP_TMP/forever.status")"

dpp_step "case 4: Ctrl-C during read, then a new read"
dpp_gen --rows 20000 --shards 4 --partitions 1 --seed 8 --out "$root/long"
spec "$DPP_TMP/long.json" long label '{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}]}' \
    "$c1" ' "epochs": 40, "split_rows": 1000,'
dpp_submit "$DPP_TMP/long.json"
long=$DPP_SESSION
"$DPPCTL" read "$long" --output json >"$DPP_TMP/first.jsonl" 2>"$DPP_TMP/first.err" &
reader=$!
dpp_track "$reader"
for _ in $(seq 1 600); do
    grep -q '"epoch":0,' "$DPP_TMP/first.jsonl" && break
    sleep 0.05
done
kill -INT "$reader"
rc=0
wait "$reader" || rc=$?
((rc == 130)) || dpp_fail "case 4: read stopped by SIGINT exited $rc, expected 130: $(cat "$DPP_TMP/first.err")"
grep -Eq "^dppctl: read $long: stopped by SIGINT after [0-9]+ batches of epoch [0-9]+; rank 0 was released: another read of it goes on where this one stopped \(the split it was in comes again\)\$" \
    "$DPP_TMP/first.err" || dpp_fail "case 4: no clear word on SIGINT: $(cat "$DPP_TMP/first.err")"
done_epochs=$(grep -c '"epoch":' "$DPP_TMP/first.jsonl")
((done_epochs < 40)) || dpp_fail "case 4: the first read finished all 40 epochs before SIGINT"
DPP_CTL_TIMEOUT=200 dpp_read "$long" "$DPP_TMP/second.jsonl"
first=$(sed -n '1s/.*"epoch":\([0-9]*\).*/\1/p' "$DPP_TMP/second.jsonl")
((first == done_epochs)) ||
    dpp_fail "case 4: the second read began at epoch $first, the first had finished $done_epochs"
# the epochs after the one interrupted are whole
tail -n 1 "$DPP_TMP/second.jsonl" | grep -q '"epoch":39,"rows":20000,' ||
    dpp_fail "case 4: the last epoch is not whole: $(tail -n 1 "$DPP_TMP/second.jsonl")"
dpp_ctl status "$long" >"$DPP_TMP/long.status"
grep -Eq '^  taken over 1 time from a reader that was gone: at most [0-9]+ rows came a second time' "$DPP_TMP/long.status" ||
    dpp_fail "case 4: status does not count the takeover: $(cat "$DPP_TMP/long.status")"
dpp_log "case 4: SIGINT after $done_epochs epochs; the second read went on at epoch $first; $(grep 'taken over' "$DPP_TMP/long.status")"

dpp_step "case 5: connection errors, unknown sessions and ranks"
hint="set --master HOST:PORT or DPP_MASTER to the master's --listen address"
dpp_expect_reject "dppctl: master 127.0.0.1:1: connection refused: nothing listens there. Is the master running? If so, $hint" \
    "$DPPCTL" --master 127.0.0.1:1 list || dpp_fail "case 5: connection refused"
dpp_expect_reject "dppctl: master nosuch.invalid:7000: the host name does not resolve (DNS): check its spelling, or $hint" \
    "$DPPCTL" --master nosuch.invalid:7000 list || dpp_fail "case 5: DNS"
dpp_expect_reject "dppctl: master 7000: not an address: expected HOST:PORT or [V6]:PORT; $hint" \
    "$DPPCTL" --master 7000 list || dpp_fail "case 5: not an address"
dpp_expect_reject "dppctl: read snosuch: no session \"snosuch\" on this master (dppctl list shows its sessions; a finished one is forgotten after --session-retention)" \
    "$DPPCTL" read snosuch || dpp_fail "case 5: unknown session"
dpp_expect_reject "dppctl: read $long: rank 3 is out of range: session $long has 1 consumer (ranks 0 to 0)" \
    "$DPPCTL" read "$long" --rank 3 || dpp_fail "case 5: rank out of range"

dpp_step "case 6: CLI habits"
for b in "$DPPCTL" "$DPP_MASTER_BIN" "$DPP_WORKER_BIN" "$DPP_GEN"; do
    "$b" --version >"$DPP_TMP/version" || dpp_fail "case 6: $b --version failed"
    grep -Eqx "$(basename "$b") [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+|unknown), [A-Za-z]+\)" \
        "$DPP_TMP/version" || dpp_fail "case 6: $b --version says: $(cat "$DPP_TMP/version")"
done
"$DPPCTL" help status >"$DPP_TMP/help1"
"$DPPCTL" status --help >"$DPP_TMP/help2"
head -n 1 "$DPP_TMP/help1" | grep -q '^usage: dppctl status ' ||
    dpp_fail "case 6: dppctl help status: $(head -n 1 "$DPP_TMP/help1")"
cmp -s "$DPP_TMP/help1" "$DPP_TMP/help2" || dpp_fail "case 6: help status and status --help differ"
dpp_expect_reject 'dppctl: unknown command "stauts"; did you mean "status"? (commands: validate, submit, status, list, workers, cancel, read, index, help, version); dppctl help tells more' "$DPPCTL" stauts ||
    dpp_fail "case 6: a misspelt command"
dpp_ctl status "$long" -o json >"$DPP_TMP/long.json.out"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["state"] == "done" and d["epoch"] == 39 and d["epochs_done"] == 40 and d["takeovers"] == 1, d' \
    "$DPP_TMP/long.json.out" || dpp_fail "case 6: status -o json: $(cat "$DPP_TMP/long.json.out")"
grep -Eq "^session $long +done +table long +epoch 40/40 " "$DPP_TMP/long.status" ||
    dpp_fail "case 6: epochs in status text: $(head -n 1 "$DPP_TMP/long.status")"
dpp_ctl list -o json >"$DPP_TMP/list.json"
python3 -c 'import json, sys; assert len(json.load(open(sys.argv[1]))) >= 9' "$DPP_TMP/list.json" ||
    dpp_fail "case 6: list -o json: $(head -c 300 "$DPP_TMP/list.json")"

# every problem of a spec, each with its JSON path: from validate (offline)
# and from the master's answer to submit
cat >"$DPP_TMP/two.json" <<'EOF'
{"table": "clean", "batch_sise": 8,
 "features": {"dense": [{"name": "i1", "transforms": [{"op": "log1pp"}]}]}}
EOF
p1='batch_sise: unknown key; did you mean "batch_size"?'
p2='features.dense[0].transforms[0].op: unknown op "log1pp"; did you mean "log1p"? (ops of dense features: fill_missing, clamp, log1p, standardize, bucketize, cast)'
for cmd in validate submit; do
    dpp_expect_reject "dppctl: $DPP_TMP/two.json: $p1" "$DPPCTL" "$cmd" "$DPP_TMP/two.json" ||
        dpp_fail "case 6: $cmd of a spec with two mistakes"
    grep -Fxq -- "dppctl: $DPP_TMP/two.json: $p2" "$DPP_TMP/reject.err" ||
        dpp_fail "case 6: $cmd named the first mistake only: $(cat "$DPP_TMP/reject.err")"
done
grep -Fxq -- "dppctl: $DPP_TMP/two.json: 3 problems" <("$DPPCTL" validate "$DPP_TMP/two.json" 2>&1) ||
    dpp_fail "case 6: validate did not count the problems (batch_sise, batch_size required, log1pp)"

dpp_step "case 7: validate --table, before any session"
# validate_table SPEC DIR EXIT [EXTRA...]: dppctl validate SPEC --table DIR
# (no master anywhere) exits EXIT; stdout and stderr in v.out and v.err.
validate_table() {
    local spec=$1 dir=$2 want=$3 rc=0
    shift 3
    env -u DPP_MASTER "$DPPCTL" validate "$spec" --table "$dir" "$@" >"$DPP_TMP/v.out" \
        2>"$DPP_TMP/v.err" || rc=$?
    ((rc == want)) || dpp_fail "case 7: validate $(basename "$spec") --table $dir exited $rc, expected $want:
$(cat "$DPP_TMP/v.out" "$DPP_TMP/v.err")"
}
sampled="1000 records sampled from 1 of the table's 1 files"
validate_table "$DPP_TMP/label.json" "$root/clean" 1
expect_line "$DPP_TMP/v.err" "dppctl: $DPP_TMP/label.json: feature \"lable\" (the label) is in none of the $sampled: fix its name in the spec; did you mean \"label\"?"
validate_table "$DPP_TMP/sparse.json" "$root/clean" 1
expect_line "$DPP_TMP/v.err" "dppctl: $DPP_TMP/sparse.json: feature \"C1\" (a sparse feature) is in none of the $sampled: fix its name in the spec (or mark it \"optional\": true if it may be missing from every record); did you mean \"c1\"?"
validate_table "$DPP_TMP/optional.json" "$root/clean" 0
expect_line "$DPP_TMP/v.out" "$DPP_TMP/optional.json: table $root/clean: $sampled; every feature found, with values its transforms take"
# the holes of case 2: 1 record in 32 lacks i1
validate_table "$DPP_TMP/holes.json" "$root/holes" 1
grep -Eqx "dppctl: $DPP_TMP/holes.json: feature \"i1\" \(a dense feature\) is missing from [0-9]+ of 1000 sampled records \([0-9.]+%\), which are rejected \(give it a fill_missing transform, or drop them with a require filter\); the first: file ds=2026-01-01/part-00000.tfrecord, record at offset [0-9]+" \
    "$DPP_TMP/v.err" || dpp_fail "case 7: the holes are not named: $(cat "$DPP_TMP/v.err")"
grep -Eqx "dppctl: $DPP_TMP/holes.json: [0-9]+ of the 1000 sampled records \([0-9.]+%\) would be rejected, more than the spec's max_reject_ratio 0.01: a session would fail" \
    "$DPP_TMP/v.err" || dpp_fail "case 7: no verdict on the reject ratio: $(cat "$DPP_TMP/v.err")"
validate_table "$DPP_TMP/holes-ratio.json" "$root/holes" 0
grep -Eq "^note: feature \"i1\" \(a dense feature\) is missing from [0-9]+ of 1000 sampled records" "$DPP_TMP/v.out" &&
    grep -Eq "; [0-9]+ \([0-9.]+%\) would be rejected\$" "$DPP_TMP/v.out" ||
    dpp_fail "case 7: within max_reject_ratio 0.05, no note: $(cat "$DPP_TMP/v.out")"
# types: strings where numbers go, numbers where strings go, a list of 1-8
# ids as a dense value, weights that do not pair with their ids
dpp_gen --rows 400 --shards 2 --partitions 2 --seed 9 --strings --complete --out "$root/strs"
spec "$DPP_TMP/types.json" strs label '{"name": "s1"}, {"name": "c2"}' \
    '{"name": "i1"}, {"name": "c1", "transforms": [{"op": "vocab", "file": "v.txt"}]}, {"name": "c3", "weights": "i2"}'
validate_table "$DPP_TMP/types.json" "$root/strs" 1 --sample 400
first="the first (file ds=2026-01-01/part-00000.tfrecord, record at offset 0)"
expect_line "$DPP_TMP/v.err" "dppctl: $DPP_TMP/types.json: feature \"s1\" (a dense feature): 400 of 400 sampled records would be rejected; $first holds strings, and a dense feature takes numbers (floats or integers): make it a sparse feature whose transforms start with \"hash\" or \"vocab\""
grep -Eqx "dppctl: $DPP_TMP/types.json: feature \"c2\" \(a dense feature\): [0-9]+ of 400 sampled records would be rejected; the first \(file ds=2026-0[12]-0[12]/part-0000[01].tfrecord, record at offset [0-9]+\) holds [2-8] values where the spec's dim is 1" \
    "$DPP_TMP/v.err" || dpp_fail "case 7: a dense list not named: $(cat "$DPP_TMP/v.err")"
expect_line "$DPP_TMP/v.err" "dppctl: $DPP_TMP/types.json: feature \"i1\" (a sparse feature): 400 of 400 sampled records would be rejected; $first holds floats, and a sparse feature takes integer ids (or strings, through a \"hash\" or \"vocab\" op)"
expect_line "$DPP_TMP/v.err" "dppctl: $DPP_TMP/types.json: feature \"c1\" (a sparse feature): 400 of 400 sampled records would be rejected; $first holds integers, and a vocab op maps strings: use \"hash\" or \"modulo\" for ids"
grep -Eqx "dppctl: $DPP_TMP/types.json: feature \"i2\" \(a sparse feature's weights\): [0-9]+ of 400 sampled records would be rejected; the first \(.*\) holds 1 weights for the [2-8] ids of \"c3\"" \
    "$DPP_TMP/v.err" || dpp_fail "case 7: unpaired weights not named: $(cat "$DPP_TMP/v.err")"
# the same holes in Parquet, and a fill_missing that fills them
dpp_gen --rows 4000 --shards 2 --partitions 1 --seed 6 --nulls --format parquet --out "$root/pq"
spec "$DPP_TMP/pq.json" pq label "$i1" "$c1" ' "format": "parquet",'
validate_table "$DPP_TMP/pq.json" "$root/pq" 1
grep -Eq "^dppctl: $DPP_TMP/pq.json: feature \"i1\" \(a dense feature\) is missing from [0-9]+ of 1000 sampled records .*; the first: file ds=2026-01-01/part-0000[01].parquet, row [0-9]+\$" \
    "$DPP_TMP/v.err" || dpp_fail "case 7: Parquet nulls not named: $(cat "$DPP_TMP/v.err")"
spec "$DPP_TMP/pq-fill.json" pq label '{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}]}' \
    '{"name": "s1", "transforms": [{"op": "hash", "n": 1000}]}' ' "format": "parquet",'
validate_table "$DPP_TMP/pq-fill.json" "$root/pq" 0
# a column dpp cannot read is refused by name
mkdir -p "$root/structs/ds=1"
cp "$DPP_SOURCE_DIR/tests/data/parquet-testing/nulls.snappy.parquet" "$root/structs/ds=1/"
spec "$DPP_TMP/struct.json" structs b_struct "$i1" "$c1" ' "format": "parquet",'
validate_table "$DPP_TMP/struct.json" "$root/structs" 1
grep -Fq "dppctl: $DPP_TMP/struct.json: feature \"b_struct\" (the label): " "$DPP_TMP/v.err" &&
    grep -Fq 'nulls.snappy.parquet: column "b_struct" is a struct' "$DPP_TMP/v.err" ||
    dpp_fail "case 7: a struct column not refused by name: $(cat "$DPP_TMP/v.err")"
# a spec of the other format: the likely fix is named
validate_table "$DPP_TMP/optional.json" "$root/pq" 1
grep -Fq 'its files end in .parquet: should the spec say "format": "parquet"?' "$DPP_TMP/v.err" ||
    dpp_fail "case 7: a TFRecord spec on Parquet files: $(cat "$DPP_TMP/v.err")"
# a failed sample never follows a "valid" verdict (the verdict comes last,
# only when every check passed)
validate_table "$DPP_TMP/label.json" "$root/clean" 1
! grep -Fq ": valid (" "$DPP_TMP/v.out" ||
    dpp_fail "case 7: validate --table said valid before it failed: $(cat "$DPP_TMP/v.out")"
validate_table "$DPP_TMP/optional.json" "$root/clean" 0
[[ $(tail -n 1 "$DPP_TMP/v.out") == "$DPP_TMP/optional.json: valid ("* ]] ||
    dpp_fail "case 7: the verdict is not the last line: $(cat "$DPP_TMP/v.out")"
# a mixture: every source's table is sampled, each named; --table once per
# source, or once (the others under its data root)
mix() {
    cat >"$1" <<EOF
{"batch_size": 100, "features": {"dense": [$2], "sparse": [$c1]}, "label": {"name": "label"},
 "sources": [{"table": "clean", "weight": 1}, {"table": "holes", "weight": 1}]}
EOF
}
mix "$DPP_TMP/mix.json" "$i1"
for more in "" "--table $root/holes"; do
    # shellcheck disable=SC2086 # none, or two words
    validate_table "$DPP_TMP/mix.json" "$root/clean" 1 $more
    grep -Eqx "dppctl: $DPP_TMP/mix.json: sources\[1\] \(table holes\): [0-9]+ of the 1000 sampled records \([0-9.]+%\) would be rejected, more than the spec's max_reject_ratio 0.01: a session would fail" \
        "$DPP_TMP/v.err" || dpp_fail "case 7: a mixture's source 1 (--table $root/clean $more) was not checked: $(cat "$DPP_TMP/v.out" "$DPP_TMP/v.err")"
done
mix "$DPP_TMP/mix-fill.json" '{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}]}'
validate_table "$DPP_TMP/mix-fill.json" "$root/clean" 0
expect_line "$DPP_TMP/v.out" "$DPP_TMP/mix-fill.json: sources[1] (table holes): table $root/holes: 1000 records sampled from 2 of the table's 2 files; every feature found, with values its transforms take"
# submit --table: a spec that fails its sample is not submitted
before=$(dpp_ctl list -o json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
rc=0
dpp_ctl submit "$DPP_TMP/label.json" --table "$root/clean" >"$DPP_TMP/sub.out" 2>"$DPP_TMP/sub.err" || rc=$?
((rc == 1)) || dpp_fail "case 7: submit --table of a misspelt label exited $rc: $(cat "$DPP_TMP/sub.err")"
expect_line "$DPP_TMP/sub.err" "dppctl: $DPP_TMP/label.json: not submitted: its table sample (--table $root/clean) failed the checks above"
[[ ! -s $DPP_TMP/sub.out ]] || dpp_fail "case 7: submit --table printed on stdout: $(cat "$DPP_TMP/sub.out")"
after=$(dpp_ctl list -o json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
((before == after)) || dpp_fail "case 7: a refused submit --table made a session ($before, then $after)"
dpp_ctl submit "$DPP_TMP/optional.json" --table "$root/clean" >"$DPP_TMP/sub.out" 2>"$DPP_TMP/sub.err" ||
    dpp_fail "case 7: submit --table of a good spec failed: $(cat "$DPP_TMP/sub.err")"
grep -Eqx 's[0-9a-f]{16}' <(tail -n 1 "$DPP_TMP/sub.out") ||
    dpp_fail "case 7: submit --table: the last line of stdout is not the session id: $(cat "$DPP_TMP/sub.out")"
dpp_log "case 7: validate --table named the misspelt label, the holes, 5 wrong types, a struct column and a mixture's second source; submit --table held back a bad spec"

dpp_log "PASS"
