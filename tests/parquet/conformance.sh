#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Parquet conformance (ctest parquet/conformance): dpp's reader, through
# dpp-pqstat, against DuckDB's statistics of the same files. The Apache
# parquet-testing files and DuckDB-written tables (every codec, pages v1
# and v2) are in tests/data/ with the statistics DuckDB computed for them;
# when DuckDB is installed (scripts/install-npm-tools.sh) it computes them
# again now, and those must agree too.
set -euo pipefail
src=${DPP_SOURCE_DIR:?}
pqstat=${DPP_PQSTAT:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}
rc=0
for dir in "$src"/tests/data/parquet-testing "$src"/tests/data/parquet-duckdb; do
    [[ -f $dir/expected.jsonl ]] || { echo "conformance: $dir/expected.jsonl is missing" >&2; exit 1; }
    name=$(basename "$dir")
    files=("$dir"/*.parquet)
    "$pqstat" "${files[@]}" >"$tmp/$name.dpp.jsonl"
    echo "== $name: dpp against the committed DuckDB statistics"
    python3 "$src/tests/parquet/compare.py" "$dir/expected.jsonl" "$tmp/$name.dpp.jsonl" || rc=1
    if [[ -d $cache/node_modules/@duckdb/node-api ]]; then
        echo "== $name: dpp against DuckDB now"
        DPP_NPM_CACHE=$cache node "$src/tests/parquet/duck_stats.mjs" "${files[@]}" >"$tmp/$name.duck.jsonl" &&
            python3 "$src/tests/parquet/compare.py" "$tmp/$name.duck.jsonl" "$tmp/$name.dpp.jsonl" || rc=1
    else
        echo "== $name: DuckDB is not installed ($cache); the committed statistics were checked"
    fi
done
exit $rc
