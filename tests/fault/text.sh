#!/usr/bin/env bash
# The fault suite on a text session (format "jsonl": documents tokenized and
# packed into sequences on the workers). A sequence has no row id: its
# identity is a hash of its tokens and positions (dpp-fault-check --text 1),
# and the expected ones come from an undisturbed read of the whole session
# by one rank. Then, with two ranks and a shuffle:
#   clean   undisturbed: every sequence once per epoch over both ranks;
#   workers three workers killed (SIGKILL) and replaced mid-session;
#   master  the master killed twice and restarted on its state dir;
# each exactly once per epoch, and each rank's batches bit for bit the clean
# run's, in the same order. Last, a trainer takes a checkpoint token, is
# killed, and a new one resumed from the token gets exactly the rest of an
# undisturbed single-rank run's batches.
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup text "$DPP_FAULT_CHECK"

root=$DPP_TMP/root
dpp_gen --format jsonl --rows 1000 --shards 4 --partitions 1 --seed 77 --out "$root/corpus" >/dev/null
tok=$root/corpus/_tokenizer.tiktoken
[[ -s $tok ]] || dpp_fail "dpp-gen wrote no $tok"
ntok=$(wc -l <"$tok")
spec=$DPP_TMP/spec.json
cat >"$spec" <<JSON
{"table": "corpus", "format": "jsonl", "batch_size": 16, "epochs": 2, "consumers": 2,
 "split_rows": 20, "shuffle": {"seed": 9}, "remainder": "keep", "compression": "zstd",
 "text": {"where": {"lang": "en"}},
 "tokenizer": {"file": "corpus/_tokenizer.tiktoken", "pattern": "cl100k_base",
               "specials": {"<|endoftext|>": $ntok}},
 "sequence": {"length": 64, "pack": "concat"}}
JSON
one=$DPP_TMP/one.json
sed 's/"consumers": 2/"consumers": 1/' "$spec" >"$one"
addr_args=(--data-root "$root" --journal-compact-kb 4)
dpp_start_master "${addr_args[@]}"
addr=$DPP_MASTER_ADDR
for _ in 1 2 3; do dpp_start_worker --threads 1; done

check() { timeout -k 5 180 "$DPP_FAULT_CHECK" --text 1 "$@"; }

# every sequence of an epoch, from one rank reading undisturbed
dpp_submit "$one"
check --write-ids "$DPP_TMP/ids.txt" "$addr" "$DPP_SESSION" 0 /dev/null >"$DPP_TMP/ids.out" 2>&1 ||
    { cat "$DPP_TMP/ids.out"; dpp_fail "the read that lists the sequences failed"; }
nseq=$(wc -l <"$DPP_TMP/ids.txt")
((nseq > 200)) || dpp_fail "only $nseq sequences: the corpus is too small to test anything"
dpp_log "$nseq sequences per epoch"

# run NAME WHAT: reads the two-rank session (hashes in NAME-R.hashes) while
# WHAT (none, workers, master) is killed; checks exactly once per epoch.
run() {
    local name=$1 what=$2 pids=() r k pid
    dpp_submit "$spec"
    for r in 0 1; do
        check --share 1 --hashes "$DPP_TMP/$name-$r.hashes" "$addr" "$DPP_SESSION" "$r" \
            "$DPP_TMP/ids.txt" 40 >"$DPP_TMP/$name-$r.out" 2>&1 &
        pids+=($!)
        dpp_track "$!"
    done
    case $what in
    workers)
        for k in 1 2 3; do
            sleep 0.4
            victim=$(random_live_worker)
            kill -KILL "$(dpp_pid_of "$victim")"
            dpp_log "$name: kill $k: $victim"
            dpp_start_worker --threads 1
        done
        ;;
    master)
        for k in 1 2; do
            sleep 0.5
            pid=$(dpp_pid_of master)
            kill -KILL "$pid"
            wait "$pid" 2>/dev/null || true
            dpp_log "$name: kill $k: master (pid $pid)"
            dpp_start_daemon master "$DPP_MASTER_BIN" --listen "$addr" \
                --state-dir "$DPP_TMP/master-state" "${addr_args[@]}"
        done
        ;;
    esac
    for r in 0 1; do
        wait "${pids[r]}" || { cat "$DPP_TMP/$name-$r.out"; dpp_fail "$name: rank $r's reader failed"; }
    done
    local e sum_rows sum_ids line want_ids=$((nseq * (nseq - 1) / 2))
    for e in 0 1; do
        sum_rows=0
        sum_ids=0
        for r in 0 1; do
            line=$(grep "^epoch $e rank $r:" "$DPP_TMP/$name-$r.out")
            grep -q ' duplicates 0 foreign 0 ' <<<"$line" || dpp_fail "$name: $line"
            sum_rows=$((sum_rows + $(sed 's/.* rows \([0-9]*\) .*/\1/' <<<"$line")))
            sum_ids=$((sum_ids + $(sed 's/.* ids_sum \([0-9]*\).*/\1/' <<<"$line")))
        done
        ((sum_rows == nseq && sum_ids == want_ids)) ||
            dpp_fail "$name epoch $e: $sum_rows sequences over the ranks (slot sum $sum_ids); expected $nseq ($want_ids)"
    done
    dpp_log "$name: every sequence once in each epoch over both ranks"
}

run clean none
run workers workers
requeued=$(grep 'worker_lost' "$DPP_TMP/master.log" |
    sed -n 's/.*splits_requeued=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
((requeued > 0)) || dpp_fail "no worker kill took a split away: the run proves nothing"
run master master
replays=$(grep -c "journal_replayed.*sessions=[1-9]" "$DPP_TMP/master.log" || true)
((replays >= 2)) || dpp_fail "the restarted masters did not replay the sessions"
for name in workers master; do
    for r in 0 1; do
        cmp "$DPP_TMP/clean-$r.hashes" "$DPP_TMP/$name-$r.hashes" ||
            dpp_fail "rank $r: the run with $name killed delivered other batches than the clean run"
    done
done
batches=$(cat "$DPP_TMP"/clean-*.hashes | wc -l)

# resume: a token at step k, killed at step k + 6, resumed from the token
dpp_submit "$one"
check --hashes "$DPP_TMP/ref.hashes" "$addr" "$DPP_SESSION" 0 "$DPP_TMP/ids.txt" \
    >"$DPP_TMP/ref.out" 2>&1 || { cat "$DPP_TMP/ref.out"; dpp_fail "the reference run failed"; }
k=9
dpp_submit "$one"
rc=0
check --hashes "$DPP_TMP/a.hashes" --checkpoint-at $k --token "$DPP_TMP/token" --die-after $((k + 6)) \
    "$addr" "$DPP_SESSION" 0 "$DPP_TMP/ids.txt" >"$DPP_TMP/a.out" 2>&1 || rc=$?
((rc == 137)) || { cat "$DPP_TMP/a.out"; dpp_fail "the first trainer should have died of SIGKILL (137), exit $rc"; }
check --hashes "$DPP_TMP/b.hashes" --resume "$DPP_TMP/token" "$addr" "$DPP_SESSION" 0 \
    "$DPP_TMP/ids.txt" >"$DPP_TMP/b.out" 2>&1 || { cat "$DPP_TMP/b.out"; dpp_fail "the resumed trainer failed"; }
seqof() { cut -d' ' -f1,3 "$1"; }
cmp <(seqof "$DPP_TMP/b.hashes") <(seqof "$DPP_TMP/ref.hashes" | tail -n +$((k + 1))) ||
    dpp_fail "resumed at step $k: the batches after it differ from the reference's"
dpp_log "Text faults: $nseq sequences x 2 epochs x 2 ranks, shuffled; 3 worker kills ($requeued splits re-leased) and 2 master kills: $batches batch hashes identical to the clean run, exactly once; resumed at step $k: the reference's $(($(wc -l <"$DPP_TMP/ref.hashes") - k)) remaining batches"
