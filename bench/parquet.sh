#!/usr/bin/env bash
# bench/parquet.sh BUILD_DIR [ROWS]: dpp's Parquet path against DuckDB, one
# core each, same files, same transforms. Writes a Criteo-like table as
# Parquet (dpp-gen --format parquet: zstd, dictionary-encoded id lists,
# ROWS rows, default 1,000,000), then runs, one after the other,
#   - bench_pipeline --format parquet: the worker's per-split path on one
#     thread (read, decompress, decode, transform, build blocks), rows/s;
#   - bench/parquet_duckdb.mjs: DuckDB with threads=1 computing the sums of
#     the same transforms in SQL over the same files, rows/s;
# and prints the ratio. DuckDB comes from scripts/install-npm-tools.sh's
# cache folder (installed if missing and the registry is reachable). Builds
# nothing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: bench/parquet.sh BUILD_DIR [ROWS]}
rows=${2:-1000000}
tmp=$(mktemp -d /tmp/dpp-bench-parquet.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
bash "$here/../scripts/install-npm-tools.sh"
"$build/dpp-gen" --rows "$rows" --shards 4 --partitions 2 --seed 1 --format parquet \
    --out "$tmp/criteo" >/dev/null
echo "table: $rows rows, $(du -sh "$tmp/criteo" | cut -f1) of Parquet (zstd) in 8 files"
dpp=$("$build/bench/bench_pipeline" --format parquet --table "$tmp/criteo" | tee /dev/stderr |
    sed -n 's/^without compression: *\([0-9]*\) rows\/s.*/\1/p')
duck=$(node "$here/parquet_duckdb.mjs" "$tmp/criteo/*/*.parquet" 3 | tee /dev/stderr |
    sed -n 's/.* = \([0-9]*\) rows\/s.*/\1/p')
awk -v d="$dpp" -v k="$duck" 'BEGIN {
    printf "dpp %d rows/s (blocks built, no compression) vs DuckDB %d rows/s (sums only): %.2fx\n",
        d, k, d / k }'
