// SPDX-License-Identifier: Apache-2.0
// duck_write.mjs OUTDIR [ROWS]: writes small Criteo-like Parquet tables with
// DuckDB, one per compression codec and page version (criteo_<codec>_<v1|v2>
// .parquet), and OUTDIR/expected.jsonl with duck_stats.mjs's statistics of each,
// for dpp's Parquet reader tests. The committed copy is tests/data/parquet-duckdb/.
//
// duck_write.mjs --kind dense|sparse OUTDIR [ROWS]: one table of a single kind
// of column instead, OUTDIR/<kind>.parquet (zstd, the same row groups), for
// specs with only dense or only sparse features and no label. Both have a
// column holding the row number (row_id, or the one-id list row_ids), so
// that a reader's sums show whether each row came exactly once:
//   dense   row_id BIGINT; f1 FLOAT (~5% NULL); d1 DOUBLE; n32 INTEGER;
//           b1 BOOLEAN; emb FLOAT[2]
//   sparse  row_ids BIGINT[] ([row]); c1 BIGINT[] (NULL, empty and 1-5 ids,
//           as criteo's c1); c2 INTEGER[] (the same shape, signed ids);
//           c3 BIGINT[] with NULL elements
//
// PARQUET_VERSION V2 in DuckDB 1.5 means the V2 encodings (DELTA_BINARY_PACKED
// for integers, BYTE_STREAM_SPLIT for floats, RLE_DICTIONARY) on version-1
// DATA_PAGE headers: DuckDB writes no DATA_PAGE_V2, so v2 page headers are
// covered by parquet-testing's datapage_v2.snappy.parquet only. V1 files use
// PLAIN and PLAIN_DICTIONARY.
//
// Every value is a function of the row number (no random()), through a mixing
// function written out below rather than DuckDB's hash(), whose values may
// change between DuckDB versions. DuckDB runs on one thread with insertion
// order kept, so the same version writes the same bytes every time.
//
// Columns (ROWS rows, default 3000; row groups of at most 1024 rows):
//   label  BIGINT   0 or 1, about 25% ones
//   i1     FLOAT    multiples of 1/8 in [-250, 2250), ~5% NULL (exact in float)
//   i2     FLOAT    counts 0..999 and some large ones, ~5% NULL
//   i3     FLOAT    multiples of 0.001 (not exact in float), ~5% NULL
//   c1     BIGINT[] 100 ids in 0..2^32-1; ~6% NULL lists, ~7% empty, else 1-5 ids
//   c2     BIGINT[] ids -50000..50000;     the same shape, other draws
//   c3     BIGINT[] 100 ids up to about +-2^62, and some INT64_MIN / INT64_MAX
//          (its sums wrap int64)
//   s1     VARCHAR  ~37 categories, one non-ASCII, ~10% NULL
//   d1     DOUBLE   100 values, never NULL, not exact in float
//   b1     BOOLEAN  about 1/3 true, ~4% NULL
//   n32    INTEGER  the whole int32 range, never NULL
//   u32    UINTEGER the whole uint32 range (INT32 annotated unsigned), never NULL
//   dec    DECIMAL(10,2), m1 MAP(VARCHAR, BIGINT), ll BIGINT[][]: shapes dpp
//          refuses, by file and column, when a spec names them
//
// Exit 77: DuckDB not installed.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadDuckDB, connect, duckdbVersion, sqlString } from './duck_common.mjs';
import { fileStats } from './duck_stats.mjs';

export const CODECS = ['uncompressed', 'snappy', 'gzip', 'zstd', 'lz4_raw', 'brotli'];
export const VERSIONS = ['V1', 'V2'];
const ROW_GROUP_SIZE = 1024;

// mix(i, k): a well-spread value in [0, 2^32) from row i and stream k. The
// lowbias32 integer hash (Chris Wellons) over i and k; HUGEINT keeps the
// products from overflowing BIGINT before the reduction.
const MACROS = `
CREATE OR REPLACE MACRO mix_round(x, m, s) AS
    CAST((CAST(xor(x, x >> s) AS HUGEINT) * m) % 4294967296 AS BIGINT);
CREATE OR REPLACE MACRO mix(i, k) AS
    mix_round(mix_round(mix_round(
        CAST((CAST(i AS HUGEINT) * 2654435761 + CAST(k AS HUGEINT) * 1013904223 + 7)
             % 4294967296 AS BIGINT),
        2146121005, 16), 2221713035, 15), 1, 16);
-- A list column's shape and raw draws: NULL, empty, or 1-5 values of mix.
CREATE OR REPLACE MACRO draw_list(i, k) AS
    CASE WHEN mix(i, k) % 17 = 0 THEN NULL
         WHEN mix(i, k) % 13 = 0 THEN []::BIGINT[]
         ELSE list_transform(range(1 + mix(i, k + 1) % 5), lambda j: mix(i * 8 + j, k + 2))
    END;
`;

// range() hands out 2048-row vectors, and DuckDB's writer only closes a row
// group between the chunks it is given, so ROW_GROUP_SIZE 1024 alone gives
// 2048-row groups. A UNION ALL of 1024-row ranges (kept in order: one thread,
// insertion order preserved) gives row groups of ROW_GROUP_SIZE rows.
function pieces(rows) {
    const parts = [];
    for (let start = 0; start < rows; start += ROW_GROUP_SIZE)
        parts.push(`SELECT * FROM range(${start}, ${Math.min(rows, start + ROW_GROUP_SIZE)})`);
    return parts.join(' UNION ALL ');
}

function tableSql(rows) {
    return `
SELECT
    CAST(mix(i, 1) % 4 = 0 AS BIGINT) AS label,
    CASE WHEN mix(i, 11) % 20 = 0 THEN NULL
         ELSE CAST(((mix(i, 12) % 20000) - 2000) / 8 AS FLOAT) END AS i1,
    CASE WHEN mix(i, 13) % 20 = 0 THEN NULL
         WHEN mix(i, 14) % 50 = 0 THEN CAST(mix(i, 15) AS FLOAT)
         ELSE CAST(mix(i, 15) % 1000 AS FLOAT) END AS i2,
    CASE WHEN mix(i, 16) % 20 = 0 THEN NULL
         ELSE CAST((mix(i, 17) % 100000) / 1000 AS FLOAT) END AS i3,
    -- c1 and c3 draw from small vocabularies, as Criteo's categorical columns
    -- do, so that DuckDB dictionary-encodes them (it does below a few hundred distinct
    -- values per row group); c2's many small signed ids are PLAIN in V1 and
    -- DELTA_BINARY_PACKED in V2. That also keeps the files small.
    list_transform(draw_list(i, 21), lambda x: mix(x % 100, 101)) AS c1,
    list_transform(draw_list(i, 31), lambda x: x % 100001 - 50000) AS c2,
    list_transform(draw_list(i, 41), lambda x:
        CASE WHEN x % 97 = 0 THEN 9223372036854775807
             WHEN x % 89 = 0 THEN -9223372036854775808
             ELSE (mix(x % 100, 103) - 2147483648) * 2147483647 + mix(x % 100, 104)
        END) AS c3,
    CASE WHEN mix(i, 51) % 10 = 0 THEN NULL
         WHEN mix(i, 52) % 37 = 5 THEN 'caf\u00e9_\u00fc'
         ELSE 'cat_' || CAST(mix(i, 52) % 37 AS VARCHAR) END AS s1,
    CAST(mix(mix(i, 61) % 100, 105) - 2147483648 AS DOUBLE) / 65536 * 1.0000001 AS d1,
    CASE WHEN mix(i, 71) % 25 = 0 THEN NULL ELSE mix(i, 72) % 3 = 0 END AS b1,
    CAST(mix(i, 81) - 2147483648 AS INTEGER) AS n32,
    CAST(mix(i, 91) AS UINTEGER) AS u32,
    CAST(mix(i, 92) % 100000 / 100 AS DECIMAL(10, 2)) AS dec,
    MAP {'k': CAST(mix(i, 93) % 7 AS BIGINT)} AS m1,
    [[mix(i, 94) % 5], []]::BIGINT[][] AS ll
FROM (${pieces(rows)}) t(i)`;
}

// The columns of the single-kind tables (see the top of the file).
const KIND_COLUMNS = {
    dense: `
    CAST(i AS BIGINT) AS row_id,
    CASE WHEN mix(i, 11) % 20 = 0 THEN NULL
         ELSE CAST(((mix(i, 12) % 20000) - 2000) / 8 AS FLOAT) END AS f1,
    CAST(mix(mix(i, 61) % 100, 105) - 2147483648 AS DOUBLE) / 65536 * 1.0000001 AS d1,
    CAST(mix(i, 81) - 2147483648 AS INTEGER) AS n32,
    mix(i, 72) % 3 = 0 AS b1,
    [CAST(mix(i, 13) % 1000 AS FLOAT) / 4, CAST(i % 7 AS FLOAT)]::FLOAT[] AS emb`,
    sparse: `
    [CAST(i AS BIGINT)] AS row_ids,
    list_transform(draw_list(i, 21), lambda x: mix(x % 100, 101)) AS c1,
    list_transform(draw_list(i, 31), lambda x: CAST(x % 100001 - 50000 AS INTEGER)) AS c2,
    list_transform(draw_list(i, 41), lambda x: CASE WHEN x % 5 = 0 THEN NULL
                                                  ELSE x % 1000003 END) AS c3`,
};

// Writes outdir/<kind>.parquet; returns its path.
export async function writeKindTable(conn, outdir, kind, rows = 3000) {
    if (!(kind in KIND_COLUMNS))
        throw new Error(`unknown kind "${kind}" (dense or sparse)`);
    mkdirSync(outdir, { recursive: true });
    await conn.run(MACROS);
    const path = join(outdir, `${kind}.parquet`);
    await conn.run(`COPY (SELECT ${KIND_COLUMNS[kind]} FROM (${pieces(rows)}) t(i)) TO ` +
                   `${sqlString(path)} (FORMAT parquet, COMPRESSION zstd, ` +
                   `ROW_GROUP_SIZE ${ROW_GROUP_SIZE})`);
    return path;
}

export function fileName(codec, version) {
    return `criteo_${codec}_${version.toLowerCase()}.parquet`;
}

// Writes every codec x version into outdir, then outdir/expected.jsonl.
// Returns the file names written.
export async function writeTables(conn, outdir, rows = 3000) {
    mkdirSync(outdir, { recursive: true });
    await conn.run(MACROS);
    const names = [];
    for (const codec of CODECS) {
        for (const version of VERSIONS) {
            const name = fileName(codec, version);
            const path = join(outdir, name);
            await conn.run(`COPY (${tableSql(rows)}) TO ${sqlString(path)} (FORMAT parquet, ` +
                           `COMPRESSION ${codec}, ROW_GROUP_SIZE ${ROW_GROUP_SIZE}, ` +
                           `PARQUET_VERSION ${version})`);
            names.push(name);
        }
    }
    // In name order, as a shell glob lists them.
    const lines = [];
    for (const name of [...names].sort())
        lines.push(await fileStats(conn, join(outdir, name)));
    writeFileSync(join(outdir, 'expected.jsonl'), lines.join('\n') + '\n');
    return names;
}

async function main(argv) {
    let kind = null;
    if (argv[0] === '--kind') {
        kind = argv[1];
        argv = argv.slice(2);
    }
    if (argv.length < 1 || argv.length > 2 || argv[0].startsWith('-') ||
        (kind !== null && !(kind in KIND_COLUMNS))) {
        process.stderr.write('usage: duck_write.mjs [--kind dense|sparse] OUTDIR [ROWS]\n');
        return 2;
    }
    const rows = argv[1] === undefined ? 3000 : Number(argv[1]);
    if (!Number.isInteger(rows) || rows < 1) {
        process.stderr.write('duck_write: ROWS must be a positive integer\n');
        return 2;
    }
    const duck = await loadDuckDB();
    const conn = await connect(duck);
    const outdir = resolve(argv[0]);
    if (kind !== null) {
        const path = await writeKindTable(conn, outdir, kind, rows);
        process.stderr.write(`duck_write: ${path}, ${rows} rows ` +
                             `(DuckDB ${await duckdbVersion(conn)})\n`);
        return 0;
    }
    const names = await writeTables(conn, outdir, rows);
    process.stderr.write(`duck_write: ${names.length} files and expected.jsonl in ${outdir} ` +
                         `(DuckDB ${await duckdbVersion(conn)})\n`);
    return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url))
    process.exitCode = await main(process.argv.slice(2));
