#!/usr/bin/env bash
# dpp demo (`make demo`): generates a small Criteo-like table, runs a master
# and two workers on loopback, reads examples/criteo.json through them and
# checks that every row arrived. Usage: scripts/demo.sh [BUILD_DIR]
# (or DPP_BIN_DIR=BUILD_DIR). Every daemon it starts is stopped on exit,
# on failure and on Ctrl-C.
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

say() { printf '%s\n' "$*"; }
step() { printf '\n[%s] %s\n' "$1" "$2"; }
# indent FILE: prints FILE indented under the step title. (Output goes
# through files, not pipes: a pipeline's commands would run in subshells,
# out of the cleanup's reach.)
indent() { sed 's/^/      /' -- "$1"; }

say "dpp demo: binaries from $DPP_BIN_DIR, scratch space in $DPP_TMP"

step 1/5 "Generating a Criteo-like table: $rows rows, $partitions partitions x $shards shards"
dpp_gen --rows "$rows" --shards "$shards" --partitions "$partitions" --seed 1 \
    --out "$root/criteo" >"$DPP_TMP/gen.out"
indent "$DPP_TMP/gen.out"
files=("$root"/criteo/*"="*/*.tfrecord)
say "      ${#files[@]} TFRecord files, $(du -sh "$root/criteo" | cut -f1) in $root/criteo"

step 2/5 "Starting one master and two workers on free loopback ports"
dpp_start_master --data-root "$root"
say "      master   $DPP_MASTER_ADDR"
dpp_start_worker
say "      worker 0 $DPP_LAST_ADDR"
dpp_start_worker
say "      worker 1 $DPP_LAST_ADDR"

step 3/5 "Submitting examples/criteo.json (13 dense features: clamp, log1p, clamp; 26 sparse: modulo, truncate)"
dpp_submit "$spec"
session=$DPP_SESSION
say "      session $session"
dpp_ctl status "$session" >"$DPP_TMP/status.txt" || dpp_fail "dppctl status $session failed"
indent "$DPP_TMP/status.txt"

step 4/5 "Reading the session as trainer rank 0 (dppctl read $session --output json)"
out=$DPP_TMP/read.jsonl
dpp_read "$session" "$out"
dpp_ctl status "$session" >"$DPP_TMP/status.txt" || dpp_fail "dppctl status $session failed"
indent "$DPP_TMP/status.txt"

step 5/5 "Summary"
# field LINE KEY: the number after "KEY": in one JSON line of dppctl read.
field() {
    local re="\"$2\":([-+0-9.eE]+)"
    [[ $1 =~ $re ]] || dpp_fail "no \"$2\" in: $1"
    printf '%s' "${BASH_REMATCH[1]}"
}
epochs=0
ok=1
while IFS= read -r line; do
    [[ $line == \{* ]] || continue
    epoch=$(field "$line" epoch)
    got=$(field "$line" rows)
    batches=$(field "$line" batches)
    rate=$(field "$line" rows_per_s)
    printf '      epoch %s: %s rows in %s batches, %.0f rows/s\n' "$epoch" "$got" "$batches" "$rate"
    ((got == rows)) || ok=0
    epochs=$((epochs + 1))
done <"$out"
((epochs > 0)) || dpp_fail "dppctl read printed no epoch line: $(cat -- "$out")"
if ((!ok)); then
    dpp_fail "expected $rows rows in every epoch; see above"
fi
say ""
say "All $rows rows arrived. Stopping the daemons."
