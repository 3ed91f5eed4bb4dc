#!/usr/bin/env bash
# Rejections: bad specs and tables outside the data roots are refused by
# `dppctl submit` with a one-line reason and a non-zero exit, offline
# `dppctl validate` refuses a bad spec by itself, the master's limits (spec
# size, JSON nesting, feature count, frame size) are hit while a session is
# being read, and the daemons keep serving: that session completes with the
# right sums, and a valid session afterwards runs to completion.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup reject "$DPP_REFSUM"

root=$DPP_TMP/root
table=$root/criteo

dpp_step "generate a small table, a table outside the root and a symlink escaping it"
dpp_gen --rows 3000 --shards 2 --partitions 2 --seed 7 --out "$table"
dpp_gen --rows 100 --shards 1 --partitions 1 --seed 8 --out "$DPP_TMP/outside"
ln -s "$DPP_TMP/outside" "$root/escape"

# write_spec FILE TABLE [EXTRA_TOP_LEVEL_JSON] [I4_TRANSFORMS]
write_spec() {
    local file=$1 tbl=$2 extra=${3:-} i4_ops=${4:-'{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}'}
    cat >"$file" <<EOF
{
  "table": "$tbl",$extra
  "batch_size": 256,
  "remainder": "keep",
  "features": {
    "dense": [
      {"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}]},
      {"name": "i2", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}]},
      {"name": "i3", "transforms": [{"op": "fill_missing", "value": 0}, {"op": "clamp", "min": 0}]},
      {"name": "i4", "transforms": [$i4_ops]}
    ],
    "sparse": [
      {"name": "c1", "transforms": [{"op": "modulo", "n": 1000}]},
      {"name": "c2", "transforms": [{"op": "truncate", "max_len": 3}]}
    ]
  },
  "label": {"name": "label"}
}
EOF
}

bad_op=$DPP_TMP/bad-op.json
write_spec "$bad_op" criteo "" '{"op": "logp"}'
outside=$DPP_TMP/outside.json
write_spec "$outside" ../outside
escape=$DPP_TMP/escape.json
write_spec "$escape" escape
no_part=$DPP_TMP/no-partition.json
write_spec "$no_part" criteo ' "partitions": ["ds=1999-01-01"],'
no_table=$DPP_TMP/no-table.json
write_spec "$no_table" nosuchtable
good=$DPP_TMP/good.json
write_spec "$good" criteo

dpp_step "offline: dppctl validate"
# No master anywhere: validate must not need one.
mismatches=0
dpp_expect_reject "dppctl: $bad_op: features.dense[3].transforms[0].op: unknown op \"logp\"; did you mean \"log1p\"? (ops of dense features: fill_missing, clamp, log1p, standardize, bucketize, cast)" \
    env -u DPP_MASTER "$DPPCTL" validate "$bad_op" || mismatches=$((mismatches + 1))
env -u DPP_MASTER "$DPPCTL" validate "$good" || dpp_fail "dppctl validate rejected $good"
dpp_log "the valid spec validates"

dpp_step "start a master (with small limits) and a worker; a session is read meanwhile"
dpp_start_master --data-root "$root" --max-spec-kb 8 --max-features 20 --max-frame-mb 1 \
    --idle-timeout-ms 5000
dpp_start_worker --threads 2 --idle-timeout-ms 7000
dpp_log "master at $DPP_MASTER_ADDR"
slow=$DPP_TMP/slow.json
cat >"$slow" <<JSON
{"table": "criteo", "batch_size": 100, "remainder": "keep",
 "features": {"sparse": [{"name": "row_id"}]}, "label": {"name": "label"}}
JSON
dpp_submit "$slow"
running=$DPP_SESSION
timeout -k 5 120 "$DPP_BIN_DIR/tests/fault/dpp-fault-check" "$DPP_MASTER_ADDR" "$running" 0 \
    <(seq 0 2999) 30 >"$DPP_TMP/running.out" 2>&1 &
running_pid=$!
dpp_track "$running_pid"

dpp_step "limits: spec size, nesting, features, frame size"
big=$DPP_TMP/big.json
sed "s/\"table\": \"criteo\",/\"table\": \"criteo\", \"pad\": \"$(head -c 9000 /dev/zero | tr '\0' x)\",/" \
    "$good" >"$big"
dpp_expect_reject "dppctl: $big: the spec is $(wc -c <"$big") bytes, this master takes at most 8192 (--max-spec-kb)" \
    "$DPPCTL" submit "$big" || mismatches=$((mismatches + 1))
deep=$DPP_TMP/deep.json
printf '{"table": %s1%s}' "$(printf '[%.0s' $(seq 1 40))" "$(printf ']%.0s' $(seq 1 40))" >"$deep"
dpp_expect_reject "dppctl: $deep: (root): nested deeper than 32 levels" \
    "$DPPCTL" submit "$deep" || mismatches=$((mismatches + 1))
wide=$DPP_TMP/wide.json
{
    printf '{"table": "criteo", "batch_size": 8, "features": {"dense": ['
    for i in $(seq 1 21); do printf '{"name": "f%d"}%s' "$i" "$( ((i < 21)) && echo ,)"; done
    printf ']}, "label": {"name": "label"}}'
} >"$wide"
dpp_expect_reject "dppctl: $wide: features: 21, this master takes at most 20 (--max-features)" \
    "$DPPCTL" submit "$wide" || mismatches=$((mismatches + 1))
/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/rawpeer.py" "$DPP_MASTER_ADDR" \
    "bigframe:2097152 expect-error expect-closed" | tee "$DPP_TMP/bigframe.out"
grep -q "^error -1003 " "$DPP_TMP/bigframe.out" || dpp_fail "a 2 MiB message passed --max-frame-mb 1"
# idle peers: silent after HELLO, closed by each daemon's --idle-timeout-ms
# (the session's own client, reading meanwhile, keeps both links alive)
/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/rawpeer.py" "$DPP_MASTER_ADDR" \
    "hello:ctl idle:6 expect-error expect-closed" >"$DPP_TMP/idle-master.out" 2>&1 &
idle_master=$!
dpp_track "$idle_master"
/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/rawpeer.py" "$(cat -- "$DPP_TMP/worker-0.port")" \
    "hello:client idle:8 expect-error expect-closed" >"$DPP_TMP/idle-worker.out" 2>&1 || true
wait "$idle_master" || true
cat "$DPP_TMP/idle-master.out" "$DPP_TMP/idle-worker.out"
grep -q "^error -1015 idle for 5000 ms" "$DPP_TMP/idle-master.out" || dpp_fail "the master kept an idle peer"
grep -q "^error -1015 idle for 7000 ms" "$DPP_TMP/idle-worker.out" || dpp_fail "the worker kept an idle peer"

dpp_step "submit: rejected specs"
dpp_expect_reject "dppctl: $bad_op: features.dense[3].transforms[0].op: unknown op \"logp\"; did you mean \"log1p\"? (ops of dense features: fill_missing, clamp, log1p, standardize, bucketize, cast)" \
    "$DPPCTL" submit "$bad_op" || mismatches=$((mismatches + 1))
dpp_expect_reject "dppctl: $outside: table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL" \
    "$DPPCTL" submit "$outside" || mismatches=$((mismatches + 1))
dpp_expect_reject "dppctl: $escape: table \"escape\": path outside the data roots" \
    "$DPPCTL" submit "$escape" || mismatches=$((mismatches + 1))
dpp_expect_reject "dppctl: $no_part: partitions[0]: no partition \"ds=1999-01-01\" in table \"criteo\" (partitions: ds=2026-01-01, ds=2026-01-02)" \
    "$DPPCTL" submit "$no_part" || mismatches=$((mismatches + 1))
# A table under no root: a one-line `dppctl: ...` reason naming the table,
# the nearest name there is and, these being few, the tables there are.
rc=0
dpp_ctl submit "$no_table" >"$DPP_TMP/no-table.out" 2>"$DPP_TMP/no-table.err" || rc=$?
((rc != 0)) || dpp_fail "a table under no data root was accepted"
grep -Fxq "dppctl: $no_table: table \"nosuchtable\": not found under any data root (tables: criteo, escape)" \
    "$DPP_TMP/no-table.err" ||
    dpp_fail "no 'dppctl: ... nosuchtable ...' reason: $(cat -- "$DPP_TMP/no-table.err")"
dpp_log "rejected as expected (exit $rc): $(head -n 1 -- "$DPP_TMP/no-table.err")"

dpp_step "garbage and malformed frames are refused without harm"
# Raw bytes on the master's and the worker's ports: an HTTP request, random
# bytes, a frame header claiming 4 GiB, and a truncated frame. Each daemon
# answers with an ERROR frame or closes; none may die or stop serving.
send_raw() { # ADDR PRINTF-FORMAT
    local host=${1%:*} port=${1##*:}
    # shellcheck disable=SC2059
    timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1"; printf "$2" >&3; timeout 2 cat <&3 >/dev/null || true' \
        "$host" "$port" "$2" || true
}
for addr in "$DPP_MASTER_ADDR" "$(cat -- "$DPP_TMP/worker-0.port")"; do
    send_raw "$addr" 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'
    send_raw "$addr" '\x13\x37\xde\xad\xbe\xef\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a'
    send_raw "$addr" 'DPP1\x0a\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00'
    send_raw "$addr" 'DPP1\x01\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00\x08'
done
dpp_alive master || dpp_fail "the master died on malformed input"
dpp_alive worker-0 || dpp_fail "the worker died on malformed input"
dpp_ctl status >/dev/null || dpp_fail "the master stopped answering after malformed input"
dpp_log "both daemons still up and answering"

dpp_step "the session read meanwhile completed, every row once"
wait "$running_pid" || { cat "$DPP_TMP/running.out"; dpp_fail "the session read during the rejections failed"; }
cat "$DPP_TMP/running.out"
grep -q " missing 0 duplicates 0 foreign 0 " "$DPP_TMP/running.out" || dpp_fail "rows lost or repeated"

dpp_step "the daemons still serve: a valid session runs to completion"
dpp_alive master || dpp_fail "the master died after the rejections"
dpp_alive worker-0 || dpp_fail "the worker died after the rejections"
dpp_submit "$good"
session=$DPP_SESSION
dpp_log "session $session"
dpp_read "$session" "$DPP_TMP/read.jsonl"
cat -- "$DPP_TMP/read.jsonl"
dpp_refsum_check "$good" "$table" "$DPP_TMP/read.jsonl"
dpp_wait_done "$session"
dpp_ctl status >/dev/null || dpp_fail "dppctl status failed after the session"
dpp_alive master || dpp_fail "the master died"
dpp_alive worker-0 || dpp_fail "the worker died"

((mismatches == 0)) || dpp_fail "$mismatches rejection(s) did not match; see MISMATCH above"
dpp_log "PASS"
