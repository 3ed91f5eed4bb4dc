#!/usr/bin/env bash
# Parquet and JSON Lines tables in an S3-compatible store (s3rver behind the
# signature-checking proxy of s3.sh, boto3 uploading), with the tokenizer
# file an object too: a Parquet session over s3://tables/... delivers what
# dpp-refsum reads from the TFRecord twin of its files, and a JSONL session
# delivers the same sums as the same session over the files on local disk;
# both with two workers killed mid-epoch.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
dpp_setup s3_formats
/usr/bin/python3 -c 'import boto3' 2>/dev/null || dpp_fail "python3-boto3 is not installed (scripts/install-deps.sh)"

root=$DPP_TMP/root
tfroot=$DPP_TMP/tfroot
dpp_gen --rows 30000 --shards 2 --partitions 2 --seed 77 --format parquet --row-group-rows 4000 \
    --strings --out "$root/pq"
dpp_gen --rows 30000 --shards 2 --partitions 2 --seed 77 --strings --out "$tfroot/pq"
dpp_gen --format jsonl --rows 3000 --shards 4 --partitions 1 --seed 78 --out "$root/corpus" >/dev/null
dpp_start_s3
dpp_s3_put tables "$root" warehouse

dpp_start_master --data-root "$root" --data-root s3://tables/warehouse
workers() { # N: starts N workers reading both roots
    for _ in $(seq "$1"); do
        dpp_start_worker --threads 2 --data-root "$root" --data-root s3://tables/warehouse
    done
}
workers 2

# kill_two PID: kills both workers mid-read (the read PID of $DPP_SESSION
# paused meanwhile), starting new ones.
kill_two() {
    local victim
    for victim in $(printf '%s\n' "${DPP_DAEMON_NAMES[@]}" | grep '^worker-' | tail -2); do
        dpp_kill_mid_read "$1" "$DPP_SESSION" "$victim" --threads 2 --data-root "$root" \
            --data-root s3://tables/warehouse
    done
}

dpp_step "case 1: Parquet over s3://, 2 epochs, two workers killed: sums equal dpp-refsum's"
spec=$DPP_TMP/pq.json
sed -E -e 's|"table": "criteo"|"table": "s3://tables/warehouse/pq"|' \
    -e 's/"epochs"[[:space:]]*:[[:space:]]*[0-9]+/"epochs": 2, "format": "parquet", "split_rows": 1500/' \
    -e 's/"batch_size": 4096,/"batch_size": 500,/' \
    "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"
grep -q '"table": "s3://tables/warehouse/pq"' "$spec" || dpp_fail "could not set the table in $spec"
dpp_submit "$spec"
dpp_read_bg "$DPP_SESSION" "$DPP_TMP/pq.out"
reader=$DPP_LAST_PID
kill_two "$reader"
dpp_read_wait "$reader" "$DPP_TMP/pq.out"
dpp_refsum_check "$spec" "$tfroot/pq" "$DPP_TMP/pq.out"
dpp_log "case 1: exact after 2 kills"

dpp_step "case 2: JSONL over s3:// (tokenizer an object too), two workers killed: sums equal the local files'"
ntok=$(wc -l <"$root/corpus/_tokenizer.tiktoken")
text_spec() { # TABLE OUT
    cat >"$2" <<JSON
{"table": "$1", "format": "jsonl", "batch_size": 16, "epochs": 2, "split_rows": 40,
 "shuffle": {"seed": 9}, "remainder": "keep",
 "tokenizer": {"file": "corpus/_tokenizer.tiktoken", "pattern": "cl100k_base",
               "specials": {"<|endoftext|>": $ntok}},
 "sequence": {"length": 64, "pack": "concat"}}
JSON
}
text_spec corpus "$DPP_TMP/local.json"
text_spec s3://tables/warehouse/corpus "$DPP_TMP/s3.json"
dpp_submit "$DPP_TMP/local.json"
dpp_read "$DPP_SESSION" "$DPP_TMP/local.out"
dpp_submit "$DPP_TMP/s3.json"
dpp_read_bg "$DPP_SESSION" "$DPP_TMP/s3.out"
reader=$DPP_LAST_PID
kill_two "$reader"
dpp_read_wait "$reader" "$DPP_TMP/s3.out"
# the sums of each epoch, without the session id
norm() { grep '"epoch"' "$1" | sed -E 's/"session":"[^"]*",?//; s/,?"[a-z_]*(seconds|per_s)":[0-9.e+-]*//g'; }
[[ -n $(norm "$DPP_TMP/local.out") ]] || dpp_fail "case 2: no epoch line in $(cat "$DPP_TMP/local.out")"
diff <(norm "$DPP_TMP/local.out") <(norm "$DPP_TMP/s3.out") >&2 ||
    dpp_fail "case 2: the s3:// session's sums differ from the local files'"
dpp_log "case 2: $(norm "$DPP_TMP/s3.out" | head -1)"

dpp_step "case 3: a tokenizer missing from the store is named at submit (its version is pinned then)"
sed 's|corpus/_tokenizer.tiktoken|corpus/_missing.tiktoken|' "$DPP_TMP/s3.json" >"$DPP_TMP/miss.json"
if dpp_ctl submit "$DPP_TMP/miss.json" >/dev/null 2>"$DPP_TMP/miss.err"; then
    dpp_fail "case 3: a session without its tokenizer was accepted"
fi
grep -q 's3://tables/warehouse/corpus/_missing.tiktoken' "$DPP_TMP/miss.err" ||
    dpp_fail "case 3: $(cat "$DPP_TMP/miss.err")"
dpp_log "case 3: $(head -c 300 "$DPP_TMP/miss.err")"
dpp_log "PASS"
