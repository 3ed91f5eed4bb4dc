#!/usr/bin/env bash
# dpp demo (`make demo`): generates a small Criteo-like table, runs a master
# and two workers on loopback, reads examples/criteo.json through them and
# checks that every row arrived. The table is written both as TFRecord and
# as Parquet (the same rows) and read in each format, and the two sessions
# must give the same sums; DPP_DEMO_FORMAT=tfrecord or parquet (make demo
# FORMAT=...) reads only one. Usage: scripts/demo.sh [BUILD_DIR] (or
# DPP_BIN_DIR=BUILD_DIR). Every daemon it starts is stopped on exit, on
# failure and on Ctrl-C.
set -euo pipefail

# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib.sh"
dpp_use_build_dir demo "${1:-}"
dpp_setup demo

rows=200000
partitions=4
shards=4
spec=$DPP_SOURCE_DIR/examples/criteo.json
[[ -f $spec ]] || dpp_fail "$spec is missing"
root=$DPP_TMP/root
case ${DPP_DEMO_FORMAT:-both} in
both) formats=(tfrecord parquet) ;;
tfrecord | parquet) formats=("$DPP_DEMO_FORMAT") ;;
*) dpp_fail "DPP_DEMO_FORMAT must be tfrecord, parquet or both, not \"$DPP_DEMO_FORMAT\"" ;;
esac

say() { printf '%s\n' "$*"; }
step() { printf '\n[%s] %s\n' "$1" "$2"; }
# indent FILE: prints FILE indented under the step title. (Output goes
# through files, not pipes: a pipeline's commands would run in subshells,
# out of the cleanup's reach.)
indent() { sed 's/^/      /' -- "$1"; }

say "dpp demo: binaries from $DPP_BIN_DIR, scratch space in $DPP_TMP"

step 1/5 "Generating a Criteo-like table: $rows rows, $partitions partitions x $shards shards, as ${formats[*]}"
for format in "${formats[@]}"; do
    dpp_gen --rows "$rows" --shards "$shards" --partitions "$partitions" --seed 1 \
        --format "$format" --out "$root/criteo-$format" >"$DPP_TMP/gen.out"
    indent "$DPP_TMP/gen.out"
    files=("$root/criteo-$format"/*"="*/*."$format")
    say "      ${#files[@]} $format files, $(du -sh "$root/criteo-$format" | cut -f1) in $root/criteo-$format"
done

step 2/5 "Starting one master and two workers on free loopback ports"
dpp_start_master --data-root "$root"
say "      master   $DPP_MASTER_ADDR"
dpp_start_worker
say "      worker 0 $DPP_LAST_ADDR"
dpp_start_worker
say "      worker 1 $DPP_LAST_ADDR"

step 3/5 "Submitting examples/criteo.json (13 dense features: clamp, log1p, clamp; 26 sparse: modulo, truncate)"
declare -A session_of
for format in "${formats[@]}"; do
    # the same spec, pointed at this format's copy of the table
    sed "s/\"table\": *\"criteo\"/\"table\": \"criteo-$format\", \"format\": \"$format\"/" "$spec" \
        >"$DPP_TMP/criteo-$format.json"
    dpp_submit "$DPP_TMP/criteo-$format.json"
    session_of[$format]=$DPP_SESSION
    say "      $format: session $DPP_SESSION"
    dpp_ctl status "$DPP_SESSION" >"$DPP_TMP/status.txt" || dpp_fail "dppctl status $DPP_SESSION failed"
    indent "$DPP_TMP/status.txt"
done

step 4/5 "Reading each session as trainer rank 0 (dppctl read SESSION --output json)"
for format in "${formats[@]}"; do
    session=${session_of[$format]}
    say "      $format: dppctl read $session"
    dpp_read "$session" "$DPP_TMP/read-$format.jsonl"
    dpp_ctl status "$session" >"$DPP_TMP/status.txt" || dpp_fail "dppctl status $session failed"
    indent "$DPP_TMP/status.txt"
done

step 5/5 "Summary"
# field LINE KEY: the number after "KEY": in one JSON line of dppctl read.
field() {
    local re="\"$2\":([-+0-9.eE]+)"
    [[ $1 =~ $re ]] || dpp_fail "no \"$2\" in: $1"
    printf '%s' "${BASH_REMATCH[1]}"
}
ok=1
for format in "${formats[@]}"; do
    out=$DPP_TMP/read-$format.jsonl
    epochs=0
    while IFS= read -r line; do
        [[ $line == \{* ]] || continue
        epoch=$(field "$line" epoch)
        got=$(field "$line" rows)
        batches=$(field "$line" batches)
        rate=$(field "$line" rows_per_s)
        printf '      %-8s epoch %s: %s rows in %s batches, %.0f rows/s\n' "$format" "$epoch" "$got" \
            "$batches" "$rate"
        ((got == rows)) || ok=0
        epochs=$((epochs + 1))
    done <"$out"
    ((epochs > 0)) || dpp_fail "dppctl read printed no epoch line: $(cat -- "$out")"
done
if ((!ok)); then
    dpp_fail "expected $rows rows in every epoch; see above"
fi
if ((${#formats[@]} == 2)); then
    # the sums of the two sessions, without the rate: the same rows, the same numbers
    for format in "${formats[@]}"; do
        sed 's/,"rows_per_s":[^,}]*//' "$DPP_TMP/read-$format.jsonl" >"$DPP_TMP/sums-$format.jsonl"
    done
    cmp -s "$DPP_TMP/sums-tfrecord.jsonl" "$DPP_TMP/sums-parquet.jsonl" ||
        dpp_fail "the TFRecord and Parquet sessions gave different sums: $(cat "$DPP_TMP"/sums-*.jsonl)"
    say "      TFRecord and Parquet: the same label, dense and id sums"
fi
say ""
say "All $rows rows arrived. Stopping the daemons."
