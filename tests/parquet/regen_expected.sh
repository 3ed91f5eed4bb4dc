#!/usr/bin/env bash
# Run by hand, not by the tests: regenerates
# tests/data/parquet-testing/expected.jsonl, the statistics DuckDB computes
# for the Apache parquet-testing files (tests/parquet/duck_stats.mjs), which
# dpp's Parquet reader is checked against on machines without the npm registry.
#
# The committed file was produced by DuckDB v1.5.6 (@duckdb/node-api
# 1.5.6-r.1, the version scripts/install-npm-tools.sh pins). Regenerate after
# changing that pin or duck_stats.mjs, and review the diff: a changed number
# means one of the two readers changed its mind.
#
# usage: tests/parquet/regen_expected.sh [PARQUET_TESTING_DIR]
#   default input: the shared/parquet-testing folder beside the repository.
#   Only basenames are written, so the input may be any copy of the files.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
src="${1:-$repo/../shared/parquet-testing}"
out="$repo/tests/data/parquet-testing/expected.jsonl"
stats="$repo/tests/parquet/duck_stats.mjs"

bash "$repo/scripts/install-npm-tools.sh"

shopt -s nullglob
files=("$src"/*.parquet)
[ ${#files[@]} -gt 0 ] || { echo "regen_expected: no .parquet files in $src" >&2; exit 1; }

# duck_stats.mjs computes hadoop_lz4_compressed.parquet's line from
# lz4_raw_compressed.parquet, which holds the same rows in a codec DuckDB
# reads (see its header); that line says so with "read_from".
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
if ! node "$stats" "${files[@]}" >"$tmp"; then
    echo "regen_expected: DuckDB could not read every file; $out left as it was" >&2
    exit 1
fi
mkdir -p "$(dirname "$out")"
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "regen_expected: wrote $out ($(wc -l <"$out") files)" >&2
