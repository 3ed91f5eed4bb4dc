#!/usr/bin/env bash
# R12: a trainer takes a checkpoint token at step k, goes on a few steps and
# is killed (SIGKILL); a new process started from the token gets exactly the
# batches after step k, the same ones in the same order, as a reference run
# of the same spec that nobody disturbed (every batch compared by hash, so
# the rows before and after the token add up to exactly once). Two cases:
# the token inside epoch 0 with the trainer killed in the same epoch, and
# the token near the end of epoch 0 with the trainer killed in epoch 1 (the
# master has moved on and must go back to epoch 0 for this rank).
set -euo pipefail
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_fault.sh"
: "${DPP_FAULT_CHECK:=$DPP_BIN_DIR/tests/fault/dpp-fault-check}"
dpp_setup r12 "$DPP_FAULT_CHECK"

rows=20000
fault_setup $rows
# Batches of 300 rows cut across blocks (splits of 2000 rows make blocks of
# 300 and 200), so tokens fall inside blocks; rows shuffled.
sed -i 's/"batch_size": 500/"batch_size": 300, "shuffle": {"seed": 12}/' "$FAULT_SPEC"
per_epoch=$(((rows + 299) / 300))
dpp_start_master --data-root "$FAULT_ROOT"
dpp_start_worker --threads 1
dpp_start_worker --threads 1

check() { timeout -k 5 120 "$DPP_FAULT_CHECK" "$@"; }
# epoch and hash of every batch
seqof() { cut -d' ' -f1,3 "$1"; }

dpp_submit "$FAULT_SPEC"
check --hashes "$DPP_TMP/ref.hashes" "$DPP_MASTER_ADDR" "$DPP_SESSION" 0 "$FAULT_IDS" \
    >"$DPP_TMP/ref.out" 2>&1 || { cat "$DPP_TMP/ref.out"; dpp_fail "the reference run failed"; }
cat "$DPP_TMP/ref.out"
total=$(wc -l <"$DPP_TMP/ref.hashes")
((total == 2 * per_epoch)) || dpp_fail "reference: $total batches, expected $((2 * per_epoch))"

report=()
for case in "17 25" "$((per_epoch - 2)) $((per_epoch + 5))"; do
    read -r k die <<<"$case"
    dpp_submit "$FAULT_SPEC"
    tok=$DPP_TMP/token-$k
    rc=0
    check --hashes "$DPP_TMP/a-$k.hashes" --checkpoint-at "$k" --token "$tok" --die-after "$die" \
        "$DPP_MASTER_ADDR" "$DPP_SESSION" 0 "$FAULT_IDS" >"$DPP_TMP/a-$k.out" 2>&1 || rc=$?
    cat "$DPP_TMP/a-$k.out"
    ((rc == 137)) || dpp_fail "the first trainer should have died of SIGKILL (137), exit $rc"
    [[ -s $tok ]] || dpp_fail "no token written at step $k"
    t0=$(date +%s%3N)
    check --hashes "$DPP_TMP/b-$k.hashes" --resume "$tok" \
        "$DPP_MASTER_ADDR" "$DPP_SESSION" 0 "$FAULT_IDS" >"$DPP_TMP/b-$k.out" 2>&1 ||
        { cat "$DPP_TMP/b-$k.out"; dpp_fail "the resumed trainer failed"; }
    t1=$(date +%s%3N)
    cat "$DPP_TMP/b-$k.out"
    # before the token: what the reference had; after: exactly the rest
    cmp <(seqof "$DPP_TMP/a-$k.hashes" | head -n "$k") <(seqof "$DPP_TMP/ref.hashes" | head -n "$k") ||
        dpp_fail "the first $k batches differ from the reference"
    cmp <(seqof "$DPP_TMP/b-$k.hashes") <(seqof "$DPP_TMP/ref.hashes" | tail -n +"$((k + 1))") ||
        dpp_fail "resumed at step $k: the batches after it differ from the reference's"
    after=$(wc -l <"$DPP_TMP/b-$k.hashes")
    report+=("token at step $k, killed at step $die, resumed: $after batches = reference's rest, resumed run took $((t1 - t0)) ms")
done
grep -q 'rank_resumed' "$DPP_TMP/master.log" || dpp_fail "the master never logged a resume"
for r in "${report[@]}"; do dpp_log "R12: $r"; done
dpp_log "R12: rows $rows x 2 epochs, $total batches per run, 2 resumes: 0 missing, 0 duplicates, same order"
