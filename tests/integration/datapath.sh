#!/usr/bin/env bash
# The worker data path through the whole system, every result checked with
# dpp-refsum (the independent reader):
#   1. .idx sidecars and record-range splits (split_rows), two ranks
#   2. no sidecars: index tasks scan the files; `dppctl index` writes sidecars
#      byte-identical to dpp-gen's
#   3. both read paths: workers under DPP_FORCE_PREAD=1 (pread) and io_uring
#   4. corrupt data under on_corrupt skip: a bad payload CRC is skipped, a
#      truncated tail dropped, both counted and logged with file and offset
#   5. on_corrupt fail: the read fails with the file and offset, the session
#      is failed, the daemons keep serving
#   6. filters, the new dense and sparse ops, zstd; dim > 1 and weights on a
#      table dpp-refsum writes
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup datapath "$DPP_REFSUM"
# The master's debug log says whether each file was indexed from a sidecar.
DPP_LOG_LEVEL=debug

root=$DPP_TMP/root
table=$root/criteo
split_rows=700

# json_int KEY FILE: the integer KEY of the first object in FILE (compact JSON).
json_int() {
    local v
    v=$(grep -o "\"$1\":-\?[0-9]*" "$2" | head -n 1 | cut -d: -f2)
    [[ -n $v ]] || dpp_fail "no integer \"$1\" in $2: $(cat -- "$2")"
    printf '%s\n' "$v"
}

# json_str KEY FILE: the string KEY of the first object in FILE.
json_str() {
    grep -o "\"$1\":\"[^\"]*\"" "$2" | head -n 1 | cut -d: -f2- | tr -d '"'
}

# status_json SESSION: dppctl status SESSION --output json into the file $ST
# (exit 3 says the session failed: still a status).
status_json() {
    ST=$DPP_TMP/status-$1.json
    local rc=0
    DPP_CTL_TIMEOUT=20 dpp_ctl status "$1" --output json >"$ST" || rc=$?
    ((rc == 0 || rc == 3)) || dpp_fail "dppctl status $1 --output json failed (exit $rc)"
}

# expected_splits DIR...: sum over the .idx files under DIR of
# ceil(records / split_rows).
expected_splits() {
    local f n total=0
    while IFS= read -r f; do
        n=$(wc -l <"$f")
        total=$((total + (n + split_rows - 1) / split_rows))
    done < <(find "$@" -name '*.tfrecord.idx' | sort)
    printf '%s\n' "$total"
}

# refsum_check SPEC TABLE_DIR ACTUAL [ARGS...]: dpp-refsum --check, quiet
# unless it finds a mismatch.
refsum_check() {
    local rc=0 out=$3.refsum
    dpp_timeout 120 "$DPP_REFSUM" --spec "$1" --table "$2" --check "$3" "${@:4}" >"$out" 2>&1 ||
        rc=$?
    if ((rc != 0)); then
        printf '%s: dppctl read output (%s):\n' "$DPP_NAME" "$3" >&2
        cat -- "$3" "$out" >&2
        dpp_fail "dpp-refsum ${*:4} found a mismatch in $3 (exit $rc)"
    fi
}

# refsum_rejected SPEC TABLE_DIR [ARGS...]: dpp-refsum --rejected into REJECTED.
refsum_rejected() {
    local out=$DPP_TMP/rejected.out
    dpp_timeout 120 "$DPP_REFSUM" --spec "$1" --table "$2" --rejected "${@:3}" >"$out" \
        2>"$out.err" || {
        cat -- "$out.err" >&2
        dpp_fail "dpp-refsum --rejected $* failed"
    }
    REJECTED=$(<"$out")
}

# run_ranks SPEC TABLE_DIR TAG [REFSUM_ARGS...]: submits SPEC, reads every
# rank concurrently into $DPP_TMP/TAG-rankR.jsonl, checks each with
# dpp-refsum, waits for the session to be done; sets SESSION.
run_ranks() {
    local spec=$1 tbl=$2 tag=$3
    shift 3
    local consumers r
    consumers=$(grep -o '"consumers": *[0-9]*' "$spec" | grep -o '[0-9]*$' || echo 1)
    dpp_submit "$spec"
    SESSION=$DPP_SESSION
    local pids=()
    for ((r = 0; r < consumers; r++)); do
        dpp_read_bg "$SESSION" "$DPP_TMP/$tag-rank$r.jsonl" --rank "$r" --timeout-s 20
        pids+=("$DPP_LAST_PID")
    done
    for ((r = 0; r < consumers; r++)); do
        dpp_read_wait "${pids[r]}" "$DPP_TMP/$tag-rank$r.jsonl"
    done
    for ((r = 0; r < consumers; r++)); do
        refsum_check "$spec" "$tbl" "$DPP_TMP/$tag-rank$r.jsonl" --rank "$r" "$@"
    done
    dpp_wait_done "$SESSION"
}

# rows_of TAG: rows delivered over every rank and epoch of run TAG.
rows_of() {
    cat -- "$DPP_TMP/$1"-rank*.jsonl | grep -o '"rows":[0-9]*' | cut -d: -f2 |
        awk '{ s += $1 } END { print s + 0 }'
}

# check_produced TAG: dppctl status's rows_produced (in $ST) counts every row
# the session delivered, over every rank and epoch. The counters of a split
# (rows_produced, rows_filtered, records_rejected) reach the master with the
# worker's SPLIT_DONE; a mismatch here means some were lost.
check_produced() {
    local got want
    got=$(json_int rows_produced "$ST")
    want=$(rows_of "$1")
    ((got == want)) ||
        dpp_fail "$1: dppctl status says rows_produced $got, but $want rows were delivered: $(cat -- "$ST")"
}

# check_filtered TAG EPOCHS: when dppctl status reports rows_filtered (in
# $ST), it must be what dpp-refsum found filtered, over every rank and epoch.
check_filtered() {
    grep -q '"rows_filtered":' "$ST" || return 0
    local got want
    got=$(json_int rows_filtered "$ST")
    want=$(cat -- "$DPP_TMP/$1"-rank*.jsonl.refsum | sed -n 's/^refsum: \([0-9]*\) rows filtered out$/\1/p' |
        awk -v e="$2" '{ s += $1 } END { print (s + 0) * e }')
    ((got == want)) || dpp_fail "$1: rows_filtered $got, dpp-refsum filtered $want"
}

# sums_of TAG: the ranks' lines without the timing field, to compare runs.
sums_of() {
    local f
    for f in "$DPP_TMP/$1"-rank*.jsonl; do
        sed 's/,"rows_per_s":[^,}]*//' "$f"
    done
}

# idx_line FILE.idx K: "offset size" of record K (0-based).
idx_line() { sed -n "$(($2 + 1))p" "$1"; }

dpp_step "generate 9000 rows: 2 partitions x 3 files, with .idx sidecars"
dpp_gen --rows 9000 --shards 3 --partitions 2 --seed 424242 --out "$table" --index
nidx=$(find "$table" -name '*.tfrecord.idx' | wc -l)
((nidx == 6)) || dpp_fail "expected 6 .idx sidecars from dpp-gen --index, found $nidx"
want_splits=$(expected_splits "$table")
dpp_log "6 files, $want_splits splits of up to $split_rows records expected"

dpp_start_master --data-root "$root"
dpp_start_worker --threads 2
dpp_start_worker --threads 2
dpp_log "master at $DPP_MASTER_ADDR, 2 workers (io_uring)"

# ---- case 1 -----------------------------------------------------------------
dpp_step "case 1: sidecars, split_rows $split_rows, batch_size 256, 2 consumers"
write_split_spec() { # FILE TABLE [EXTRA_TOP_LEVEL_JSON]
    cat >"$1" <<EOF
{
  "table": "$2",${3:-}
  "batch_size": 256,
  "remainder": "keep",
  "split_rows": $split_rows,
  "consumers": 2,
  "features": {
    "dense": [
      {"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "max": 500}]},
      {"name": "i2", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}, {"op": "log1p"}]},
      {"name": "i9", "transforms": [{"op": "fill_missing", "value": 0}]}
    ],
    "sparse": [
      {"name": "c1"},
      {"name": "c3", "transforms": [{"op": "modulo", "n": 1009}, {"op": "truncate", "max_len": 3}]},
      {"name": "c24", "transforms": [{"op": "first_x", "x": 2}]}
    ]
  },
  "label": {"name": "label"}
}
EOF
}
spec1=$DPP_TMP/split.json
write_split_spec "$spec1" criteo
run_ranks "$spec1" "$table" case1
session1=$SESSION
status_json "$session1"
check_produced case1
got=$(json_int splits_per_epoch "$ST")
((got == want_splits)) || dpp_fail "case 1: splits_per_epoch $got, expected $want_splits"
rej=$(json_int records_rejected "$ST")
((rej == 0)) || dpp_fail "case 1: records_rejected $rej on a clean table"
n=$(grep -c "file_indexed session=$session1 .*sidecar=1" "$DPP_TMP/master.log" || true)
((n == 6)) || dpp_fail "case 1: $n of 6 files indexed from their sidecar (master log)"
rows1=$(rows_of case1)
((rows1 == 9000)) || dpp_fail "case 1: $rows1 rows delivered, expected 9000"
dpp_log "case 1 ok: $want_splits splits from 6 sidecars, 2 ranks match dpp-refsum, $rows1 rows"

# ---- case 2 -----------------------------------------------------------------
dpp_step "case 2: the same table without sidecars (index tasks), then dppctl index"
cp -r -- "$table" "$root/noidx"
find "$root/noidx" -name '*.idx' -delete
spec2=$DPP_TMP/noidx.json
write_split_spec "$spec2" noidx
run_ranks "$spec2" "$root/noidx" case2
status_json "$SESSION"
check_produced case2
got=$(json_int splits_per_epoch "$ST")
((got == want_splits)) || dpp_fail "case 2: splits_per_epoch $got, expected $want_splits"
n=$(grep -c "file_indexed session=$SESSION .*sidecar=0" "$DPP_TMP/master.log" || true)
((n == 6)) || dpp_fail "case 2: $n of 6 files indexed by a scan (master log)"
[[ "$(sums_of case2)" == "$(sums_of case1)" ]] ||
    dpp_fail "case 2: the sums differ from case 1's: $(sums_of case2) vs $(sums_of case1)"
dpp_timeout 60 "$DPPCTL" index "$root/noidx" >"$DPP_TMP/index.out" 2>&1 || {
    cat -- "$DPP_TMP/index.out" >&2
    dpp_fail "dppctl index $root/noidx failed"
}
while IFS= read -r f; do
    rel=${f#"$table"/}
    [[ -f $root/noidx/$rel ]] || dpp_fail "dppctl index wrote no $rel"
    cmp -- "$f" "$root/noidx/$rel" || dpp_fail "dppctl index: $rel differs from dpp-gen's"
done < <(find "$table" -name '*.idx')
n=$(find "$root/noidx" -name '*.idx' | wc -l)
((n == 6)) || dpp_fail "dppctl index wrote $n sidecars, expected 6"
dpp_log "case 2 ok: 6 files scanned, $want_splits splits, same sums; dppctl index = dpp-gen's sidecars"

# ---- case 3 -----------------------------------------------------------------
dpp_step "case 3: the same session on workers under DPP_FORCE_PREAD=1"
dpp_stop worker-0
dpp_stop worker-1
DPP_FORCE_PREAD=1 dpp_start_worker --threads 2
DPP_FORCE_PREAD=1 dpp_start_worker --threads 2
run_ranks "$spec1" "$table" case3
for w in worker-2 worker-3; do
    n=$(grep -c 'io_uring_unavailable.*reason=DPP_FORCE_PREAD' "$DPP_TMP/$w.log" || true)
    ((n == 1)) || dpp_fail "case 3: $w logged io_uring_unavailable reason=DPP_FORCE_PREAD $n times"
done
uring=io_uring
if grep -q 'io_uring_unavailable' "$DPP_TMP/worker-0.log" "$DPP_TMP/worker-1.log"; then
    uring="pread (io_uring is unavailable here: $(grep -h -m1 io_uring_unavailable \
        "$DPP_TMP/worker-0.log"))"
fi
[[ "$(sums_of case3)" == "$(sums_of case1)" ]] ||
    dpp_fail "case 3: pread sums differ from case 1's: $(sums_of case3) vs $(sums_of case1)"
dpp_log "case 3 ok: pread workers match dpp-refsum and case 1 (read with $uring)"
dpp_stop worker-2
dpp_stop worker-3
dpp_start_worker --threads 2
dpp_start_worker --threads 2

# ---- case 4 -----------------------------------------------------------------
dpp_step "case 4: a flipped payload byte and a truncated file, on_corrupt skip"
dmg=$root/damaged
cp -r -- "$table" "$dmg"
rel_a=ds=2026-01-01/part-00001.tfrecord
rel_b=ds=2026-01-02/part-00000.tfrecord
n_a=$(wc -l <"$dmg/$rel_a.idx")
read -r off_a size_a <<<"$(idx_line "$dmg/$rel_a.idx" $((n_a / 2)))"
pos=$((off_a + 12 + (size_a - 16) / 2)) # the middle of record n_a/2's payload
byte=$(od -An -tu1 -j "$pos" -N 1 -- "$dmg/$rel_a" | tr -d ' ')
# shellcheck disable=SC2059 # the format is the octal escape
printf "$(printf '\\%03o' $((byte ^ 0xff)))" |
    dd of="$dmg/$rel_a" bs=1 seek="$pos" conv=notrunc status=none
n_b=$(wc -l <"$dmg/$rel_b.idx")
read -r off_b _ <<<"$(idx_line "$dmg/$rel_b.idx" $((n_b / 2 + 7)))"
truncate -s $((off_b + 30)) -- "$dmg/$rel_b"
# one byte inserted inside a payload (a bad copy, a store shifting a body):
# that record fails its CRC, the framing after it is one byte off, and
# records resume one byte later
rel_c=ds=2026-01-02/part-00002.tfrecord
n_c=$(wc -l <"$dmg/$rel_c.idx")
read -r off_c size_c <<<"$(idx_line "$dmg/$rel_c.idx" $((n_c / 3)))"
gap_c=$((off_c + size_c)) # where the next header was, one byte before it is now
{ head -c $((off_c + 12 + (size_c - 16) / 2)) -- "$dmg/$rel_c"; printf 'X'
  tail -c +$((off_c + 12 + (size_c - 16) / 2 + 1)) -- "$dmg/$rel_c"; } >"$dmg/$rel_c.new"
mv -- "$dmg/$rel_c.new" "$dmg/$rel_c"
rm -f -- "$dmg/$rel_a.idx" "$dmg/$rel_b.idx" "$dmg/$rel_c.idx"
dpp_log "$rel_a: record $((n_a / 2)) at offset $off_a has a flipped payload byte;" \
    "$rel_b: truncated inside record $((n_b / 2 + 7)) at offset $off_b;" \
    "$rel_c: a byte inserted inside record $((n_c / 3)) at offset $off_c"

spec4=$DPP_TMP/damaged.json
write_split_spec "$spec4" damaged
run_ranks "$spec4" "$dmg" case4 --skip-corrupt
session4=$SESSION
status_json "$session4"
check_produced case4
rej=$(json_int records_rejected "$ST")
refsum_rejected "$spec4" "$dmg" --skip-corrupt
want_rej=$REJECTED
((rej == 4 && rej == want_rej)) ||
    dpp_fail "case 4: records_rejected $rej, expected $want_rej (dpp-refsum) and 4"
# dppctl status may break records_rejected down by reason: the flipped
# byte's record, the record with the inserted byte and the gap after it;
# the truncated tail
if grep -q '"rejects":{' "$ST"; then
    if ! grep -q '"rejects":{[^}]*"corrupt":3[,}]' "$ST" ||
        ! grep -q '"rejects":{[^}]*"truncated":1[,}]' "$ST"; then
        dpp_fail "case 4: expected rejects corrupt 3 and truncated 1: $(cat -- "$ST")"
    fi
fi
# the records dpp-refsum did not skip, with every reject: the corrupt
# records are their files' records, the truncated file lost its tail, and
# nothing after the inserted byte is lost
rows4=$(rows_of case4)
((rows4 == 9000 - 2 - (n_b - n_b / 2 - 7))) ||
    dpp_fail "case 4: $rows4 rows delivered, expected $((9000 - 2 - (n_b - n_b / 2 - 7)))"
grep -Eq "record_rejected .*file=\"?$rel_a\"? offset=$off_a( |\$)" \
    "$DPP_TMP"/worker-[45].log ||
    dpp_fail "case 4: no worker logged record_rejected file=$rel_a offset=$off_a"
grep -Eq "framing_gap file=\"?$rel_c\"? offset=$gap_c bytes=1 resume=$((gap_c + 1))( |\$)" \
    "$DPP_TMP"/worker-[45].log ||
    dpp_fail "case 4: no worker logged framing_gap file=$rel_c offset=$gap_c bytes=1"
grep -Eq "file_tail_rejected session=$session4 .*$rel_b: truncated record at offset $off_b" \
    "$DPP_TMP/master.log" ||
    dpp_fail "case 4: the master did not log the truncated tail of $rel_b at offset $off_b"
dpp_log "case 4 ok: records_rejected $rej, $rows4 rows match dpp-refsum --skip-corrupt," \
    "rejects logged with file and offset"

# ---- case 5 -----------------------------------------------------------------
# expect_read_fail TAG SPEC REGEX: the session of SPEC fails; dppctl read
# exits non-zero with one line on stderr matching REGEX; status shows failed.
expect_read_fail() {
    local tag=$1 spec=$2 regex=$3 rc=0 out=$DPP_TMP/$1.out err=$DPP_TMP/$1.err
    dpp_submit "$spec"
    dpp_ctl read "$DPP_SESSION" --output json --timeout-s 20 >"$out" 2>"$err" || rc=$?
    ((rc != 0 && rc != 124 && rc != 137)) ||
        dpp_fail "$tag: dppctl read exited $rc, expected a failure (stderr: $(cat -- "$err"))"
    (($(wc -l <"$err") == 1)) || dpp_fail "$tag: dppctl read: not one line on stderr: $(cat -- "$err")"
    grep -Eq -- "$regex" "$err" ||
        dpp_fail "$tag: dppctl read's reason does not match /$regex/: $(cat -- "$err")"
    dpp_wait_status "$DPP_SESSION" "^${DPP_SESSION}[[:space:]]+failed([[:space:]]|\$)" 20
    status_json "$DPP_SESSION"
    [[ $(json_str state "$ST") == failed ]] || dpp_fail "$tag: status JSON: $(cat -- "$ST")"
    grep -Eq -- "\"error\":\"[^\"]*$regex" "$ST" ||
        dpp_fail "$tag: the status error does not match /$regex/: $(cat -- "$ST")"
    dpp_log "$tag: read failed as expected: $(cat -- "$err")"
}

dpp_step "case 5: the damaged table with on_corrupt fail"
spec5=$DPP_TMP/fail.json
write_split_spec "$spec5" damaged ' "on_corrupt": "fail",'
expect_read_fail case5-truncated "$spec5" \
    "$rel_b: truncated record at offset $off_b( |\\)|\$)"
spec5b=$DPP_TMP/fail-corrupt.json
write_split_spec "$spec5b" damaged ' "on_corrupt": "fail", "partitions": ["ds=2026-01-01"],'
# One consumer: with two, the damaged record falls in rank 1's share of the
# records, which a reader of rank 0 alone never asks for.
sed -i 's/"consumers": 2/"consumers": 1/' "$spec5b"
expect_read_fail case5-corrupt "$spec5b" \
    "$rel_a: corrupted record at offset $off_a \\(on_corrupt: fail\\)"
for d in master worker-4 worker-5; do
    dpp_alive "$d" || dpp_fail "case 5: $d is gone"
done
dpp_log "case 5 ok: both failures name the file and offset; the daemons keep serving"

# ---- case 6 -----------------------------------------------------------------
dpp_step "case 6a: filters, standardize, bucketize, cast, hash, truncate last, zstd"
spec6=$DPP_TMP/ops.json
cat >"$spec6" <<'EOF'
{
  "table": "criteo",
  "batch_size": 300,
  "remainder": "keep",
  "split_rows": 1000,
  "consumers": 2,
  "compression": "zstd",
  "compression_level": 3,
  "features": {
    "dense": [
      {"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "standardize", "mean": 3.5, "std": 7.25}]},
      {"name": "i2", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "bucketize", "boundaries": [0, 1, 2.5, 10, 100, 1000]}]},
      {"name": "i3", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}, {"op": "log1p"},
                                    {"op": "cast", "to": "bfloat16"}]},
      {"name": "i4", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "standardize", "mean": -1, "std": 0.3},
                                    {"op": "cast", "to": "bfloat16"}]},
      {"name": "i5", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "max": 200000},
                                    {"op": "standardize", "mean": 0.1, "std": 5},
                                    {"op": "cast", "to": "float16"}]},
      {"name": "i6", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "standardize", "mean": 0, "std": 0.7},
                                    {"op": "cast", "to": "int"}]}
    ],
    "sparse": [
      {"name": "c3", "transforms": [{"op": "hash", "n": 1000003, "salt": 42},
                                    {"op": "truncate", "max_len": 2, "keep": "last"}]},
      {"name": "c7", "transforms": [{"op": "hash", "n": 9223372036854775807, "salt": -7}]},
      {"name": "c14", "transforms": [{"op": "truncate", "max_len": 3, "keep": "last"}]}
    ]
  },
  "label": {"name": "label"},
  "filters": [
    {"op": "sample", "p": 0.5, "seed": 3, "label": 0},
    {"op": "require", "feature": "c3"}
  ]
}
EOF
run_ranks "$spec6" "$table" case6a
rows6=$(rows_of case6a)
((rows6 > 0 && rows6 < 9000)) || dpp_fail "case 6a: $rows6 rows: the sample filter dropped nothing"
status_json "$SESSION"
check_produced case6a
check_filtered case6a 1
dpp_log "case 6a ok: $rows6 of 9000 rows kept, 2 ranks match dpp-refsum"

# Weights ride on a chain that the worker picks per row and maps per block
# (no string op first): keep "last" moves them with their ids.
dpp_step "case 6b: dim 4, weights, fill_missing, require, per-record errors (dpp-refsum's table)"
# refsum's table has ~7% records of the wrong type on purpose: max_reject_ratio 1
# lets the session run past them (the default, 1%, fails it: reject_ratio.sh)
dpp_timeout 60 "$DPP_REFSUM" --write-table "$root/weighted" --rows 1200 --files 2 ||
    dpp_fail "dpp-refsum --write-table failed"
spec6b=$DPP_TMP/weighted.json
cat >"$spec6b" <<'EOF'
{
  "table": "weighted",
  "batch_size": 128,
  "remainder": "keep",
  "split_rows": 500,
  "consumers": 2,
  "epochs": 2,
  "max_reject_ratio": 1,
  "features": {
    "dense": [
      {"name": "emb", "dim": 4, "transforms": [{"op": "fill_missing", "value": 0.25},
                                               {"op": "standardize", "mean": 0.5, "std": 3},
                                               {"op": "cast", "to": "float16"}]},
      {"name": "price", "transforms": [{"op": "clamp", "min": 1}, {"op": "log1p"},
                                       {"op": "bucketize", "boundaries": [0.5, 1, 2, 4, 6]}]}
    ],
    "sparse": [
      {"name": "ids", "weights": "ids_w", "transforms": [{"op": "modulo", "n": 1000003},
                                                         {"op": "truncate", "max_len": 3, "keep": "last"},
                                                         {"op": "hash", "n": 5003, "salt": -5}]},
      {"name": "hist", "transforms": [{"op": "modulo", "n": 97}, {"op": "first_x", "x": 4}]}
    ]
  },
  "label": {"name": "label"},
  "filters": [
    {"op": "require", "feature": "ids"},
    {"op": "sample", "p": 0.6, "seed": -9}
  ]
}
EOF
run_ranks "$spec6b" "$root/weighted" case6b
status_json "$SESSION"
check_produced case6b
check_filtered case6b 2
rej=$(json_int records_rejected "$ST")
refsum_rejected "$spec6b" "$root/weighted"
want_rej=$REJECTED
((rej == want_rej && rej > 0)) ||
    dpp_fail "case 6b: records_rejected $rej, expected $want_rej (dpp-refsum)"
grep -q '"sparse_weights_sum"' "$DPP_TMP/case6b-rank0.jsonl" ||
    dpp_fail "case 6b: dppctl read printed no sparse_weights_sum"
dpp_log "case 6b ok: $(rows_of case6b) rows over 2 epochs match dpp-refsum (weights included)," \
    "records_rejected $rej"

dpp_log "PASS"
