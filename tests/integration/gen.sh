#!/usr/bin/env bash
# dpp-gen: the documented layout, byte-identical output for the same
# arguments, different output for another seed, and clear refusals of bad
# arguments.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
dpp_setup gen

dpp_step "same arguments, byte-identical files"
dpp_gen --rows 3001 --shards 2 --partitions 3 --seed 11 --out "$DPP_TMP/a"
dpp_gen --rows 3001 --shards 2 --partitions 3 --seed 11 --out "$DPP_TMP/b"
diff -r "$DPP_TMP/a" "$DPP_TMP/b" >/dev/null || dpp_fail "two runs with the same arguments differ"
expected="ds=2026-01-01/part-00000.tfrecord
ds=2026-01-01/part-00001.tfrecord
ds=2026-01-02/part-00000.tfrecord
ds=2026-01-02/part-00001.tfrecord
ds=2026-01-03/part-00000.tfrecord
ds=2026-01-03/part-00001.tfrecord"
actual=$(cd "$DPP_TMP/a" && find . -type f | sed 's|^\./||' | sort)
[[ $actual == "$expected" ]] || dpp_fail "unexpected layout: $actual"

dpp_step "another seed, other files"
dpp_gen --rows 3001 --shards 2 --partitions 3 --seed 12 --out "$DPP_TMP/c"
if diff -r "$DPP_TMP/a" "$DPP_TMP/c" >/dev/null; then
    dpp_fail "seeds 11 and 12 gave identical tables"
fi

dpp_step "bad arguments are refused with a reason"
for args in "--rows -5 --shards 1 --partitions 1 --seed 1 --out $DPP_TMP/x" \
    "--rows 10 --shards 0 --partitions 1 --seed 1 --out $DPP_TMP/x" \
    "--rows 10 --shards 1 --partitions 1 --seed 1" \
    "--rows ten --shards 1 --partitions 1 --seed 1 --out $DPP_TMP/x"; do
    rc=0
    # shellcheck disable=SC2086 # word splitting of the argument list is intended
    "$DPP_GEN" $args >/dev/null 2>"$DPP_TMP/err" || rc=$?
    ((rc != 0)) || dpp_fail "dpp-gen $args succeeded"
    grep -q '^dpp-gen: ' "$DPP_TMP/err" || dpp_fail "dpp-gen $args: no reason on stderr"
done
dpp_log "PASS"
