#!/usr/bin/env bash
# Behaviours an adversarial probe found to hold, kept from regressing. One
# script, seven cases, each with its own master (and state dir) so that a
# case's daemons are stopped before the next starts:
#   1. a second master on a state dir in use exits at once, saying so; the
#      first keeps serving
#   2. the master SIGSTOPped past the workers' timeout, then SIGCONTed: the
#      read in progress ends with every row exactly once, the session done
#   3. a worker and the master SIGKILLed together, the master restarted on
#      the same address and state dir, a new worker: every row exactly once
#   4. the state dir's filesystem fills up (a 256 KiB tmpfs): the master
#      stops rather than acknowledge a session it did not journal; with room
#      again it replays every session it acknowledged (root only: skipped,
#      saying why, where mount is not permitted)
#   5. 1,000 sessions (250 under the sanitizers) submitted at once: `dppctl list` answers within
#      2 s during and after the burst and lists them all
#   6. a partition folder swapped for a symlink to a folder outside the data
#      root after the master resolved the table: the worker refuses it, by
#      path, both when indexing and when reading, and never reads the files
#      outside
#   7. a client paused past the master's --idle-timeout-ms: the master
#      closes it; resumed, it reconnects and every row arrives once
set -euo pipefail
# shellcheck source=../integration/lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=lib_fault.sh
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup held "$DPP_FAULT_CHECK"
command -v pgrep >/dev/null || dpp_skip "pgrep is not installed"

ROOT=$DPP_TMP/root
RESULTS=()

# ---------------------------------------------------------------- helpers

# case_begin N TITLE: names the case in every message from here on.
case_begin() {
    HELD_CASE=$1
    DPP_NAME="held/case$1"
    CASE_DAEMONS=()
    dpp_step "$2"
}

# case_end SUMMARY: stops the case's daemons and records its result.
case_end() {
    local n
    for n in "${CASE_DAEMONS[@]}"; do
        dpp_stop "$n"
    done
    RESULTS+=("case $HELD_CASE: PASS: $1")
    dpp_log "PASS: $1"
}

now_ms() { date +%s%3N; }

# held_umount DIR: unmounts DIR if it is a mount point.
held_umount() { if mountpoint -q "$1"; then umount "$1" || umount -l "$1"; fi; }

# held_master NAME STATE_DIR [ARGS...]: a master named NAME (log NAME.log) on
# $HELD_LISTEN (default 127.0.0.1:0) with STATE_DIR; dppctl and the workers
# started next use it.
held_master() {
    local name=$1 state=$2
    shift 2
    mkdir -p -- "$state"
    dpp_start_daemon "$name" "$DPP_MASTER_BIN" --listen "${HELD_LISTEN:-127.0.0.1:0}" \
        --state-dir "$state" --data-root "$ROOT" --log-level "$DPP_LOG_LEVEL" "$@"
    DPP_MASTER_ADDR=$DPP_LAST_ADDR
    export DPP_MASTER=$DPP_MASTER_ADDR
    CASE_DAEMONS+=("$name")
}

# held_worker [ARGS...]: a one-thread worker of the current master; its name
# goes into HELD_WORKER.
held_worker() {
    dpp_start_worker --threads 1 "$@"
    HELD_WORKER=worker-$((DPP_NWORKERS - 1))
    CASE_DAEMONS+=("$HELD_WORKER")
}

# session_state SESSION: its state in `dppctl list` (empty if not listed).
session_state() {
    DPP_CTL_TIMEOUT=20 dpp_ctl list >"$DPP_TMP/list.out" 2>&1 || true
    awk -v s="$1" '$1 == s { print $2 }' "$DPP_TMP/list.out"
}

# wait_progress SESSION: waits until at least one split of SESSION was
# consumed (its SPLITS DONE column reads 1/... or more), so that a fault
# injected next lands in the middle of the read.
wait_progress() {
    local deadline=$((SECONDS + 20))
    while :; do
        DPP_CTL_TIMEOUT=20 dpp_ctl list >"$DPP_TMP/list.out" 2>&1 || true
        if awk -v s="$1" '$1 == s && $4 ~ /^[1-9][0-9]*\// { f = 1 } END { exit !f }' \
            "$DPP_TMP/list.out"; then
            return 0
        fi
        ((SECONDS < deadline)) || {
            cat -- "$DPP_TMP/list.out" >&2
            dpp_fail "session $1 consumed no split within 20 s"
        }
        sleep 0.05
    done
}

# child_of PID: the (only) child of PID, a timeout(1) job started here.
child_of() {
    local c="" i
    for i in $(seq 50); do
        c=$(pgrep -P "$1" | head -n 1) && [[ -n $c ]] && break
        sleep 0.02
    done
    [[ -n $c ]] || dpp_fail "no child process under pid $1"
    echo "$c"
}

# expect_done SESSION: `dppctl status` says the session is done.
expect_done() {
    DPP_CTL_TIMEOUT=20 dpp_ctl status "$1" --output json >"$DPP_TMP/status.json" 2>&1 || true
    grep -q '"state":"done"' "$DPP_TMP/status.json" ||
        dpp_fail "session $1 is not done: $(cat -- "$DPP_TMP/status.json")"
}

# checker_reconnects: the reconnects the fault checker counted.
checker_reconnects() {
    sed -n 's/^fault-check: .* reconnects \([0-9][0-9]*\)$/\1/p' "$DPP_TMP/check.out"
}

# ---------------------------------------------------------------- data

dpp_step "tables"
# criteo: 20000 rows, 8 files, sidecar indexes; the spec of lib_fault.sh
# (row_id as a sparse feature, 2 epochs, split_rows 2000: 10 splits and 40
# batches an epoch) read by dpp-fault-check, which counts every row.
rows=20000
FAULT_ROOT=$ROOT
fault_setup $rows --index >/dev/null
# small: one file, for the many-sessions case
dpp_gen --rows 200 --shards 1 --partitions 1 --seed 1 --index --out "$ROOT/small" >/dev/null
SMALL_SPEC=$DPP_TMP/small.json
cat >"$SMALL_SPEC" <<'JSON'
{"table": "small", "batch_size": 100, "epochs": 1,
 "features": {"sparse": [{"name": "row_id"}]}, "label": {"name": "label"}}
JSON
# wide: 128 files, so that one session is a 7 KiB journal record and a
# 256 KiB state dir fills in a few dozen submissions
dpp_gen --rows 256 --shards 32 --partitions 4 --seed 7 --index --out "$ROOT/wide" >/dev/null
WIDE_SPEC=$DPP_TMP/wide.json
sed 's/"small"/"wide"/' "$SMALL_SPEC" >"$WIDE_SPEC"
# parts: two partitions, for the symlink case
dpp_gen --rows 4000 --shards 2 --partitions 2 --seed 11 --index --out "$ROOT/parts" >/dev/null
PARTS_SPEC=$DPP_TMP/parts.json
cat >"$PARTS_SPEC" <<'JSON'
{"table": "parts", "batch_size": 250, "epochs": 1, "split_rows": 500,
 "features": {"sparse": [{"name": "row_id"}]}, "label": {"name": "label"}}
JSON
# the same but split differently: the master's index cache does not apply
sed 's/"split_rows": 500/"split_rows": 400/' "$PARTS_SPEC" >"$DPP_TMP/parts400.json"

# ---------------------------------------------------------------- 1
case_begin 1 "a second master on the same state dir is refused"
held_master m1 "$DPP_TMP/st1"
first=$DPP_MASTER_ADDR
rc=0
t0=$(now_ms)
dpp_timeout 10 "$DPP_MASTER_BIN" --listen 127.0.0.1:0 --state-dir "$DPP_TMP/st1" \
    --data-root "$ROOT" --port-file "$DPP_TMP/m1b.port" >"$DPP_TMP/m1b.log" 2>&1 || rc=$?
t1=$(now_ms)
cat -- "$DPP_TMP/m1b.log"
((rc != 0)) || dpp_fail "a second master on $DPP_TMP/st1 started (exit 0)"
((rc != 124 && rc != 137)) || dpp_fail "the second master did not exit within 10 s"
((t1 - t0 < 3000)) || dpp_fail "the second master took $((t1 - t0)) ms to give up"
[[ ! -s $DPP_TMP/m1b.port ]] || dpp_fail "the second master wrote a port file: $(<"$DPP_TMP/m1b.port")"
grep -q 'state_dir_unusable .*hint="another master uses it"' "$DPP_TMP/m1b.log" ||
    dpp_fail "the second master's output does not say the state dir is in use"
dpp_alive m1 || dpp_fail "the first master died"
DPP_CTL_TIMEOUT=10 dpp_ctl list >"$DPP_TMP/list.out" || dpp_fail "dppctl list on the first master failed"
dpp_submit "$SMALL_SPEC"
[[ $(session_state "$DPP_SESSION") == indexing ]] ||
    dpp_fail "the first master does not list the session just submitted"
case_end "second master exit $rc in $((t1 - t0)) ms with state_dir_unusable (another master uses it); first at $first still serves"

# ---------------------------------------------------------------- 2
case_begin 2 "SIGSTOP of the master for 3 s, past the workers' 1.5 s timeout"
held_master m2 "$DPP_TMP/st2" --worker-timeout-ms 1500 --heartbeat-ms 200
held_worker
held_worker
dpp_submit "$FAULT_SPEC"
session=$DPP_SESSION
fault_check_bg 40
wait_progress "$session"
mpid=$(dpp_pid_of m2)
kill -0 "$FAULT_CHECK_PID" 2>/dev/null || dpp_fail "the read ended before the master was paused"
kill -STOP "$mpid"
dpp_log "master (pid $mpid) stopped"
sleep 3
kill -CONT "$mpid"
dpp_log "master continued"
fault_check_wait
expect_done "$session"
lost=$(grep -c worker_lost "$DPP_TMP/m2.log" || true)
case_end "master paused 3 s mid-read (worker timeout 1.5 s, $lost worker_lost after): 2 epochs, 0 missing, 0 duplicates, session done"

# ---------------------------------------------------------------- 3
case_begin 3 "SIGKILL of a worker and the master together, master restarted"
held_master m3 "$DPP_TMP/st3" --worker-timeout-ms 1500 --heartbeat-ms 200
addr=$DPP_MASTER_ADDR
held_worker
held_worker
victim=$HELD_WORKER
dpp_submit "$FAULT_SPEC"
session=$DPP_SESSION
fault_check_bg 20
wait_progress "$session"
mpid=$(dpp_pid_of m3)
wpid=$(dpp_pid_of "$victim")
kill -0 "$FAULT_CHECK_PID" 2>/dev/null || dpp_fail "the read ended before the kills"
kill -KILL "$wpid" "$mpid"
wait "$wpid" "$mpid" 2>/dev/null || true
dpp_log "killed $victim (pid $wpid) and the master (pid $mpid)"
HELD_LISTEN=$addr held_master m3 "$DPP_TMP/st3" --worker-timeout-ms 1500 --heartbeat-ms 200
grep -q "journal_replayed.*sessions=1 unfinished=1" "$DPP_TMP/m3.log" ||
    dpp_fail "the restarted master did not replay the session: $(grep journal "$DPP_TMP/m3.log")"
held_worker
fault_check_wait
expect_done "$session"
case_end "worker and master killed mid-read, master replayed and a new worker joined: 2 epochs, 0 missing, 0 duplicates, session done"

# ---------------------------------------------------------------- 4
case_begin 4 "a full state-dir filesystem (256 KiB tmpfs)"
st4=$DPP_TMP/st4
mkdir -p -- "$st4"
skip4=""
if (($(id -u) != 0)); then
    skip4="not root: mount -t tmpfs needs it"
elif ! mount -t tmpfs -o size=256k,mode=0750 tmpfs "$st4" 2>"$DPP_TMP/mount.err"; then
    skip4="mount -t tmpfs is not permitted here: $(tr '\n' ' ' <"$DPP_TMP/mount.err")"
fi
if [[ -n $skip4 ]]; then
    RESULTS+=("case 4: SKIPPED: $skip4")
    dpp_log "SKIP: $skip4"
else
    dpp_on_cleanup "held_umount '$st4'"
    held_master m4 "$st4"
    mpid=$(dpp_pid_of m4)
    acked=$DPP_TMP/acked.txt
    : >"$acked"
    refused=0
    for i in $(seq 200); do
        rc=0
        DPP_CTL_TIMEOUT=20 dpp_ctl submit "$WIDE_SPEC" >"$DPP_TMP/sub4.out" 2>"$DPP_TMP/sub4.err" || rc=$?
        if ((rc != 0)); then
            refused=$i
            break
        fi
        tail -n 1 -- "$DPP_TMP/sub4.out" >>"$acked"
    done
    nacked=$(wc -l <"$acked")
    ((refused > 0)) || dpp_fail "200 sessions (1.4 MiB of journal) fitted in a 256 KiB state dir"
    dpp_log "submission $refused refused (exit $rc): $(cat -- "$DPP_TMP/sub4.err")"
    grep -q "journal: No space left on device" "$DPP_TMP/sub4.err" ||
        dpp_fail "the refused submission does not say why: $(cat -- "$DPP_TMP/sub4.err")"
    dpp_log "state dir: $(df -k "$st4" | tail -n 1)"
    deadline=$((SECONDS + 10))
    while kill -0 "$mpid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
    kill -0 "$mpid" 2>/dev/null &&
        dpp_fail "the master still runs after a journal write failed (it may go on acknowledging what it cannot journal)"
    mrc=0
    wait "$mpid" || mrc=$?
    dpp_stop m4
    ((mrc != 0)) || dpp_fail "the master stopped with exit status 0 after a journal write failed"
    grep -q 'journal_write_failed .*action=stopping' "$DPP_TMP/m4.log" ||
        dpp_fail "the master's log has no journal_write_failed line: $(tail -n 5 "$DPP_TMP/m4.log")"
    dpp_log "master exited $mrc: $(grep -m 1 journal_write_failed "$DPP_TMP/m4.log")"
    # with room again: every acknowledged session replayed, nothing torn
    mount -o remount,size=4m "$st4" || dpp_fail "mount -o remount,size=4m $st4 failed"
    held_master m4 "$st4"
    grep -q "journal_replayed.*sessions=$nacked " "$DPP_TMP/m4.log" ||
        dpp_fail "the restarted master did not replay exactly the $nacked acknowledged sessions: $(grep journal_ "$DPP_TMP/m4.log")"
    ! grep -Eq 'journal_torn_tail|journal_unusable' "$DPP_TMP/m4.log" ||
        dpp_fail "the replay was not clean: $(grep -E 'journal_torn_tail|journal_unusable' "$DPP_TMP/m4.log")"
    DPP_CTL_TIMEOUT=10 dpp_ctl list >"$DPP_TMP/list.out" || dpp_fail "dppctl list failed after the restart"
    missing=$(awk 'NR == FNR { listed[$1] = 1; next } !($1 in listed)' "$DPP_TMP/list.out" "$acked")
    [[ -z $missing ]] || dpp_fail "acknowledged sessions lost by the restart: $missing"
    dpp_submit "$WIDE_SPEC"
    case_end "master on a 256 KiB tmpfs acknowledged $nacked sessions, refused submission $refused, exited $mrc (journal_write_failed); remounted at 4 MiB it replayed all $nacked cleanly and took a new one"
    held_umount "$st4"
fi

# ---------------------------------------------------------------- 5
# 1,000 dppctl submit processes, 4 at a time: ~7 s on 2 cores (an exec
# alone costs ~12 ms there). Under the sanitizers each dppctl costs ~70 ms of
# start-up alone, so that build sends 250: the optimised build keeps the
# full burst, and 250 still overlap many dppctl list probes.
nsub=1000
[[ ${DPP_SANITIZE:-OFF} != ON ]] || nsub=250
case_begin 5 "$nsub sessions submitted at once"
held_master m5 "$DPP_TMP/st5"
timeout -k 5 120 xargs -P 4 -I{} "$DPPCTL" submit "$SMALL_SPEC" < <(seq "$nsub") \
    >"$DPP_TMP/sub5.out" 2>"$DPP_TMP/sub5.err" &
subpid=$!
dpp_track "$subpid"
t0=$(now_ms)
worst=0
probes=0
list_ms() {
    local a b
    a=$(now_ms)
    DPP_CTL_TIMEOUT=10 dpp_ctl list >"$DPP_TMP/list5.out" 2>&1 || dpp_fail "dppctl list failed: $(cat -- "$DPP_TMP/list5.out")"
    b=$(now_ms)
    ((b - a <= worst)) || worst=$((b - a))
    probes=$((probes + 1))
}
while kill -0 "$subpid" 2>/dev/null; do
    list_ms
    sleep 0.3
done
rc=0
wait "$subpid" || rc=$?
t1=$(now_ms)
((rc == 0)) || dpp_fail "a submission failed (xargs exit $rc): $(head -n 5 "$DPP_TMP/sub5.err")"
list_ms
grep -Eo '^s[0-9a-f]{16}$' "$DPP_TMP/sub5.out" | sort -u >"$DPP_TMP/ids5.txt"
nids=$(wc -l <"$DPP_TMP/ids5.txt")
((nids == nsub)) || dpp_fail "$nsub submissions gave $nids distinct session ids"
((worst < 2000)) || dpp_fail "dppctl list took $worst ms (limit 2000) during or after the burst"
omitted=$(sed -n 's/^(\([0-9]*\) older sessions not listed)$/\1/p' "$DPP_TMP/list5.out")
listed=$(awk 'NR == FNR { want[$1] = 1; next } ($1 in want) { n++ } END { print n + 0 }' \
    "$DPP_TMP/ids5.txt" "$DPP_TMP/list5.out")
((listed + ${omitted:-0} >= nsub)) ||
    dpp_fail "dppctl list shows $listed of the $nsub sessions (${omitted:-0} said omitted)"
dpp_alive m5 || dpp_fail "the master died"
case_end "$nsub sessions in $((t1 - t0)) ms; $probes dppctl list during and after, slowest $worst ms; $listed listed${omitted:+, $omitted said omitted}"

# ---------------------------------------------------------------- 6
case_begin 6 "a partition folder swapped for a symlink outside the data root"
held_master m6 "$DPP_TMP/st6"
held_worker --data-root "$ROOT"
# A: indexed by the worker; the master caches the indexes
dpp_submit "$PARTS_SPEC"
a=$DPP_SESSION
dpp_wait_status "$a" "^${a}[[:space:]]+running([[:space:]]|\$)" 30
DPP_CTL_TIMEOUT=10 dpp_ctl cancel "$a" >/dev/null || dpp_fail "dppctl cancel $a failed"
dpp_stop "$HELD_WORKER"
# B: indexed from the cache at submit, so its files are next opened to be
# read; C: split otherwise, so its files are next opened to be indexed
dpp_submit "$PARTS_SPEC"
b=$DPP_SESSION
dpp_submit "$DPP_TMP/parts400.json"
c=$DPP_SESSION
[[ $(session_state "$b") == running ]] || dpp_fail "session $b is not running at once: $(cat -- "$DPP_TMP/list.out")"
[[ $(session_state "$c") == indexing ]] || dpp_fail "session $c is not indexing: $(cat -- "$DPP_TMP/list.out")"
# The swap: the partition's files now exist only as fresh copies outside
# the root, reached through a symlink where the folder was.
part=ds=2026-01-02
mkdir -p -- "$DPP_TMP/outside" "$DPP_TMP/attic"
cp -r -- "$ROOT/parts/$part" "$DPP_TMP/outside/$part"
mv -- "$ROOT/parts/$part" "$DPP_TMP/attic/$part"
ln -s -- "$DPP_TMP/outside/$part" "$ROOT/parts/$part"
# A read of a file sets its atime here (relatime: the copies' atime is not
# later than their mtime) if this filesystem keeps atimes: a canary says.
sleep 0.05
stat -c '%n %x' "$DPP_TMP/outside/$part"/*.tfrecord >"$DPP_TMP/atime.before"
cp -- "$DPP_TMP/outside/$part/part-00000.tfrecord.idx" "$DPP_TMP/canary"
sleep 0.05
c0=$(stat -c %x "$DPP_TMP/canary")
sleep 0.05
cat -- "$DPP_TMP/canary" >/dev/null
atime_kept=0
[[ $(stat -c %x "$DPP_TMP/canary") == "$c0" ]] || atime_kept=1
held_worker --data-root "$ROOT"
rc=0
DPP_CTL_TIMEOUT=30 dpp_ctl read "$b" --output json >"$DPP_TMP/read6.json" 2>"$DPP_TMP/read6.err" || rc=$?
dpp_log "read of $b: exit $rc: $(cat -- "$DPP_TMP/read6.err")"
((rc == 3)) || dpp_fail "the read of $b exited $rc, expected 3 (the session failed)"
grep -q "file $part/part-0000[01]\.tfrecord: .*symlink" "$DPP_TMP/read6.err" ||
    dpp_fail "the read's error does not name the swapped path $part/...: $(cat -- "$DPP_TMP/read6.err")"
dpp_wait_status "$c" "^${c}[[:space:]]+failed([[:space:]]|\$)" 30
msg_c=$(awk -v s="$c" '$1 == s' "$DPP_TMP/status.out")
[[ $msg_c =~ error:\ .*file\ $part/part-0000[01]\.tfrecord:\ .*symlink ]] ||
    dpp_fail "session $c failed without naming the swapped path: $msg_c"
dpp_log "session $c: $msg_c"
if ((atime_kept)); then
    stat -c '%n %x' "$DPP_TMP/outside/$part"/*.tfrecord >"$DPP_TMP/atime.after"
    cmp -s "$DPP_TMP/atime.before" "$DPP_TMP/atime.after" ||
        dpp_fail "a file outside the data root was read: $(diff "$DPP_TMP/atime.before" "$DPP_TMP/atime.after")"
    read_check="their atimes unchanged"
else
    read_check="not checked: this filesystem does not update atimes"
    dpp_log "atimes are not updated here: the outside files' reads are not checked"
fi
case_end "read of $b (indexed) exit 3 and $c (indexing) failed, both naming $part/part-...tfrecord (symlink); outside files $read_check"

# ---------------------------------------------------------------- 7
case_begin 7 "a client paused 4 s past the master's 2 s idle timeout"
held_master m7 "$DPP_TMP/st7" --idle-timeout-ms 2000
held_worker
held_worker
dpp_submit "$FAULT_SPEC"
session=$DPP_SESSION
# dpp-fault-check reads through libdppclient like dppctl read, but slowly
# (40 ms a batch), so the pause lands mid-read, and counts every row.
fault_check_bg 40
cpid=$(child_of "$FAULT_CHECK_PID")
wait_progress "$session"
kill -0 "$cpid" 2>/dev/null || dpp_fail "the read ended before it was paused"
before=$(grep -c 'idle_timeout .*role=client' "$DPP_TMP/m7.log" || true)
kill -STOP "$cpid"
dpp_log "reader (pid $cpid) stopped"
sleep 4
after=$(grep -c 'idle_timeout .*role=client' "$DPP_TMP/m7.log" || true)
kill -CONT "$cpid"
dpp_log "reader continued"
((after > before)) || dpp_fail "the master did not close the paused client for idleness"
fault_check_wait
reconnects=$(checker_reconnects)
((${reconnects:-0} >= 1)) || dpp_fail "the client did not reconnect (reconnects ${reconnects:-?})"
expect_done "$session"
case_end "reader paused 4 s (idle timeout 2 s): closed by the master, $reconnects reconnects, 2 epochs, 0 missing, 0 duplicates, session done"

DPP_NAME=held
dpp_step "summary"
printf '%s\n' "${RESULTS[@]}"
