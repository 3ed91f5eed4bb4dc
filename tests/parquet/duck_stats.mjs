// SPDX-License-Identifier: Apache-2.0
// duck_stats.mjs [--as NAME] FILE...: per-column statistics of Parquet files
// as DuckDB reads them, the independent side of dpp's Parquet conformance
// tests. One JSON line per file:
//
//   {"file": basename, "rows": N, "columns": {name: stats, ...}}
//
// stats of a column whose DuckDB type is a primitive (BOOLEAN, integers,
// FLOAT, DOUBLE, TIMESTAMP, VARCHAR, BLOB) or a list of one:
//   type        DuckDB's type (INT96 and other timestamps read as TIMESTAMP)
//   nulls       rows whose value (or list) is NULL
//   empty       lists only: rows holding an empty list
//   values      non-null values (lists: non-null elements, over all rows)
//   null_elems  lists only: NULL elements inside lists
//   sum         numbers: the sum of the non-null values as a double, printed
//               like %.17g (booleans count 0/1, timestamps as epoch_ns);
//               "nan"/"inf"/"-inf" when the sum is not finite
//   int_sum     integers, booleans, timestamps: the same sum exactly, as a
//               decimal string (a double cannot hold an int64 sum exactly)
//   hash        strings/binary: the sum mod 2^64 of FNV-1a-64 over each
//               non-null value's bytes (VARCHAR as UTF-8), a decimal string
// Any other column (struct, map, decimal, date, list of lists, ...) is
// {"unsupported": "<DuckDB type>"}.
//
// Counts and sums come from one aggregate query per file. Hashes need the
// bytes, so string columns are streamed chunk by chunk through a second query.
// Float sums use DuckDB's fsum (compensated), so they do not depend on the
// order rows are added in; a reader that adds plainly needs a relative
// tolerance (1e-12 is ample for these files).
//
// --as NAME reports the next FILE under NAME, with "read_from": FILE's
// basename: for a file DuckDB cannot read whose rows another file holds.
// The one such file of parquet-testing is handled without it: DuckDB has no
// decoder for the legacy Hadoop-framed LZ4 codec, and
// hadoop_lz4_compressed.parquet holds the same four rows as
// lz4_raw_compressed.parquet (both from the Arrow project; other readers'
// tests give them one expected table). When the first fails for its codec and
// the second lies beside it with the same footer (row count and schema), the
// line is computed from the second and says so ("read_from").
// --footer FILE... prints instead what the footer says, which DuckDB reads
// even where it cannot decompress the pages: {"file", "rows", "schema":
// [[name, physical type, repetition, converted type, logical type], ...]}
// (the root element left out: writers name it differently).
//
// A file DuckDB cannot read prints {"file": ..., "error": "..."} and makes the
// exit status 1 once every file has been tried. Exit 77: DuckDB not installed.
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadDuckDB, connect, sqlString, sqlIdent, formatG17 } from './duck_common.mjs';

const INTEGER_TYPES = new Set([
    'TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT',
    'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT', 'UHUGEINT',
]);
const FLOAT_TYPES = new Set(['FLOAT', 'DOUBLE']);
const TIMESTAMP_TYPES = new Set([
    'TIMESTAMP', 'TIMESTAMP_NS', 'TIMESTAMP_MS', 'TIMESTAMP_S', 'TIMESTAMP WITH TIME ZONE',
]);
const BYTES_TYPES = new Set(['VARCHAR', 'BLOB']);

// 'numeric', 'bytes' or null (unsupported) for a DuckDB scalar type name.
function scalarKind(type) {
    if (type === 'BOOLEAN' || INTEGER_TYPES.has(type) || FLOAT_TYPES.has(type) ||
        TIMESTAMP_TYPES.has(type))
        return 'numeric';
    if (BYTES_TYPES.has(type))
        return 'bytes';
    return null;
}

// How a column is summarised: {list, kind, elemType} or null (unsupported).
// DESCRIBE spells a list "T[]" and a fixed-size array "T[n]" (unsupported).
function classify(type) {
    if (type.endsWith('[]')) {
        const elem = type.slice(0, -2);
        const kind = scalarKind(elem);
        return kind ? { list: true, kind, elemType: elem } : null;
    }
    const kind = scalarKind(type);
    return kind ? { list: false, kind, elemType: type } : null;
}

// SQL for one value of elemType as a number DuckDB can add exactly (integers)
// or as a DOUBLE (floats). `v` is an SQL expression.
function numericExpr(v, elemType) {
    if (elemType === 'BOOLEAN')
        return `CAST(${v} AS INTEGER)`;
    if (TIMESTAMP_TYPES.has(elemType))
        return `epoch_ns(${v})`;
    if (FLOAT_TYPES.has(elemType))
        return `CAST(${v} AS DOUBLE)`;
    return v;
}

// The aggregate select-list items for one column; their aliases start with
// the column's index so that names never collide.
function aggregates(i, col, how) {
    const c = sqlIdent(col);
    const items = [`count(*) FILTER (WHERE ${c} IS NULL) AS "${i}_nulls"`];
    const isFloat = FLOAT_TYPES.has(how.elemType);
    if (!how.list) {
        items.push(`count(${c}) AS "${i}_values"`);
        if (how.kind === 'numeric') {
            const x = numericExpr(c, how.elemType);
            items.push(isFloat ? `fsum(${x}) AS "${i}_sum"`
                : `CAST(sum(${x}) AS VARCHAR) AS "${i}_sum"`);
        }
        return items;
    }
    items.push(`count(*) FILTER (WHERE len(${c}) = 0) AS "${i}_empty"`);
    // list_count counts the non-NULL elements.
    items.push(`coalesce(sum(list_count(${c})), 0) AS "${i}_values"`);
    items.push(`coalesce(sum(len(${c}) - list_count(${c})), 0) AS "${i}_null_elems"`);
    if (how.kind === 'numeric') {
        const elems = `list_transform(${c}, lambda e: ${numericExpr('e', how.elemType)})`;
        items.push(isFloat
            ? `fsum(list_aggregate(${elems}, 'fsum')) AS "${i}_sum"`
            : `CAST(sum(list_sum(${elems})) AS VARCHAR) AS "${i}_sum"`);
    }
    return items;
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = (1n << 64n) - 1n;

// FNV-1a-64 of a byte array, as a BigInt.
export function fnv1a64(bytes) {
    let h = FNV_OFFSET;
    for (const b of bytes)
        h = ((h ^ BigInt(b)) * FNV_PRIME) & MASK64;
    return h;
}

// A sum that DuckDB returned: a decimal string (exact integer sum) or a
// double (fsum), or NULL when there was nothing to add. Printed like %.17g.
function sumText(v) {
    if (v === null || v === undefined)
        return formatG17(0);
    if (typeof v === 'string')
        return formatG17(Number(BigInt(v)));
    return formatG17(Number(v));
}

// Streams the string columns and adds their hashes into hashes[i].
async function hashColumns(conn, from, byteCols, hashes) {
    // encode() turns a VARCHAR into its UTF-8 bytes; a cast to BLOB would
    // instead read backslash escapes in the text.
    const select = byteCols.map(({ i, col, how }) => {
        const c = sqlIdent(col);
        const one = (v) => how.elemType === 'VARCHAR' ? `encode(${v})` : v;
        return how.list ? `list_transform(${c}, lambda e: ${one('e')})` : one(c);
    });
    const result = await conn.stream(`SELECT ${select.join(', ')} FROM ${from}`);
    for (;;) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0)
            break;
        byteCols.forEach(({ i, how }, k) => {
            const vector = chunk.getColumnVector(k);
            for (let r = 0; r < chunk.rowCount; r++) {
                const v = vector.getItem(r);
                if (v === null)
                    continue;
                for (const e of how.list ? v.items : [v]) {
                    if (e !== null)
                        hashes[i] = (hashes[i] + fnv1a64(e.bytes)) & MASK64;
                }
            }
        });
    }
}

// The statistics of one file as a JSON line (without the newline).
// Throws when DuckDB cannot read it.
export async function fileStats(conn, path, name = basename(path)) {
    // hive_partitioning off: a ds=... folder in the path is not a column.
    const from = `read_parquet(${sqlString(path)}, hive_partitioning = false)`;
    const described = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM ${from}`)).getRowObjects();
    const cols = described.map((d, i) => ({ i, col: d.column_name, type: d.column_type,
                                            how: classify(d.column_type) }));
    const items = ['count(*) AS "rows"'];
    for (const { i, col, how } of cols)
        if (how)
            items.push(...aggregates(i, col, how));
    const agg = (await conn.runAndReadAll(`SELECT ${items.join(', ')} FROM ${from}`))
        .getRowObjects()[0];

    const byteCols = cols.filter(({ how }) => how && how.kind === 'bytes');
    const hashes = {};
    for (const { i } of byteCols)
        hashes[i] = 0n;
    if (byteCols.length)
        await hashColumns(conn, from, byteCols, hashes);

    // Built as text: sums must keep their %.17g spelling, which JSON.stringify
    // of a Number would not.
    const parts = cols.map(({ i, col, type, how }) => {
        const fields = [`"type":${JSON.stringify(type)}`];
        if (!how)
            return `${JSON.stringify(col)}:{"unsupported":${JSON.stringify(type)}}`;
        fields.push(`"nulls":${agg[`${i}_nulls`]}`);
        if (how.list)
            fields.push(`"empty":${agg[`${i}_empty`]}`);
        fields.push(`"values":${agg[`${i}_values`]}`);
        if (how.list)
            fields.push(`"null_elems":${agg[`${i}_null_elems`]}`);
        if (how.kind === 'numeric') {
            const sum = agg[`${i}_sum`];
            fields.push(`"sum":${sumText(sum)}`);
            if (!FLOAT_TYPES.has(how.elemType))
                fields.push(`"int_sum":"${sum ?? 0}"`);
        } else
            fields.push(`"hash":"${hashes[i]}"`);
        return `${JSON.stringify(col)}:{${fields.join(',')}}`;
    });
    const readFrom = name === basename(path) ? ''
        : `,"read_from":${JSON.stringify(basename(path))}`;
    return `{"file":${JSON.stringify(name)}${readFrom},"rows":${agg.rows},` +
        `"columns":{${parts.join(',')}}}`;
}

// The footer's row count and schema as a JSON line.
export async function footer(conn, path) {
    const p = sqlString(path);
    const meta = await conn.runAndReadAll(`SELECT num_rows FROM parquet_file_metadata(${p})`);
    const schema = await conn.runAndReadAll(
        'SELECT name, type, repetition_type, converted_type, logical_type ' +
        `FROM parquet_schema(${p})`);
    return JSON.stringify({ file: basename(path), rows: Number(meta.getRowsJson()[0][0]),
                            schema: schema.getRowsJson().slice(1) }); // [0] is the root
}

// File -> a file beside it that holds the same rows in a codec DuckDB reads.
const STAND_INS = new Map([['hadoop_lz4_compressed.parquet', 'lz4_raw_compressed.parquet']]);

// The stand-in's line for a file DuckDB could not read, or null.
async function standIn(conn, path, name, err) {
    const other = STAND_INS.get(basename(path));
    if (!other || !/Unsupported compression codec/.test(err.message))
        return null;
    const otherPath = join(dirname(path), other);
    if (!existsSync(otherPath))
        return null;
    const strip = (line) => line.replace(/^\{"file":"[^"]*",/, '');
    if (strip(await footer(conn, path)) !== strip(await footer(conn, otherPath)))
        return null;
    return fileStats(conn, otherPath, name);
}

const USAGE = 'usage: duck_stats.mjs [--as NAME] FILE... | duck_stats.mjs --footer FILE...\n';

async function main(argv) {
    const files = [];
    const footerOnly = argv[0] === '--footer';
    if (footerOnly)
        argv = argv.slice(1);
    for (let k = 0; k < argv.length; k++) {
        if (argv[k] === '--as' && k + 2 < argv.length) {
            files.push({ path: argv[k + 2], name: argv[k + 1] });
            k += 2;
        } else if (argv[k].startsWith('-')) {
            process.stderr.write(USAGE);
            return 2;
        } else {
            files.push({ path: argv[k], name: basename(argv[k]) });
        }
    }
    if (!files.length) {
        process.stderr.write(USAGE);
        return 2;
    }
    const duck = await loadDuckDB();
    const conn = await connect(duck);
    let status = 0;
    for (const { path, name } of files) {
        try {
            const line = footerOnly ? await footer(conn, path) : await fileStats(conn, path, name);
            process.stdout.write(line + '\n');
        } catch (e) {
            const line = await standIn(conn, path, name, e);
            if (line) {
                process.stdout.write(line + '\n');
                continue;
            }
            const msg = String(e.message).split('\n')[0];
            process.stdout.write(JSON.stringify({ file: name, error: msg }) + '\n');
            process.stderr.write(`duck_stats: ${path}: ${msg}\n`);
            status = 1;
        }
    }
    return status;
}

if (process.argv[1] === fileURLToPath(import.meta.url))
    process.exitCode = await main(process.argv.slice(2));
