#!/usr/bin/env bash
# The daemons' HTTP endpoints under a slowloris (found by an adversarial
# probe): with 80 connections against the master and 200 against a worker,
# each trickling a request head that never ends (slowloris.py, which opens a
# new one for every one closed), /healthz and /readyz answer 200 within a
# second, again and again over more than one header timeout, and an honest
# /metrics scrape is served. Before the fix the slow connections held every
# slot (64) and each probe got 503: a liveness probe would have restarted a
# healthy daemon.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
dpp_setup probe_http
SLOWLORIS=$DPP_SOURCE_DIR/tests/integration/slowloris.py

root=$DPP_TMP/root
mkdir -p -- "$root"

http_port() { sed -n 's/.*http_listening .*port=\([0-9]*\).*/\1/p' "$DPP_TMP/$1.log" | tail -1; }
# get URL SECS: prints "STATUS MS FIRST_LINE_OF_BODY" (STATUS "timeout" or
# "error" when there is no answer within SECS seconds)
get() {
    /usr/bin/python3 -c '
import sys, time, urllib.request, urllib.error
t0 = time.monotonic()
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))
    status, body = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read().decode()
except Exception as e:
    status, body = "timeout" if "timed out" in str(e) else "error", str(e)
ms = int((time.monotonic() - t0) * 1000)
print(status, ms, (body.splitlines() or [""])[0])' "$1" "$2"
}

# attack NAME PORT N: starts slowloris.py against PORT with N connections
# (bounded, tracked) and waits until they are open.
attack() {
    local name=$1 port=$2 n=$3 out=$DPP_TMP/slowloris-$1.out
    timeout -k 5 60 /usr/bin/python3 "$SLOWLORIS" "127.0.0.1:$port" "$n" 40 >"$out" 2>&1 &
    DPP_LAST_PID=$!
    dpp_track "$DPP_LAST_PID"
    for _ in $(seq 1 200); do
        grep -q "^open $n\$" "$out" && return 0
        kill -0 "$DPP_LAST_PID" 2>/dev/null || break
        sleep 0.05
    done
    cat -- "$out" >&2
    dpp_fail "$name: the slowloris did not open $n connections"
}

# probes NAME PORT READY_BODY: 7 rounds a second apart (past the 5 s header
# timeout, so that the slow connections turn over): /healthz and /readyz
# must answer 200 within a second each time, and /metrics must be served.
probes() {
    local name=$1 port=$2 ready=$3 round path out status ms body
    for round in 1 2 3 4 5 6 7; do
        for path in /healthz /readyz; do
            out=$(get "http://127.0.0.1:$port$path" 1)
            read -r status ms body <<<"$out"
            [[ $status == 200 ]] || dpp_fail "$name $path during the slowloris (round $round): $out"
            ((ms < 1000)) || dpp_fail "$name $path took ${ms} ms (round $round)"
            [[ $path == /healthz && $body == ok || $path == /readyz && $body == "$ready" ]] ||
                dpp_fail "$name $path answered: $out"
        done
        if ((round == 4)); then
            out=$(get "http://127.0.0.1:$port/metrics" 5)
            read -r status ms body <<<"$out"
            [[ $status == 200 && $body == "# HELP "* ]] ||
                dpp_fail "$name /metrics during the slowloris: $out"
        fi
        sleep 1
    done
    dpp_log "$name: 14 probes answered 200 within a second, /metrics served"
}

# stop_attack NAME PID: stops the slowloris, reports what it saw
stop_attack() {
    kill -TERM "$2" 2>/dev/null || true
    wait "$2" 2>/dev/null || true
    dpp_log "$1: slowloris $(tail -n 1 -- "$DPP_TMP/slowloris-$1.out")"
}

dpp_start_master --data-root "$root" --http 127.0.0.1:0
dpp_start_worker --threads 1 --http 127.0.0.1:0
mport=$(http_port master)
wport=$(http_port worker-0)
[[ -n $mport && -n $wport ]] || dpp_fail "a daemon did not log its http port"
for _ in $(seq 1 100); do
    [[ $(get "http://127.0.0.1:$wport/readyz" 1) == "200 "*" ready" ]] && break
    sleep 0.1
done
[[ $(get "http://127.0.0.1:$wport/readyz" 1) == "200 "*" ready" ]] ||
    dpp_fail "the worker did not become ready"

dpp_step "80 slowloris connections against the master"
attack master "$mport" 80
pid=$DPP_LAST_PID
probes master "$mport" ready
stop_attack master "$pid"

dpp_step "200 slowloris connections against a worker"
attack worker "$wport" 200
pid=$DPP_LAST_PID
probes worker "$wport" ready
stop_attack worker "$pid"

dpp_step "after the attacks"
[[ $(get "http://127.0.0.1:$mport/healthz" 1) == "200 "*" ok" ]] || dpp_fail "master /healthz after"
[[ $(get "http://127.0.0.1:$wport/healthz" 1) == "200 "*" ok" ]] || dpp_fail "worker /healthz after"
dpp_alive master || dpp_fail "the master died"
dpp_alive worker-0 || dpp_fail "the worker died"
dpp_log "ok"
