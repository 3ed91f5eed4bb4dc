# shellcheck shell=bash
# Helpers for the integration tests and scripts/demo.sh: a temp dir, daemons
# started on 127.0.0.1:0 with --port-file, bounded waits, and one cleanup that
# stops every daemon started here and removes the temp dir on any exit.
#
# Source it from a script running under `set -euo pipefail`, then call
# dpp_setup. Environment:
#   DPP_BIN_DIR     build dir holding dpp-master, dpp-worker, dppctl, dpp-gen
#   DPP_SOURCE_DIR  source tree (default: two levels above this file)
#   DPP_REFSUM      dpp-refsum (default: $DPP_BIN_DIR/tests/integration/dpp-refsum)
#   DPP_KEEP_TMP=1  keep the temp dir (with the daemons' logs) after the run
#   DPP_LOG_LEVEL   the master's --log-level (default info)

DPP_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${DPP_SOURCE_DIR:=$(cd "$DPP_LIB_DIR/../.." && pwd)}"
: "${DPP_BIN_DIR:=$DPP_SOURCE_DIR/build}"
: "${DPP_REFSUM:=$DPP_BIN_DIR/tests/integration/dpp-refsum}"
: "${DPP_LOG_LEVEL:=info}"
# Exit status when a needed binary is missing: 77 tells ctest "skipped";
# the demo sets 1 because there a missing build is an error.
: "${DPP_MISSING_RC:=77}"
# Seconds a daemon may take to write its port file, and to stop on SIGTERM.
: "${DPP_START_TIMEOUT:=20}"
: "${DPP_STOP_TIMEOUT:=5}"

DPP_NAME=dpp
DPP_TMP=""
DPP_MASTER_ADDR=""
DPP_LAST_ADDR=""
DPP_LAST_PID=""
DPP_SESSION=""
DPP_DAEMON_NAMES=()
DPP_DAEMON_PIDS=()
DPP_NWORKERS=0
DPP_WORKER_ARGS=() # given to every worker before its own arguments
DPP_CHILD_PIDS=() # bounded steps in progress (dpp_timeout, dpp_track)
DPP_CLEANUP=()    # commands run at exit once the daemons are stopped (dpp_on_cleanup)

dpp_log() { printf '%s: %s\n' "$DPP_NAME" "$*"; }
dpp_step() { printf '\n== %s: %s\n' "$DPP_NAME" "$*"; }
dpp_fail() {
    printf '%s: FAIL: %s\n' "$DPP_NAME" "$*" >&2
    exit 1
}
dpp_skip() {
    printf '%s: SKIP: %s\n' "$DPP_NAME" "$*" >&2
    exit 77
}

# dpp_use_build_dir NAME [DIR]: for the scripts run outside ctest (the demos,
# bench/e2e.sh): DIR, or $DPP_BIN_DIR, must be a build directory; a missing
# binary is then an error, not a skip. Call before dpp_setup.
dpp_use_build_dir() {
    local name=$1 dir=${2:-${DPP_BIN_DIR:-}}
    if [[ -z $dir ]]; then
        echo "usage: $name BUILD_DIR   (or set DPP_BIN_DIR)" >&2
        exit 2
    fi
    DPP_BIN_DIR=$(cd "$dir" 2>/dev/null && pwd) || {
        echo "$name: no build directory $dir (build first: make build)" >&2
        exit 1
    }
    export DPP_BIN_DIR
    DPP_REFSUM=$DPP_BIN_DIR/tests/integration/dpp-refsum
    DPP_MISSING_RC=1
}

# dpp_setup NAME [TOOL...]: checks that dpp-master, dpp-worker, dppctl,
# dpp-gen and each extra TOOL (a path) exist, creates $DPP_TMP and registers
# the cleanup. Sets DPP_MASTER_BIN, DPP_WORKER_BIN, DPPCTL, DPP_GEN.
dpp_setup() {
    DPP_NAME=$1
    shift
    DPP_MASTER_BIN=$DPP_BIN_DIR/dpp-master
    DPP_WORKER_BIN=$DPP_BIN_DIR/dpp-worker
    DPPCTL=$DPP_BIN_DIR/dppctl
    DPP_GEN=$DPP_BIN_DIR/dpp-gen
    local tool
    for tool in "$DPP_MASTER_BIN" "$DPP_WORKER_BIN" "$DPPCTL" "$DPP_GEN" "$@"; do
        if [[ ! -x $tool ]]; then
            printf '%s: %s: %s is not built (DPP_BIN_DIR=%s)\n' "$DPP_NAME" \
                "$([[ $DPP_MISSING_RC == 77 ]] && echo SKIP || echo ERROR)" "$tool" \
                "$DPP_BIN_DIR" >&2
            exit "$DPP_MISSING_RC"
        fi
    done
    command -v timeout >/dev/null || dpp_skip "timeout(1) is not installed"
    # The trap may fire inside a call whose output is redirected to a file:
    # keep the script's own stdout and stderr to report on.
    exec {DPP_STDOUT_FD}>&1 {DPP_STDERR_FD}>&2
    # EXIT does the work; INT and TERM only turn the signal into an exit so
    # that the cleanup runs once, with the conventional status.
    trap dpp__on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    DPP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dpp-$DPP_NAME.XXXXXX")
    # dppctl finds the master here; a test that wants it offline unsets it.
    unset DPP_MASTER
}

dpp__on_exit() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    exec 1>&"$DPP_STDOUT_FD" 2>&"$DPP_STDERR_FD"
    local pid
    for pid in "${DPP_CHILD_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    # timeout(1) passes the TERM on and SIGKILLs 5 s later: this is bounded,
    # and the temp dir is removed only once nothing writes into it.
    for pid in "${DPP_CHILD_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    dpp_stop_all
    local cmd
    for cmd in "${DPP_CLEANUP[@]}"; do
        eval "$cmd"
    done
    if ((rc == 130)); then
        printf '%s: interrupted\n' "$DPP_NAME" >&2
    elif ((rc != 0 && rc != 77)); then
        dpp_dump_logs
        printf '%s: FAILED (exit %d)\n' "$DPP_NAME" "$rc" >&2
    fi
    if [[ -n $DPP_TMP && -d $DPP_TMP ]]; then
        if [[ ${DPP_KEEP_TMP:-0} == 1 ]]; then
            printf '%s: kept %s\n' "$DPP_NAME" "$DPP_TMP" >&2
        else
            rm -rf -- "$DPP_TMP"
        fi
    fi
    exit "$rc"
}

# Prints the tail of every daemon log (to stderr).
dpp_dump_logs() {
    local i log
    for i in "${!DPP_DAEMON_NAMES[@]}"; do
        log=$DPP_TMP/${DPP_DAEMON_NAMES[i]}.log
        [[ -f $log ]] || continue
        printf '\n----- %s log (%s, last 200 lines) -----\n' "${DPP_DAEMON_NAMES[i]}" "$log" >&2
        tail -n 200 -- "$log" >&2
    done
    ((${#DPP_DAEMON_NAMES[@]} == 0)) || printf -- '----- end of logs -----\n' >&2
}

# Stops every daemon started here: SIGTERM, then SIGKILL for those still
# running after DPP_STOP_TIMEOUT seconds. Safe to call more than once.
dpp_stop_all() {
    local i pid alive deadline
    # SIGINT stops a daemon at once; SIGTERM would make a worker drain first
    # (tests of draining send it themselves).
    for pid in "${DPP_DAEMON_PIDS[@]}"; do
        [[ -z $pid ]] || kill -INT "$pid" 2>/dev/null || true
    done
    deadline=$((SECONDS + DPP_STOP_TIMEOUT))
    while :; do
        alive=0
        for pid in "${DPP_DAEMON_PIDS[@]}"; do
            if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then alive=1; fi
        done
        ((alive && SECONDS < deadline)) || break
        sleep 0.1
    done
    for i in "${!DPP_DAEMON_PIDS[@]}"; do
        pid=${DPP_DAEMON_PIDS[i]}
        [[ -n $pid ]] || continue
        if kill -0 "$pid" 2>/dev/null; then
            printf '%s: %s (pid %d) ignored SIGTERM for %ss; sending SIGKILL\n' "$DPP_NAME" \
                "${DPP_DAEMON_NAMES[i]}" "$pid" "$DPP_STOP_TIMEOUT" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    DPP_DAEMON_PIDS=()
}

# dpp_stop NAME: stops one daemon (SIGINT, or $DPP_STOP_SIGNAL; SIGKILL after
# DPP_STOP_TIMEOUT).
dpp_stop() {
    local i pid deadline
    for i in "${!DPP_DAEMON_NAMES[@]}"; do
        [[ ${DPP_DAEMON_NAMES[i]} == "$1" ]] || continue
        pid=${DPP_DAEMON_PIDS[i]:-}
        [[ -n $pid ]] || continue
        kill -"${DPP_STOP_SIGNAL:-INT}" "$pid" 2>/dev/null || true
        deadline=$((SECONDS + DPP_STOP_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        DPP_DAEMON_PIDS[i]=""
    done
}

# dpp_pid_of NAME: the pid of the latest daemon started by lib.sh under NAME.
dpp_pid_of() {
    local i pid=""
    for i in "${!DPP_DAEMON_NAMES[@]}"; do
        [[ ${DPP_DAEMON_NAMES[i]} != "$1" ]] || pid=${DPP_DAEMON_PIDS[i]}
    done
    echo "$pid"
}

# dpp_alive NAME: true while the daemon NAME runs.
dpp_alive() {
    local i
    for i in "${!DPP_DAEMON_NAMES[@]}"; do
        if [[ ${DPP_DAEMON_NAMES[i]} == "$1" && -n ${DPP_DAEMON_PIDS[i]} ]]; then
            kill -0 "${DPP_DAEMON_PIDS[i]}" 2>/dev/null
            return
        fi
    done
    return 1
}

# dpp_start_daemon NAME BIN ARGS...: starts BIN ARGS... --port-file F in the
# background (log: $DPP_TMP/NAME.log) and waits until F holds the bound
# address, which goes into DPP_LAST_ADDR. Fails, with the log, if the daemon
# exits first or takes longer than DPP_START_TIMEOUT seconds.
dpp_start_daemon() {
    local name=$1 bin=$2
    shift 2
    local port_file=$DPP_TMP/$name.port log=$DPP_TMP/$name.log
    rm -f -- "$port_file"
    # appended: a daemon restarted under the same name keeps its earlier log
    "$bin" "$@" --port-file "$port_file" >>"$log" 2>&1 </dev/null &
    local pid=$!
    DPP_DAEMON_NAMES+=("$name")
    DPP_DAEMON_PIDS+=("$pid")

    local deadline=$((SECONDS + DPP_START_TIMEOUT)) addr=""
    while :; do
        # The daemon writes the file atomically, ending in a newline.
        if [[ -s $port_file ]] && addr=$(<"$port_file") && [[ -n $addr ]]; then
            break
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            local rc=0
            wait "$pid" || rc=$?
            printf '%s: %s exited with status %d before writing %s; its log:\n' \
                "$DPP_NAME" "$name" "$rc" "$port_file" >&2
            cat -- "$log" >&2
            dpp_fail "$name did not start"
        fi
        if ((SECONDS >= deadline)); then
            printf '%s: %s wrote no port file within %ss; its log:\n' "$DPP_NAME" "$name" \
                "$DPP_START_TIMEOUT" >&2
            cat -- "$log" >&2
            dpp_fail "$name did not start"
        fi
        sleep 0.05
    done
    if [[ ! $addr =~ ^127\.0\.0\.1:[0-9]+$ ]]; then
        dpp_fail "$name: port file $port_file holds '$addr', expected 127.0.0.1:PORT"
    fi
    DPP_LAST_ADDR=$addr
}

# dpp_start_master ARGS...: starts dpp-master on 127.0.0.1:0 with a state dir
# in $DPP_TMP and ARGS (the --data-root options); sets DPP_MASTER_ADDR and
# exports DPP_MASTER for dppctl.
dpp_start_master() {
    mkdir -p -- "$DPP_TMP/master-state"
    dpp_start_daemon master "$DPP_MASTER_BIN" --listen 127.0.0.1:0 \
        --state-dir "$DPP_TMP/master-state" --log-level "$DPP_LOG_LEVEL" "$@"
    DPP_MASTER_ADDR=$DPP_LAST_ADDR
    export DPP_MASTER=$DPP_MASTER_ADDR
}

# dpp_start_worker [ARGS...]: starts worker-N against the master, with
# DPP_WORKER_ARGS and ARGS; sets DPP_LAST_ADDR.
# shellcheck disable=SC2120 # the arguments are optional
dpp_start_worker() {
    [[ -n $DPP_MASTER_ADDR ]] || dpp_fail "dpp_start_worker: start the master first"
    dpp_start_daemon "worker-$DPP_NWORKERS" "$DPP_WORKER_BIN" --master "$DPP_MASTER_ADDR" \
        --listen 127.0.0.1:0 "${DPP_WORKER_ARGS[@]}" "$@"
    DPP_NWORKERS=$((DPP_NWORKERS + 1))
}

# dpp_timeout SECS CMD...: runs CMD bounded by SECS seconds (SIGKILL 5 s
# later if it ignores SIGTERM). CMD runs as a tracked background job that we
# wait for, because bash runs a trap only after a foreground command ends but
# interrupts `wait` at once: a signal to the script then stops CMD too.
# Call it from the main shell, not in a pipeline or $(...): a subshell's
# jobs are unknown to the cleanup.
dpp_timeout() {
    local secs=$1
    shift
    local rc=0 pid
    timeout -k 5 "$secs" "$@" &
    pid=$!
    DPP_CHILD_PIDS+=("$pid")
    wait "$pid" || rc=$?
    unset 'DPP_CHILD_PIDS[-1]'
    if ((rc == 124 || rc == 137)); then
        printf '%s: timed out after %ss: %s\n' "$DPP_NAME" "$secs" "$*" >&2
    fi
    return "$rc"
}

# dpp_start_in_netns NAME NS BIN ARGS...: a daemon in network namespace NS
# (log $DPP_TMP/NAME.log), stopped by the cleanup like the others.
dpp_start_in_netns() {
    local name=$1 ns=$2
    shift 2
    ip netns exec "$ns" "$@" >>"$DPP_TMP/$name.log" 2>&1 </dev/null &
    DPP_DAEMON_NAMES+=("$name")
    DPP_DAEMON_PIDS+=("$!")
}

# dpp_wait_log NAME PATTERN: waits up to 10 s for PATTERN in NAME's log.
dpp_wait_log() {
    for _ in $(seq 1 100); do
        grep -q "$2" "$DPP_TMP/$1.log" 2>/dev/null && return 0
        sleep 0.1
    done
    dpp_fail "$1 never logged $2: $(tail -n 20 "$DPP_TMP/$1.log" 2>/dev/null)"
}

# dpp_start_s3 [PROXY ARGS...]: an S3 store on loopback (npm's s3rver, from
# scripts/install-npm-tools.sh's cache) with tests/integration/s3proxy.py in
# front (botocore checks every request's SigV4 there; PROXY ARGS add faults).
# Exports AWS_ENDPOINT_URL (the proxy), AWS_ACCESS_KEY_ID/SECRET, AWS_REGION;
# sets DPP_S3_STORE (s3rver's own host:port) and DPP_S3_STATS (the proxy's
# counts, JSON). Both are stopped by the cleanup.
dpp_start_s3() {
    local bin=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}/node_modules/.bin/s3rver
    [[ -x $bin ]] || dpp_fail "$bin is missing: run scripts/install-npm-tools.sh (needs the npm registry)"
    mkdir -p "$DPP_TMP/s3data"
    # s3rver's continuation tokens use DES, which Node's OpenSSL 3 keeps in its legacy provider.
    # --service-endpoint: BUCKET.s3.localhost is virtual-hosted addressing
    NODE_OPTIONS=--openssl-legacy-provider "$bin" -d "$DPP_TMP/s3data" -a 127.0.0.1 -p 0 --silent \
        --service-endpoint localhost \
        >>"$DPP_TMP/s3rver.log" 2>&1 </dev/null &
    DPP_DAEMON_NAMES+=(s3rver)
    DPP_DAEMON_PIDS+=("$!")
    local _
    DPP_S3_STORE=""
    for _ in $(seq 1 200); do
        DPP_S3_STORE=$(sed -n 's/^S3rver listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$DPP_TMP/s3rver.log")
        [[ -n $DPP_S3_STORE ]] && break
        sleep 0.05
    done
    [[ -n $DPP_S3_STORE ]] || dpp_fail "s3rver did not start: $(tail -n 5 "$DPP_TMP/s3rver.log")"
    export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL_S3 AWS_CA_BUNDLE
    DPP_S3_STATS=$DPP_TMP/s3proxy.json
    dpp_start_daemon s3proxy /usr/bin/python3 "$DPP_SOURCE_DIR/tests/integration/s3proxy.py" \
        --upstream "$DPP_S3_STORE" --key S3RVER:S3RVER --stats "$DPP_S3_STATS" "$@"
    export AWS_ENDPOINT_URL=http://$DPP_LAST_ADDR
}

# dpp_s3_put BUCKET DIR PREFIX: uploads every file under DIR as
# PREFIX/relative path with boto3 (the independent client), 16 at a time;
# makes the bucket when missing.
dpp_s3_put() {
    /usr/bin/python3 - "$@" <<'PY' || dpp_fail "boto3 could not upload $2 to s3://$1/$3"
import boto3, os, sys
from concurrent.futures import ThreadPoolExecutor
bucket, top, prefix = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
    s3.create_bucket(Bucket=bucket)
paths = [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
with ThreadPoolExecutor(16) as ex:
    list(ex.map(lambda p: s3.upload_file(p, bucket, prefix + "/" + os.path.relpath(p, top)), paths))
PY
}

# dpp_s3_stat NAME: a count of the proxy's (requests, faults, signature_failures).
dpp_s3_stat() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$DPP_S3_STATS" "$1"
}

# dpp_kill_mid_read READER SESSION VICTIM [WORKER ARGS...]: kills worker
# VICTIM (SIGKILL) while READER, a background read of SESSION (dpp_read_bg),
# is stopped (SIGSTOP) with the session started and not done, then starts a
# new worker with WORKER ARGS and lets the read go on (SIGCONT). A stopped
# reader cannot end the session, so the kill is mid-read however fast the
# machine. The signals go to READER's process group: timeout(1) makes one of
# its own and dppctl is in it (a SIGSTOP to timeout alone leaves dppctl
# reading); and the session's state is asked with the reader stopped, else a
# fast read ends between the answer and the stop.
dpp_kill_mid_read() {
    local reader=$1 session=$2 victim=$3 _ st
    shift 3
    for _ in $(seq 1 3000); do
        if ! kill -STOP -- "-$reader" 2>/dev/null; then
            kill -0 "$reader" 2>/dev/null ||
                dpp_fail "the read of $session ended before $victim could be killed"
            sleep 0.01 # timeout(1) has not made its process group yet
            continue
        fi
        st=$("$DPPCTL" status "$session" -o json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
s = s[0] if isinstance(s, list) else s
print(s.get("state", ""), s.get("splits_produced", 0) + s.get("splits_consumed", 0))' 2>/dev/null) || st=""
        [[ $st == running\ * && ${st#running } -gt 0 ]] && break
        kill -CONT -- "-$reader"
        sleep 0.01
    done
    [[ $st == running\ * ]] || {
        kill -CONT -- "-$reader"
        dpp_fail "the session $session was not running when $victim was to be killed"
    }
    kill -KILL "$(dpp_pid_of "$victim")"
    dpp_log "killed $victim (the read of $session paused)"
    dpp_start_worker "$@"
    kill -CONT -- "-$reader"
}

# dpp_track PID: the cleanup also stops PID, a background timeout(1) job.
dpp_track() { DPP_CHILD_PIDS+=("$1"); }

# dpp_on_cleanup CMD: runs CMD (eval) at exit, after the daemons are stopped.
dpp_on_cleanup() { DPP_CLEANUP+=("$1"); }

# dpp_ctl ARGS...: dppctl, bounded by DPP_CTL_TIMEOUT (default 120) seconds.
dpp_ctl() { dpp_timeout "${DPP_CTL_TIMEOUT:-120}" "$DPPCTL" "$@"; }

# dpp_gen ARGS...: dpp-gen, bounded.
dpp_gen() {
    dpp_timeout 300 "$DPP_GEN" "$@" || dpp_fail "dpp-gen $* failed"
}

# dpp_submit SPEC: submits SPEC and sets DPP_SESSION to the session id (the
# last line of dppctl's stdout); fails with dppctl's stderr on rejection.
dpp_submit() {
    local spec=$1 out=$DPP_TMP/submit.out err=$DPP_TMP/submit.err rc=0
    dpp_ctl submit "$spec" >"$out" 2>"$err" || rc=$?
    if ((rc != 0)); then
        cat -- "$err" >&2
        dpp_fail "dppctl submit $spec exited $rc"
    fi
    local id
    id=$(tail -n 1 -- "$out")
    [[ -n $id && $id != *[[:space:]]* ]] ||
        dpp_fail "dppctl submit $spec: no session id on the last line of: $(cat -- "$out")"
    # shellcheck disable=SC2034 # read by the scripts that source this file
    DPP_SESSION=$id
}

# dpp_read SESSION OUT [ARGS...]: dppctl read SESSION --output json ARGS > OUT.
dpp_read() {
    local session=$1 out=$2
    shift 2
    local rc=0
    dpp_ctl read "$session" --output json "$@" >"$out" 2>"$out.err" || rc=$?
    if ((rc != 0)); then
        cat -- "$out.err" >&2
        dpp_fail "dppctl read $session $* exited $rc"
    fi
}

# dpp_read_bg SESSION OUT [ARGS...]: starts dppctl read in the background
# (bounded by DPP_CTL_TIMEOUT, tracked for the cleanup); its pid goes into
# DPP_LAST_PID. Collect it with dpp_read_wait.
dpp_read_bg() {
    local session=$1 out=$2
    shift 2
    timeout -k 5 "${DPP_CTL_TIMEOUT:-120}" "$DPPCTL" read "$session" --output json "$@" \
        >"$out" 2>"$out.err" &
    DPP_LAST_PID=$!
    dpp_track "$DPP_LAST_PID"
}

# dpp_read_wait PID OUT: waits for a dpp_read_bg job; fails with its stderr.
dpp_read_wait() {
    local pid=$1 out=$2 rc=0
    wait "$pid" || rc=$?
    if ((rc != 0)); then
        cat -- "$out.err" >&2
        ((rc != 124 && rc != 137)) || dpp_fail "dppctl read (> $out) timed out"
        dpp_fail "dppctl read (> $out) exited $rc"
    fi
}

# dpp_refsum_check SPEC TABLE_DIR ACTUAL [--rank R]: compares dppctl's output
# with dpp-refsum's expectation.
dpp_refsum_check() {
    local spec=$1 table=$2 actual=$3
    shift 3
    local rc=0
    dpp_timeout 300 "$DPP_REFSUM" --spec "$spec" --table "$table" --check "$actual" "$@" ||
        rc=$?
    if ((rc != 0)); then
        printf '%s: dppctl read output (%s):\n' "$DPP_NAME" "$actual" >&2
        cat -- "$actual" >&2
        dpp_fail "dpp-refsum $* found a mismatch in $actual (exit $rc)"
    fi
}

# dpp_wait_status SESSION PATTERN [SECS]: polls `dppctl list` (one line per
# session) until a line of its output matches the extended regex PATTERN.
dpp_wait_status() {
    local session=$1 pattern=$2 secs=${3:-30}
    local deadline=$((SECONDS + secs)) out=$DPP_TMP/status.out
    while :; do
        if DPP_CTL_TIMEOUT=20 dpp_ctl list >"$out" 2>&1 &&
            grep -Eq -- "$pattern" "$out"; then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            cat -- "$out" >&2
            dpp_fail "dppctl list did not match /$pattern/ for $session within ${secs}s"
        fi
        sleep 0.2
    done
}

# dpp_wait_done SESSION [SECS]: waits until the status table shows SESSION in
# state done (its row: `SESSION  STATE  ...`; the header's "SPLITS DONE" must
# not count).
dpp_wait_done() {
    dpp_wait_status "$1" "^$1[[:space:]]+done([[:space:]]|\$)" "${2:-30}"
}

# dpp_expect_reject EXPECTED CMD...: CMD must exit non-zero and print the
# line EXPECTED (exactly) on stderr. Returns 1, having said why, when it does
# not, so that a test can report every wrong rejection before failing.
dpp_expect_reject() {
    local expected=$1
    shift
    local out=$DPP_TMP/reject.out err=$DPP_TMP/reject.err rc=0
    dpp_timeout 60 "$@" >"$out" 2>"$err" || rc=$?
    if ((rc == 0)); then
        printf '%s: stdout: %s\n%s: stderr: %s\n' "$DPP_NAME" "$(cat -- "$out")" "$DPP_NAME" \
            "$(cat -- "$err")" >&2
        printf '%s: MISMATCH: accepted, expected a rejection: %s\n' "$DPP_NAME" "$*" >&2
        return 1
    fi
    if ((rc == 124 || rc == 137)); then
        dpp_fail "timed out: $*"
    fi
    if ! grep -Fxq -- "$expected" "$err"; then
        printf "%s: MISMATCH: stderr of '%s' (exit %d):\n" "$DPP_NAME" "$*" "$rc" >&2
        cat -- "$err" >&2
        printf '%s:   expected the line: %s\n' "$DPP_NAME" "$expected" >&2
        return 1
    fi
    dpp_log "rejected as expected (exit $rc): $expected"
}
