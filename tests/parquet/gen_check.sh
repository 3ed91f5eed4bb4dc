#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dpp-gen --format parquet against readers that share no code with dpp:
# every codec and both page versions, with and without --nulls, is read by
# DuckDB and hyparquet
# (gen_check.mjs, which also checks each offset index against its pages and
# decodes every level and index run), and its sums must equal those of the
# TFRecord table of the same arguments read by a plain tf.Example parser
# (gen_check.py). Also: byte-identical reruns, tiny and empty files, refusals.
#
# Usage: gen_check.sh DPP_GEN
# Environment: DPP_NPM_CACHE (default /root/.cache/dpp-npm) holds, or gets,
# @duckdb/node-api, hyparquet and hyparquet-compressors. Exits 77 (skipped)
# when node, python3 or those packages cannot be had.
set -euo pipefail

gen=${1:?usage: gen_check.sh DPP_GEN}
here=$(cd "$(dirname "$0")" && pwd)
cache=${DPP_NPM_CACHE:-/root/.cache/dpp-npm}
export DPP_NPM_CACHE=$cache

log() { printf 'gen_check: %s\n' "$*"; }
fail() {
    printf 'gen_check: FAIL: %s\n' "$*" >&2
    exit 1
}
skip() {
    printf 'gen_check: SKIP: %s\n' "$*" >&2
    exit 77
}

[[ -x $gen ]] || skip "no dpp-gen at $gen"
command -v node >/dev/null || skip "node is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

have_packages() {
    [[ -f $cache/node_modules/@duckdb/node-api/package.json &&
        -f $cache/node_modules/hyparquet/src/index.js &&
        -f $cache/node_modules/hyparquet-compressors/src/index.js ]]
}
if ! have_packages; then
    # scripts/install-npm-tools.sh (make test runs it first) pins the versions
    bash "$here/../../scripts/install-npm-tools.sh" || true
    have_packages || skip "DuckDB and hyparquet are not in $cache (no npm registry?)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-gen-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

table=(--rows 20011 --shards 1 --partitions 2 --seed 5)
# 10005 rows a file in row groups of 9000: a short last group, and chunks of
# several pages (8192 rows, or fewer in the longer lists) in the first.
rg=(--row-group-rows 9000)
passed=0

# compare NAME PARQUET_JSON TFRECORD_JSON: the "sums" must be equal.
compare() {
    python3 - "$@" <<'EOF' || fail "$1: Parquet and TFRecord sums differ"
import json, sys
name, pq, tf = sys.argv[1:4]
a = json.load(open(pq))["sums"]
b = json.load(open(tf))
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print(f"  {k}: parquet {a.get(k)}  tfrecord {b.get(k)}", file=sys.stderr)
    sys.exit(1)
EOF
}

for nulls in "" --nulls; do
    tf=$tmp/tf$nulls
    "$gen" "${table[@]}" --format tfrecord --strings $nulls --out "$tf" >/dev/null
    python3 "$here/gen_check.py" "$tf" >"$tmp/tf$nulls.json"
    # DATA_PAGE (v1) with each codec; DATA_PAGE_V2 compressed and not
    for variant in zstd snappy none zstd-v2 none-v2; do
        codec=${variant%-v2}
        pages=1
        [[ $variant == *-v2 ]] && pages=2
        name="parquet $variant${nulls:+ $nulls}"
        pq=$tmp/pq-$variant$nulls
        "$gen" "${table[@]}" "${rg[@]}" --format parquet --compression "$codec" $nulls \
            --page-version "$pages" --out "$pq" >/dev/null
        node "$here/gen_check.mjs" "$pq" >"$pq.json" || fail "$name: the readers found problems"
        compare "$name" "$pq.json" "$tmp/tf$nulls.json"
        read -r rows rle bitpacked v1pages v2pages < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
s = j["structure"]
print(j["sums"]["rows"], s["rle"], s["bitpacked"], s["v1pages"], s["v2pages"])' "$pq.json")
        [[ $rows == 20011 ]] || fail "$name: $rows rows"
        if ((pages == 2)); then
            ((v1pages == 0 && v2pages > 0)) || fail "$name: $v1pages v1 and $v2pages v2 pages"
        else
            ((v2pages == 0 && v1pages > 0)) || fail "$name: $v1pages v1 and $v2pages v2 pages"
        fi
        ((rle > 0 && bitpacked > 0)) || fail "$name: runs: $rle RLE, $bitpacked bit-packed; want both"
        log "$name: $rows rows, $rle RLE and $bitpacked bit-packed runs, equal to TFRecord"
        passed=$((passed + 1))
    done
    # Nulls must show: i-columns hold fewer values than rows.
    if [[ -n $nulls ]]; then
        python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["sums"]["dense"]
sys.exit(0 if all(int(v["present"]) < 20011 for v in d.values()) else 1)' "$tmp/pq-zstd--nulls.json" ||
            fail "--nulls: some i-column has no null"
    fi
done

"$gen" "${table[@]}" "${rg[@]}" --format parquet --out "$tmp/again" >/dev/null
diff -r "$tmp/pq-zstd" "$tmp/again" >/dev/null || fail "two runs with the same arguments differ"
log "same arguments, byte-identical files"
passed=$((passed + 1))

# One row per file (dictionaries of one entry: index bit width 0), and a
# shard with no rows at all (a file with no row group).
"$gen" --rows 3 --shards 2 --partitions 2 --seed 9 --format parquet --out "$tmp/tiny" >/dev/null
node "$here/gen_check.mjs" "$tmp/tiny" >"$tmp/tiny.json" || fail "tiny table: the readers found problems"
"$gen" --rows 3 --shards 2 --partitions 2 --seed 9 --strings --out "$tmp/tiny-tf" >/dev/null
python3 "$here/gen_check.py" "$tmp/tiny-tf" >"$tmp/tiny-tf.json"
compare "tiny table" "$tmp/tiny.json" "$tmp/tiny-tf.json"
log "3 rows in 4 files (one empty): read, equal to TFRecord"
passed=$((passed + 1))

for args in "--format parquet --index" "--compression zstd" "--row-group-rows 10" \
    "--format parquet --compression lz9" "--format parquet --row-group-rows 0" "--format csv"; do
    rc=0
    # shellcheck disable=SC2086 # word splitting of the argument list is intended
    "$gen" "${table[@]}" $args --out "$tmp/refused" >/dev/null 2>"$tmp/err" || rc=$?
    ((rc != 0)) || fail "dpp-gen $args succeeded"
    grep -q '^dpp-gen: ' "$tmp/err" || fail "dpp-gen $args: no reason on stderr"
done
log "bad combinations refused with a reason"
passed=$((passed + 1))

log "PASS"
echo "gen_check: $passed passed, 0 failed"
