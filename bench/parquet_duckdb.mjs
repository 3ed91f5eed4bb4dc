// SPDX-License-Identifier: Apache-2.0
// bench/parquet_duckdb.mjs GLOB [ROUNDS]: the peer of bench_pipeline
// --format parquet. DuckDB on one thread computes, over the same files, the
// sums of examples/criteo.json's transforms in one SQL query: dense
// least(greatest(ln(1 + greatest(x, 0)), 0), 20) for i1..i13, sparse ids
// modulo 100000 (floor) truncated to 5 for c1..c26, their lengths and sums,
// and the label. Prints rows/s of the median of ROUNDS runs (after one to
// warm the page cache), timing the query alone.
import { loadDuckDB, connect } from '../tests/parquet/duck_common.mjs';

const [glob, roundsArg] = process.argv.slice(2);
if (!glob) {
    process.stderr.write('usage: parquet_duckdb.mjs GLOB [ROUNDS]\n');
    process.exit(2);
}
const rounds = Number(roundsArg || 3);
const duck = await loadDuckDB();
const con = await connect(duck);
const dense = [];
for (let i = 1; i <= 13; i++)
    dense.push(`least(greatest(ln(1 + greatest(i${i}, 0)), 0), 20)`);
const lists = [];
for (let k = 1; k <= 26; k++)
    lists.push(`list_slice(list_transform(c${k}, x -> ((x % 100000) + 100000) % 100000), 1, 5)`);
const sql = `SELECT count(*) AS rows, sum(label) AS label_sum,
  sum(${dense.map((d) => `coalesce(${d}, 0)`).join(' + ')}) AS dense_sum,
  sum(${lists.map((l) => `coalesce(len(${l}), 0)`).join(' + ')}) AS lengths,
  sum(${lists.map((l) => `coalesce(list_sum(${l}), 0)`).join(' + ')}) AS ids
FROM read_parquet('${glob.replace(/'/g, "''")}', hive_partitioning = false)`;
let rows = 0;
let result;
const secs = [];
for (let r = 0; r <= rounds; r++) {
    const t0 = process.hrtime.bigint();
    const reader = await con.runAndReadAll(sql);
    const t1 = process.hrtime.bigint();
    result = reader.getRowObjects()[0];
    rows = Number(result.rows);
    if (r > 0)
        secs.push(Number(t1 - t0) / 1e9);
}
secs.sort((a, b) => a - b);
const median = secs[Math.floor(secs.length / 2)];
console.log(`duckdb (1 thread): ${rows} rows in ${median.toFixed(3)} s = ${Math.round(rows / median)} rows/s` +
    ` (median of ${rounds}); label_sum ${result.label_sum} dense_sum ${Number(result.dense_sum).toFixed(3)}` +
    ` lengths ${result.lengths} ids ${result.ids}`);
