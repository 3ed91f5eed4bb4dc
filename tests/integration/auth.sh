#!/usr/bin/env bash
# Authentication and connection limits: with a cluster token every dppctl,
# worker and client proves it knows the token (and the master and workers
# prove it back); a missing or wrong token gets a clear error and the
# connection is closed while the session keeps running; daemons refuse a
# non-loopback address without a token unless --insecure; a peer silent past
# the handshake timeout is closed; connections over --max-connections are
# refused. A session then runs end to end and its sums are checked. Last, a
# worker confined to another data root (--data-root) refuses a split of a
# file outside it, and the session fails saying so.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup auth "$DPP_REFSUM"
RAW=(/usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/rawpeer.py")

root=$DPP_TMP/root
dpp_gen --rows 20000 --shards 2 --partitions 1 --seed 31 --out "$root/criteo"
tok=$DPP_TMP/token
other=$DPP_TMP/other-token
head -c 32 /dev/urandom | base64 >"$tok"
head -c 32 /dev/urandom | base64 >"$other"
chmod 600 "$tok" "$other"
spec=$DPP_TMP/spec.json
sed 's/"batch_size": 4096/"batch_size": 1000/' \
    "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"

# expect_fail RC PATTERN CMD...: CMD exits RC and says PATTERN on stderr
expect_fail() {
    local want=$1 pattern=$2 rc=0
    shift 2
    "$@" >"$DPP_TMP/out" 2>"$DPP_TMP/err" || rc=$?
    cat "$DPP_TMP/err"
    ((rc == want)) || dpp_fail "$* exited $rc, expected $want"
    grep -q -- "$pattern" "$DPP_TMP/err" || dpp_fail "$* did not say \"$pattern\""
}

dpp_step "daemons refuse a non-loopback address without a token"
expect_fail 2 "not a loopback address, without a cluster token" \
    "$DPP_MASTER_BIN" --listen 0.0.0.0:0 --data-root "$root" --state-dir "$DPP_TMP/x"
expect_fail 2 "not a loopback address, without a cluster token" \
    "$DPP_WORKER_BIN" --master 127.0.0.1:1 --listen 0.0.0.0:0
printf 'short\n' >"$DPP_TMP/short"
expect_fail 2 "token too short" "$DPP_MASTER_BIN" --token-file "$DPP_TMP/short" \
    --data-root "$root" --state-dir "$DPP_TMP/x"
expect_fail 2 "not a regular file" "$DPP_WORKER_BIN" --master 127.0.0.1:1 --token-file "$DPP_TMP"

dpp_step "a master and a worker with the token; a worker with another one"
dpp_start_master --data-root "$root" --token-file "$tok" --handshake-timeout-ms 600 \
    --max-connections 6
dpp_start_worker --threads 2 --token-file "$tok"
DPP_TOKEN_FILE=$other dpp_start_worker --threads 1
for _ in $(seq 1 100); do
    grep -q "master_handshake_failed" "$DPP_TMP/worker-1.log" && break
    sleep 0.05
done
grep -q 'master_handshake_failed.*another cluster token' "$DPP_TMP/worker-1.log" ||
    dpp_fail "the worker with another token did not say why it cannot register"

dpp_step "dppctl without a token, with another one, with the right one"
expect_fail 1 "the server requires the cluster token" "$DPPCTL" list
expect_fail 1 "the server has another cluster token" "$DPPCTL" --token-file "$other" list
"$DPPCTL" --token-file "$tok" workers | tee "$DPP_TMP/workers.out"
(($(grep -c '^[0-9]' "$DPP_TMP/workers.out") == 1)) || dpp_fail "only the worker with the token may register"
export DPP_TOKEN_FILE=$tok
dpp_submit "$spec"

dpp_step "raw peers: a wrong MAC, a request before AUTH, silence, too many connections"
"${RAW[@]}" "$DPP_MASTER_ADDR" "hello:ctl auth-garbage expect-error expect-closed" | tee "$DPP_TMP/raw1"
grep -q "reply HELLO_REPLY challenge=32 proof=32" "$DPP_TMP/raw1" || dpp_fail "no challenge and proof"
grep -q "error -1023 authentication failed: wrong cluster token" "$DPP_TMP/raw1" ||
    dpp_fail "a wrong MAC was not refused as such"
"${RAW[@]}" "$DPP_MASTER_ADDR" "hello:ctl status expect-error expect-closed" | tee "$DPP_TMP/raw2"
grep -q "error -1023 authentication required" "$DPP_TMP/raw2" || dpp_fail "a request before AUTH was served"
"${RAW[@]}" "$DPP_MASTER_ADDR" "idle:1.5 expect-error expect-closed" | tee "$DPP_TMP/raw3"
grep -q "error -1015 no HELLO within 600 ms" "$DPP_TMP/raw3" || dpp_fail "a silent peer was not closed"
worker_addr=$(sed -n 's/.*worker_listening addr=\([^ ]*\).*/\1/p' "$DPP_TMP/worker-0.log")
"${RAW[@]}" "$worker_addr" "hello:client auth-garbage expect-error expect-closed" | tee "$DPP_TMP/raw4"
grep -q "error -1023 authentication failed: wrong cluster token" "$DPP_TMP/raw4" ||
    dpp_fail "the worker served a client with a wrong MAC"
# hold connections (HELLO said, AUTH never: closed by the handshake timeout
# later) until the master refuses one
holders=()
for i in 1 2 3 4 5 6; do
    mkfifo "$DPP_TMP/hold$i"
    "${RAW[@]}" "$DPP_MASTER_ADDR" "idle:0 hold" <"$DPP_TMP/hold$i" >"$DPP_TMP/holder$i" 2>&1 &
    holders+=($!)
    dpp_track "$!"
    exec {fd}>"$DPP_TMP/hold$i"
    eval "hold_fd$i=$fd"
done
# the holders are Python processes: on a busy machine they take a while to
# connect, so wait for the refusal rather than for a fixed time
for _ in $(seq 1 200); do
    grep -q "connection_refused" "$DPP_TMP/master.log" && break
    sleep 0.05
done
refused=$(grep -c "connection_refused" "$DPP_TMP/master.log" || true)
((refused >= 1)) || dpp_fail "the master served more than --max-connections peers"
for i in 1 2 3 4 5 6; do eval "exec {hold_fd$i}>&-"; done
for p in "${holders[@]}"; do wait "$p" || true; done

dpp_step "the session runs with tokens everywhere; its sums are right"
dpp_read "$DPP_SESSION" "$DPP_TMP/read.jsonl"
dpp_refsum_check "$spec" "$root/criteo" "$DPP_TMP/read.jsonl"
grep -q "auth_failed" "$DPP_TMP/master.log" || dpp_fail "the master never logged a refused peer"
! grep -q "$(cat "$tok")" "$DPP_TMP"/*.log || dpp_fail "the token appears in a log"
dpp_step "a worker confined to another data root refuses files outside it"
dpp_stop worker-0
mkdir -p "$DPP_TMP/elsewhere"
dpp_start_worker --threads 1 --token-file "$tok" --data-root "$DPP_TMP/elsewhere"
dpp_submit "$spec"
rc=0
dpp_ctl read "$DPP_SESSION" >"$DPP_TMP/confined.out" 2>&1 || rc=$?
cat "$DPP_TMP/confined.out"
((rc == 3)) && grep -q "outside the worker's data roots" "$DPP_TMP/confined.out" ||
    dpp_fail "a confined worker read a file outside its data root (read exit $rc)"
dpp_log "PASS: $(grep -c auth_failed "$DPP_TMP/master.log") peers refused by the master, $refused over the connection limit"
