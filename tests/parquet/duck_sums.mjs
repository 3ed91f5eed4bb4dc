// SPDX-License-Identifier: Apache-2.0
// duck_sums.mjs [OPTIONS] SPEC_JSON FILE_GLOB: what `dppctl read --output json`
// should print for a session of SPEC_JSON over the Parquet files FILE_GLOB
// matches, computed by DuckDB in SQL from docs/spec.md: the independent side
// of the Parquet end-to-end test. One line per epoch:
//
//   {"epoch":E,"rows":..,"batches":..[,"label_sum":..],"dense_sum":..,
//    "sparse_lengths_sum":..,"sparse_ids_sum":..,"sparse_ids_wsum":..
//    [,"sparse_weights_sum":..][,"rows_padded":..],
//    "dense_sums":{NAME:..},"sparse_sums":{NAME:{"lengths_sum":..,"ids_sum":..}}}
//
// (dppctl's keys in its order, less rows_per_s; label_sum only when the spec
// has a label.) Options:
//   --rank R          the rank dppctl reads as (default 0)
//   --table DIR       the table folder, for the `sample` filter's relative paths
//   --data-root DIR   where `vocab` files are looked up (repeatable, in order)
//
// How dpp's values are mirrored (docs/spec.md, "Parquet tables" and
// "Transforms"):
//   - Rows are dealt in file order (files sorted by path, bytes), rank r taking
//     the records [start_r, start_r + quota_r) as the master's rank_quota does.
//   - A NULL value or list is an absent feature; NULL list elements are left
//     out; a column no file has is absent everywhere.
//   - Dense values are float32: every op computes in DOUBLE and the result is
//     CAST to FLOAT before the next op, as dpp stores each op's result.
//   - Sparse ids are BIGINT; hash works in UHUGEINT, reduced mod 2^64 after
//     each product, so the SplitMix64 finalizer wraps as in C. Strings hash
//     with XXH3 (duck_xxh3.mjs, registered as a DuckDB function).
//   - Per-record errors (no label, a dense value missing without fill_missing,
//     a value count other than dim, weights not matching ids) skip the row;
//     with on_corrupt "fail" the session fails, and so does this script.
//
// Comparing with dppctl: rows, batches, the lengths and id sums exactly;
// label_sum exactly while labels are small integers (0/1). dense_sum and
// sparse_weights_sum need a tolerance although every value is the same
// float32 on both sides: dppctl adds them in double in batch order, this
// script compensated (fsum), and plain addition of n values errs by up to
// about n * 2^-53 times the sum of their magnitudes (216,000 values: 2.4e-11).
// A relative 1e-9 is ample unless the values cancel (standardized features
// summing to near 0); then scale the tolerance by the magnitudes instead.
// log1p is ln(u)*x/(u-1) with u = 1+x (Goldberg's method, a few double ulps
// from the true value); rounded to float32 it equalled C's log1p on 2 million
// random float32 inputs.
//
// Translated: dense fill_missing, clamp, log1p, standardize, bucketize, cast
// to int; sparse modulo, hash (of ids, and of strings with XXH3), vocab (with
// --data-root), truncate, first_x, weights; filters require and sample (with
// --table); remainder drop/keep/pad, consumers and --rank, epochs.
// What it does not translate, and refuses with the op's or key's name:
// cast to bfloat16/float16, shuffle with several consumers (the rows of a rank
// then depend on the split permutation), epochs "unbounded", a string feature
// whose chain does not start with hash or vocab, float ids, timestamps other
// than INT96, and other column types. Exit 1 on such a refusal or a failed
// session, 2 on bad usage, 77 when DuckDB is not installed.
import { readFileSync, realpathSync } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadDuckDB, connect, sqlString, sqlIdent, formatG17, wrapInt64 } from './duck_common.mjs';
import { xxh3, xxh3SelfTest } from './duck_xxh3.mjs';
import { fnv1a64 } from './duck_stats.mjs';

const USAGE = 'usage: duck_sums.mjs [--rank R] [--table DIR] [--data-root DIR]... ' +
    'SPEC_JSON FILE_GLOB\n';

// A spec this script cannot mirror, or a session dpp would fail.
class Refusal extends Error {}
function refuse(msg) {
    throw new Refusal(msg);
}

// ---- the spec, with integers kept exact (JSON.parse would round ids and
// n beyond 2^53) ----

const INT_TAG = '\u0000int:';

// Parses JSON text, turning every integer literal into the string
// INT_TAG + digits; asInt/asNum read them back.
function parseSpecText(text) {
    const tagged = text.replace(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g, (tok) => {
        if (tok.startsWith('"') || /[.eE]/.test(tok))
            return tok;
        return JSON.stringify(INT_TAG + tok);
    });
    return JSON.parse(tagged);
}

function isInt(v) {
    return typeof v === 'string' && v.startsWith(INT_TAG);
}

function asInt(v, where) {
    if (!isInt(v))
        refuse(`${where}: expected an integer`);
    return BigInt(v.slice(INT_TAG.length));
}

function asNum(v, where) {
    if (isInt(v))
        return Number(v.slice(INT_TAG.length)); // rounds to nearest, as strtod
    if (typeof v !== 'number')
        refuse(`${where}: expected a number`);
    return v;
}

function asStr(v, where) {
    if (typeof v !== 'string' || isInt(v))
        refuse(`${where}: expected a string`);
    return v;
}

// ---- SQL literals ----

function dbl(x) {
    if (Object.is(x, -0))
        return "CAST('-0.0' AS DOUBLE)";
    return `CAST('${x}' AS DOUBLE)`; // String(x) reads back bit for bit
}
const flt = (x) => `CAST(${dbl(x)} AS FLOAT)`;
const bigint = (x) => `CAST('${x}' AS BIGINT)`;
const uhuge = (x) => `CAST('${BigInt.asUintN(64, BigInt(x))}' AS UHUGEINT)`;
const ubig = (x) => `CAST('${BigInt.asUintN(64, BigInt(x))}' AS UBIGINT)`;

// ---- 64-bit helpers shared by the SQL and its self-test ----

const M64 = (1n << 64n) - 1n;
const GOLDEN = 0x9E3779B97F4A7C15n;

function mix64(z) {
    z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & M64;
    z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & M64;
    return z ^ (z >> 31n);
}

// Macros the generated SQL uses. The finalizer binds its argument through a
// one-element list so that the argument expression is not copied into every
// use of it.
const TWO64 = "CAST('18446744073709551616' AS UHUGEINT)";
const MACROS = `
CREATE OR REPLACE MACRO dpp_u64(x) AS
    CAST(CAST(x AS HUGEINT) + CASE WHEN x < 0 THEN CAST('18446744073709551616' AS HUGEINT)
                                   ELSE CAST(0 AS HUGEINT) END AS UHUGEINT);
CREATE OR REPLACE MACRO dpp_mix64(z) AS
    list_transform(list_transform(list_transform([CAST(z AS UHUGEINT)],
        lambda a: (xor(a, a >> 30) * ${uhuge(0xBF58476D1CE4E5B9n)}) % ${TWO64}),
        lambda b: (xor(b, b >> 27) * ${uhuge(0x94D049BB133111EBn)}) % ${TWO64}),
        lambda c: xor(c, c >> 31))[1];
`;

// float32 of a DOUBLE expression `d` (an identifier: it is used several
// times), as C's (float)d: beyond the float range it is infinite, where
// DuckDB's CAST would raise an error. 2^128 - 2^104 is FLT_MAX plus half an
// ulp, the first double that rounds to infinity.
function tof(d) {
    const lim = dbl(3.4028235677973366e38);
    // isnan first: DuckDB orders NaN above +inf, so it would pass `>= lim`.
    return `CASE WHEN isnan(${d}) THEN CAST(${d} AS FLOAT) ` +
        `WHEN ${d} >= ${lim} THEN CAST('inf' AS FLOAT) ` +
        `WHEN ${d} <= -${lim} THEN CAST('-inf' AS FLOAT) ELSE CAST(${d} AS FLOAT) END`;
}

// ---- columns ----

const INT_TYPES = new Set(['TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT',
                           'UTINYINT', 'USMALLINT', 'UINTEGER']);
const STRING_TYPES = new Set(['VARCHAR', 'BLOB']);

// {list, elem} of a DuckDB type; elem is the element type for a list.
function shape(type) {
    if (type.endsWith('[]'))
        return { list: true, elem: type.slice(0, -2) };
    return { list: false, elem: type };
}

// An int64 expression of element `e` of a column whose values dpp reads as
// int64 (docs/spec.md: integers, booleans, INT96 timestamps as ns).
function int64Of(e, elem, what) {
    if (elem === 'BOOLEAN' || INT_TYPES.has(elem))
        return `CAST(${e} AS BIGINT)`;
    if (elem === 'UBIGINT') // dpp keeps the 64 bits: two's complement
        return `CAST(CAST(${e} AS HUGEINT) - CASE WHEN ${e} >= ${ubig(1n << 63n)} ` +
            `THEN CAST('18446744073709551616' AS HUGEINT) ELSE 0 END AS BIGINT)`;
    if (elem === 'TIMESTAMP')
        return `epoch_ns(${e})`;
    refuse(`${what}: column type ${elem} is not mirrored`);
}

// A float32 expression of element `e` (an identifier).
function floatOf(e, elem, what) {
    if (elem === 'FLOAT')
        return e;
    if (elem === 'DOUBLE')
        return tof(e);
    return `CAST(${int64Of(e, elem, what)} AS FLOAT)`;
}

class Columns {
    constructor(types, physical) {
        this.types = types;       // name -> DuckDB type
        this.physical = physical; // name -> Parquet physical type (top-level leaves)
    }

    has(name) {
        return this.types.has(name);
    }

    // The column's shape, refusing timestamps that are not INT96: DuckDB
    // turns INT64 timestamps into TIMESTAMP too, in a unit dpp does not use.
    shapeOf(name, what) {
        const s = shape(this.types.get(name));
        if (s.elem.startsWith('TIMESTAMP')) {
            if (s.elem !== 'TIMESTAMP' || this.physical.get(name) !== 'INT96')
                refuse(`${what}: ${s.elem} column "${name}" is not INT96; not mirrored`);
        }
        return s;
    }

    // SQL for the column's non-NULL elements as a list (NULL when the value
    // or list is NULL), each converted by conv(identifier, elemType).
    valuesList(name, what, conv) {
        if (!this.has(name))
            return 'NULL';
        const c = sqlIdent(name);
        const s = this.shapeOf(name, what);
        if (s.list)
            return `list_transform(list_filter(${c}, lambda e: e IS NOT NULL), ` +
                `lambda e: ${conv('e', s.elem)})`;
        return `CASE WHEN ${c} IS NULL THEN NULL ELSE [${conv(c, s.elem)}] END`;
    }

    present(name) {
        return this.has(name) ? `(${sqlIdent(name)} IS NOT NULL)` : 'false';
    }

    isString(name) {
        return this.has(name) && STRING_TYPES.has(shape(this.types.get(name)).elem);
    }
}

// ---- transforms ----

// SQL applying one dense op to the FLOAT[] expression `list`.
function denseOp(list, op, where) {
    const t = (body) => `list_transform(${list}, lambda v: ${body})`;
    switch (op.op) {
    case 'clamp': {
        // NaN fails both comparisons in C; DuckDB orders NaN above +inf, so
        // it is kept out explicitly.
        const parts = ['WHEN isnan(v) THEN v'];
        if (op.min !== undefined)
            parts.push(`WHEN CAST(v AS DOUBLE) < ${dbl(asNum(op.min, `${where}.min`))} ` +
                       `THEN ${flt(asNum(op.min, `${where}.min`))}`);
        if (op.max !== undefined)
            parts.push(`WHEN CAST(v AS DOUBLE) > ${dbl(asNum(op.max, `${where}.max`))} ` +
                       `THEN ${flt(asNum(op.max, `${where}.max`))}`);
        if (parts.length === 1)
            refuse(`${where}: clamp needs "min" or "max"`);
        return t(`CASE ${parts.join(' ')} ELSE v END`);
    }
    case 'log1p':
        // DuckDB has no log1p and its ln() raises at 0 and below, so the
        // edge values are spelled out; u = 1 + x rounded, ln(u) * x / (u - 1)
        // is log1p to a few ulps (and x itself where u rounds to 1).
        return `list_transform(list_transform(${list}, lambda v: ` +
            `struct_pack(x := CAST(v AS DOUBLE), u := 1 + CAST(v AS DOUBLE))), lambda p: ` +
            `CASE WHEN isnan(p.x) THEN CAST(p.x AS FLOAT) ` +
            `WHEN p.x < -1 THEN CAST('nan' AS FLOAT) ` +
            `WHEN p.x = -1 THEN CAST('-inf' AS FLOAT) ` +
            `WHEN isinf(p.x) THEN CAST(p.x AS FLOAT) ` +
            `WHEN p.u = 1 THEN CAST(p.x AS FLOAT) ` +
            `ELSE CAST(ln(p.u) * p.x / (p.u - 1) AS FLOAT) END)`;
    case 'standardize': {
        const mean = asNum(op.mean, `${where}.mean`);
        const std = asNum(op.std, `${where}.std`);
        return `list_transform(list_transform(${list}, lambda v: ` +
            `(CAST(v AS DOUBLE) - ${dbl(mean)}) / ${dbl(std)}), lambda d: ${tof('d')})`;
    }
    case 'bucketize': {
        if (!Array.isArray(op.boundaries) || op.boundaries.length === 0)
            refuse(`${where}.boundaries: expected a non-empty array`);
        const b = op.boundaries.map((x, k) => dbl(asNum(x, `${where}.boundaries[${k}]`)));
        return t(`CASE WHEN isnan(v) THEN v ELSE CAST(len(list_filter([${b.join(', ')}], ` +
                 `lambda bd: bd <= CAST(v AS DOUBLE))) AS FLOAT) END`);
    }
    case 'cast': {
        const to = asStr(op.to, `${where}.to`);
        if (to !== 'int')
            refuse(`${where}: cast to "${to}" is not translated to SQL`);
        const two63 = dbl(9223372036854775808);
        return t(`CASE WHEN isnan(v) THEN CAST(0 AS FLOAT) ` +
                 `WHEN CAST(v AS DOUBLE) >= ${two63} THEN CAST(${two63} AS FLOAT) ` +
                 `WHEN CAST(v AS DOUBLE) <= -${two63} THEN CAST(-${two63} AS FLOAT) ` +
                 `ELSE CAST(CAST(trunc(CAST(v AS DOUBLE)) AS BIGINT) AS FLOAT) END`);
    }
    case 'fill_missing':
        refuse(`${where}.op: fill_missing must be the first op`);
        break;
    default:
        refuse(`${where}.op: op "${op.op}" is not translated to SQL for dense features`);
    }
    return null;
}

// The feature's ids and (when weighted) weights after one sparse op. ids is
// a BIGINT[] expression, except before a leading hash or vocab of strings,
// where it is a BLOB[].
function sparseOp(state, op, k, where, ctx) {
    const { ids, weights, strings } = state;
    switch (op.op) {
    case 'modulo': {
        const n = asInt(op.n, `${where}.n`);
        if (n < 1n)
            refuse(`${where}.n: must be > 0`);
        const nn = bigint(n);
        return { ids: `list_transform(${ids}, lambda x: CASE WHEN x % ${nn} < 0 ` +
                 `THEN x % ${nn} + ${nn} ELSE x % ${nn} END)`, weights };
    }
    case 'hash': {
        const n = asInt(op.n, `${where}.n`);
        const salt = op.salt === undefined ? 0n : asInt(op.salt, `${where}.salt`);
        if (n < 1n)
            refuse(`${where}.n: must be > 0`);
        if (strings) {
            if (k !== 0)
                refuse(`${where}: hash of strings must be the first op`);
            return { ids: `list_transform(${ids}, lambda s: ` +
                     `CAST(dpp_xxh3(s, ${ubig(salt)}) % ${ubig(n)} AS BIGINT))`, weights };
        }
        const saltMix = (BigInt.asUintN(64, salt) * GOLDEN) & M64;
        return { ids: `list_transform(${ids}, lambda x: CAST(dpp_mix64(` +
                 `xor(dpp_u64(x), ${uhuge(saltMix)})) % ${uhuge(n)} AS BIGINT))`, weights };
    }
    case 'vocab': {
        if (!strings || k !== 0)
            refuse(`${where}: vocab of numbers (a per-record type error) is not mirrored`);
        const fn = ctx.registerVocab(asStr(op.file, `${where}.file`),
                                     op.oov_buckets === undefined ? 0n :
                                         asInt(op.oov_buckets, `${where}.oov_buckets`), where);
        return { ids: `list_transform(${ids}, lambda s: ${fn}(s))`, weights };
    }
    case 'truncate':
    case 'first_x': {
        const max = op.op === 'first_x' ? asInt(op.x, `${where}.x`)
            : asInt(op.max_len, `${where}.max_len`);
        const keep = op.op === 'first_x' || op.keep === undefined ? 'first'
            : asStr(op.keep, `${where}.keep`);
        if (keep !== 'first' && keep !== 'last')
            refuse(`${where}.keep: unknown value "${keep}"`);
        const cut = (l) => keep === 'first' ? `list_slice(${l}, 1, ${max})`
            : `CASE WHEN len(${l}) > ${max} THEN list_slice(${l}, len(${l}) - ${max} + 1, ` +
              `len(${l})) ELSE ${l} END`;
        return { ids: cut(ids), weights: weights === null ? null : cut(weights) };
    }
    default:
        refuse(`${where}.op: op "${op.op}" is not translated to SQL for sparse features`);
    }
    return null;
}

// ---- the query ----

// Exact ceil(p * 2^64) for a double p in [0, 1].
function ceilTimes2p64(p) {
    if (p === 0)
        return 0n;
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, p);
    const bits = view.getBigUint64(0);
    const expBits = Number((bits >> 52n) & 0x7ffn);
    let mant = bits & ((1n << 52n) - 1n);
    let exp;
    if (expBits === 0) {
        exp = -1074;
    } else {
        mant |= 1n << 52n;
        exp = expBits - 1075;
    }
    const shift = exp + 64; // p * 2^64 = mant * 2^shift
    if (shift >= 0)
        return mant << BigInt(shift);
    const div = 1n << BigInt(-shift);
    return (mant + div - 1n) / div;
}

// features.dense or features.sparse: absent and empty both mean none.
function featureList(spec, key) {
    const f = spec.features?.[key];
    if (f === undefined)
        return [];
    if (!Array.isArray(f))
        refuse(`features.${key}: expected an array`);
    return f;
}

// Builds the per-row expressions: items1 (the raw label, ids and weights
// lists), items2 (the transformed features, which use items1's aliases), the
// error and filter conditions and the row's dense sum.
function rowExpressions(spec, cols, ctx) {
    const items1 = [];
    const items2 = [];
    // Label: exactly one value, as float32; without one, no row lacks it.
    const labelled = spec.label !== undefined;
    let labErr = 'false';
    if (labelled) {
        const labelName = asStr(spec.label?.name, 'label.name');
        if (cols.isString(labelName))
            refuse('label: a string label (a per-record type error) is not mirrored');
        const labelVals = cols.valuesList(labelName, 'label', (e, t) => floatOf(e, t, 'label'));
        items1.push(`${labelVals} AS __lab_list`);
        labErr = `(__lab_list IS NULL OR len(__lab_list) <> 1)`;
    } else {
        items1.push('CAST(NULL AS FLOAT[]) AS __lab_list');
    }
    if (featureList(spec, 'dense').length + featureList(spec, 'sparse').length === 0)
        refuse('features: no features (dpp refuses the spec)');
    const denseNames = [];
    const sparseNames = [];

    const errs = [];
    const denseSums = [];
    featureList(spec, 'dense').forEach((f, i) => {
        const where = `features.dense[${i}]`;
        const name = asStr(f.name, `${where}.name`);
        denseNames.push(name);
        const dim = f.dim === undefined ? 1n : asInt(f.dim, `${where}.dim`);
        const ops = f.transforms ?? [];
        const fill = ops.length > 0 && ops[0].op === 'fill_missing';
        const present = cols.present(name);
        let list;
        if (cols.isString(name)) {
            // dense features take numbers only: a present string is an error
            errs.push(present);
            list = 'CAST(NULL AS FLOAT[])';
        } else {
            list = cols.valuesList(name, where, (e, t) => floatOf(e, t, where));
            errs.push(`(${present} AND len(${list}) <> ${dim})`);
        }
        if (fill) {
            const value = asNum(ops[0].value, `${where}.transforms[0].value`);
            list = `CASE WHEN ${present} THEN ${list} ELSE ` +
                `list_transform(range(${dim}), lambda _i: ${flt(value)}) END`;
        } else {
            errs.push(`(NOT ${present})`);
        }
        ops.forEach((op, k) => {
            if (k === 0 && fill)
                return;
            list = denseOp(list, op, `${where}.transforms[${k}]`);
        });
        items2.push(`${list} AS __dense_${i}`);
        denseSums.push(`coalesce(list_sum(list_transform(__dense_${i}, ` +
                       `lambda v: CAST(v AS DOUBLE))), 0)`);
    });

    const sparse = featureList(spec, 'sparse');
    let weighted = false;
    const weightTerms = [];
    sparse.forEach((f, i) => {
        const where = `features.sparse[${i}]`;
        const name = asStr(f.name, `${where}.name`);
        sparseNames.push(name);
        const ops = f.transforms ?? [];
        const strings = cols.isString(name);
        if (strings && !(ops.length > 0 && (ops[0].op === 'hash' || ops[0].op === 'vocab')))
            refuse(`${where}: a string feature whose chain does not start with hash or vocab ` +
                   '(a per-record type error) is not mirrored');
        if (cols.has(name) && !strings) {
            const elem = cols.shapeOf(name, where).elem;
            if (elem === 'FLOAT' || elem === 'DOUBLE')
                refuse(`${where}: float ids (column "${name}" is ${elem}) are not mirrored`);
        }
        const conv = strings
            ? (e, t) => (t === 'VARCHAR' ? `encode(${e})` : e)
            : (e, t) => int64Of(e, t, where);
        const raw = cols.valuesList(name, where, conv);
        const empty = strings ? '[]::BLOB[]' : '[]::BIGINT[]';
        items1.push(`coalesce(${raw}, ${empty}) AS __ids0_${i}`);
        let weights = null;
        if (f.weights !== undefined) {
            weighted = true;
            const wname = asStr(f.weights, `${where}.weights`);
            if (cols.isString(wname))
                refuse(`${where}.weights: string weights are not mirrored`);
            const wl = cols.valuesList(wname, `${where}.weights`,
                                       (e, t) => floatOf(e, t, `${where}.weights`));
            items1.push(`coalesce(${wl}, []::FLOAT[]) AS __w0_${i}`);
            errs.push(`(len(__w0_${i}) <> len(__ids0_${i}))`);
            weights = `__w0_${i}`;
        }
        let state = { ids: `__ids0_${i}`, weights, strings };
        ops.forEach((op, k) => {
            state = { ...sparseOp(state, op, k, `${where}.transforms[${k}]`, ctx), strings: false };
        });
        items2.push(`${state.ids} AS __ids_${i}`);
        if (state.weights !== null) {
            items2.push(`${state.weights} AS __w_${i}`);
            weightTerms.push(`coalesce(list_sum(list_transform(__w_${i}, ` +
                             `lambda v: CAST(v AS DOUBLE))), 0)`);
        }
    });

    // Filters: a row is kept when it passes all of them.
    const pass = [];
    (spec.filters ?? []).forEach((flt_, i) => {
        const where = `filters[${i}]`;
        if (flt_.op === 'require') {
            pass.push(cols.present(asStr(flt_.feature, `${where}.feature`)));
        } else if (flt_.op === 'sample') {
            if (!ctx.table)
                refuse(`${where}: the sample filter needs --table DIR (its relative paths)`);
            const p = asNum(flt_.p, `${where}.p`);
            const seed = flt_.seed === undefined ? 0n : asInt(flt_.seed, `${where}.seed`);
            const seedMix = mix64(BigInt.asUintN(64, seed));
            const rowKey = `dpp_mix64((__dpp_path_hash + CAST(__dpp_rec AS UHUGEINT)) % ${TWO64})`;
            const draw = `dpp_mix64(xor(${rowKey}, ${uhuge(seedMix)}))`;
            let keep;
            if (p >= 1)
                keep = 'true';
            else if (p <= 0)
                keep = 'false';
            else
                keep = `(${draw} < CAST('${ceilTimes2p64(p)}' AS UHUGEINT))`;
            if (flt_.label !== undefined) {
                if (!labelled)
                    refuse(`${where}.label: the spec has no label (dpp refuses the spec)`);
                const lbl = asNum(flt_.label, `${where}.label`);
                keep = `(coalesce(__lab_list[1] <> ${flt(lbl)}, true) OR ${keep})`;
            }
            pass.push(keep);
        } else {
            refuse(`${where}.op: filter "${flt_.op}" is not translated to SQL`);
        }
    });

    return {
        items1, items2, labErr, labelled, weighted, nsparse: sparse.length, denseNames, sparseNames,
        weightSql: weightTerms.length ? weightTerms.join(' + ') : 'CAST(0 AS DOUBLE)',
        errSql: errs.length ? errs.map((e) => `coalesce(${e}, true)`).join(' OR ') : 'false',
        passSql: pass.length ? pass.map((e) => `coalesce(${e}, false)`).join(' AND ') : 'true',
        denseSql: denseSums.length ? denseSums.join(' + ') : 'CAST(0 AS DOUBLE)',
        denseTerms: denseSums,
    };
}

// How many records rank r gets of `total`, and where they start (the
// master's rank_quota, in dealing order).
function rankRange(spec, total, rank) {
    const n = BigInt(spec.consumers);
    const bs = BigInt(spec.batchSize);
    const quota = (r) => spec.remainder === 'drop' ? total / n / bs * bs
        : total / n + (BigInt(r) < total % n ? 1n : 0n);
    let start = 0n;
    for (let r = 0; r < rank; r++)
        start += quota(r);
    return { start, count: quota(rank), most: quota(0) };
}

function readSpec(path) {
    const raw = parseSpecText(readFileSync(path, 'utf8'));
    const known = new Set(['table', 'partitions', 'format', 'batch_size', 'epochs', 'consumers',
                           'split_rows', 'on_corrupt', 'compression', 'compression_level',
                           'remainder', 'shuffle', 'order', 'features', 'label', 'filters']);
    for (const key of Object.keys(raw))
        if (!known.has(key))
            refuse(`${key}: unknown key`);
    if (raw.epochs === 'unbounded')
        refuse('epochs: "unbounded" has no last line to mirror');
    return {
        raw,
        batchSize: asInt(raw.batch_size, 'batch_size'),
        epochs: raw.epochs === undefined ? 1n : asInt(raw.epochs, 'epochs'),
        consumers: raw.consumers === undefined ? 1n : asInt(raw.consumers, 'consumers'),
        remainder: raw.remainder === undefined ? 'drop' : asStr(raw.remainder, 'remainder'),
        onCorrupt: raw.on_corrupt === undefined ? 'skip' : asStr(raw.on_corrupt, 'on_corrupt'),
        shuffled: raw.shuffle !== undefined && raw.shuffle !== false,
    };
}

// Registers XXH3 (for hash of strings) as dpp_xxh3(BLOB, UBIGINT) -> UBIGINT.
function registerXxh3(duck, conn) {
    conn.registerScalarFunction(duck.DuckDBScalarFunction.create({
        name: 'dpp_xxh3',
        returnType: duck.UBIGINT,
        parameterTypes: [duck.BLOB, duck.UBIGINT],
        mainFunction: (info, input, output) => {
            const bytes = input.getColumnVector(0);
            const seeds = input.getColumnVector(1);
            for (let r = 0; r < input.rowCount; r++) {
                const b = bytes.getItem(r);
                output.setItem(r, b === null ? null : xxh3(b.bytes, seeds.getItem(r)));
            }
            output.flush();
        },
    }));
}

// Checks the SQL hash against docs/spec.md's test vectors.
async function selfTest(conn) {
    xxh3SelfTest();
    const vectors = [
        [0n, 0n, 1000n, 0n], [1n, 0n, 1000n, 789n], [-1n, 0n, 1000n, 67n],
        [42n, 7n, 1000n, 195n], [-9223372036854775808n, 0n, 1000n, 50n],
        [123456789n, -1n, 9223372036854775807n, 1036691706701278827n],
        [0n, 1n, 9223372036854775807n, 7070836379803831728n],
    ];
    for (const [id, salt, n, want] of vectors) {
        const st = sparseOp({ ids: `[${bigint(id)}]`, weights: null, strings: false },
                            { op: 'hash', n: INT_TAG + n, salt: INT_TAG + salt }, 1, 'self-test');
        const got = (await conn.runAndReadAll(`SELECT CAST((${st.ids})[1] AS VARCHAR)`))
            .getRows()[0][0];
        if (BigInt(got) !== want)
            throw new Error(`self-test: hash(${id}, salt ${salt}) % ${n} = ${got}, ` +
                            `expected ${want}`);
    }
    if (mix64(1n) !== 0x5692161d100b05e5n)
        throw new Error('self-test: mix64(1)');
}

async function main(argv) {
    let rank = 0;
    let table = null;
    const dataRoots = [];
    const args = [];
    for (let k = 0; k < argv.length; k++) {
        const a = argv[k];
        if ((a === '--rank' || a === '--table' || a === '--data-root') && k + 1 < argv.length) {
            const v = argv[++k];
            if (a === '--rank')
                rank = Number(v);
            else if (a === '--table')
                table = v;
            else
                dataRoots.push(v);
        } else if (a.startsWith('-')) {
            process.stderr.write(USAGE);
            return 2;
        } else {
            args.push(a);
        }
    }
    if (args.length !== 2 || !Number.isInteger(rank) || rank < 0) {
        process.stderr.write(USAGE);
        return 2;
    }
    const [specPath, glob] = args;
    const duck = await loadDuckDB();
    const conn = await connect(duck);
    try {
        return await run(duck, conn, specPath, glob, { rank, table, dataRoots });
    } catch (e) {
        if (!(e instanceof Refusal))
            throw e;
        process.stderr.write(`duck_sums: ${e.message}\n`);
        return 1;
    }
}

async function run(duck, conn, specPath, glob, opts) {
    const spec = readSpec(specPath);
    if (BigInt(opts.rank) >= spec.consumers)
        refuse(`--rank ${opts.rank}: the spec has ${spec.consumers} consumer(s)`);
    if (!['drop', 'keep', 'pad'].includes(spec.remainder))
        refuse(`remainder: unknown value "${spec.remainder}"`);
    await conn.run(MACROS);
    registerXxh3(duck, conn);
    await selfTest(conn);

    // hive_partitioning off: dpp does not turn ds=... folders into columns.
    const from = `read_parquet(${sqlString(glob)}, union_by_name = true, filename = true, ` +
        'file_row_number = true, hive_partitioning = false)';
    const described = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM ${from}`)).getRowObjects();
    const types = new Map(described.map((d) => [d.column_name, d.column_type]));
    const physical = new Map();
    const schema = await conn.runAndReadAll(
        `SELECT DISTINCT name, type FROM parquet_schema(${sqlString(glob)}) ` +
        'WHERE type IS NOT NULL');
    for (const [name, type] of schema.getRows())
        physical.set(name, type);
    const cols = new Columns(types, physical);

    // vocab files, each a DuckDB function from a string to its id
    let vocabs = 0;
    const ctx = {
        table: opts.table,
        registerVocab: (file, oov, where) => {
            const ids = loadVocab(file, opts.dataRoots, where);
            const size = BigInt(ids.size);
            const name = `dpp_vocab_${vocabs++}`;
            conn.registerScalarFunction(duck.DuckDBScalarFunction.create({
                name, returnType: duck.BIGINT, parameterTypes: [duck.BLOB],
                mainFunction: (info, input, output) => {
                    const v = input.getColumnVector(0);
                    for (let r = 0; r < input.rowCount; r++) {
                        const b = v.getItem(r);
                        if (b === null) {
                            output.setItem(r, null);
                            continue;
                        }
                        const hit = ids.get(Buffer.from(b.bytes).toString('latin1'));
                        output.setItem(r, hit !== undefined ? hit
                            : oov === 0n ? size : size + xxh3(b.bytes, 0n) % oov);
                    }
                    output.flush();
                },
            }));
            return name;
        },
    };
    const rows = rowExpressions(spec.raw, cols, ctx);

    // The sample filter's path hashes, per file, relative to the table.
    let join = '';
    if (opts.table) {
        const tableReal = realpathSync(opts.table);
        const files = (await conn.runAndReadAll(`SELECT file FROM glob(${sqlString(glob)})`))
            .getRows().map((r) => r[0]);
        await conn.run('CREATE OR REPLACE TEMP TABLE dpp_files (file VARCHAR, path_hash UHUGEINT)');
        for (const f of files) {
            const rel = relative(tableReal, realpathSync(f)).split(sep).join('/');
            if (rel.startsWith('..'))
                refuse(`${f}: not inside --table ${opts.table}`);
            const h = fnv1a64(new TextEncoder().encode(rel));
            await conn.run(`INSERT INTO dpp_files VALUES (${sqlString(f)}, ${uhuge(h)})`);
        }
        join = 'JOIN (SELECT file AS __dpp_pf, path_hash AS __dpp_path_hash FROM dpp_files) ' +
            'ON __dpp_pf = filename';
    }

    const counted = await conn.runAndReadAll(`SELECT count(*) FROM ${from}`);
    const total = BigInt(counted.getRows()[0][0]);
    const range = rankRange(spec, total, opts.rank);
    if (spec.shuffled) {
        if (spec.consumers > 1n)
            refuse('shuffle: with several consumers a rank\'s rows depend on the split ' +
                   'permutation; not mirrored');
        if (spec.remainder === 'drop' && total % spec.batchSize !== 0n)
            refuse('shuffle: with remainder "drop" the dropped rows depend on the permutation');
    }

    const inRank = `(__dpp_g >= ${range.start} AND __dpp_g < ${range.start + range.count})`;
    const ok = `(${inRank} AND NOT __lab_err AND __pass AND NOT __err)`;
    const sparseAggs = [];
    rows.denseTerms.forEach((_, i) => {
        sparseAggs.push(`sum(__dense_sum_${i}) FILTER (WHERE ${ok}) AS dense_plain_${i}`);
        sparseAggs.push(`fsum(__dense_sum_${i}) FILTER (WHERE ${ok}) AS dense_f_${i}`);
    });
    for (let i = 0; i < rows.nsparse; i++) {
        sparseAggs.push(`sum(len(__ids_${i})) FILTER (WHERE ${ok}) AS len_${i}`);
        sparseAggs.push(`CAST(sum(coalesce(list_sum(__ids_${i}), 0)) FILTER (WHERE ${ok}) ` +
                        `AS VARCHAR) AS ids_${i}`);
    }
    // Stages: the raw lists (stage1), the transformed features (stage2),
    // errors and filters (stage3), the row's sums (stage4). Every stage keeps
    // the columns before it (SELECT *), as later expressions read them.
    const sql = `
WITH src AS (
    SELECT *, row_number() OVER (ORDER BY filename, file_row_number) - 1 AS __dpp_g,
           file_row_number AS __dpp_rec
    FROM ${from}
), stage1 AS (
    SELECT *, ${rows.items1.join(',\n           ')}
    FROM src ${join}
), stage2 AS (
    SELECT *${rows.items2.length ? ', ' + rows.items2.join(',\n           ') : ''}
    FROM stage1
), stage3 AS (
    SELECT *, ${rows.labErr} AS __lab_err, (${rows.errSql}) AS __err, (${rows.passSql}) AS __pass
    FROM stage2
), stage4 AS (
    SELECT __dpp_g, __lab_err, __err, __pass, CAST(__lab_list[1] AS DOUBLE) AS __lab,
           ${rows.denseSql} AS __dense_sum, ${rows.weightSql} AS __w_sum
           ${rows.denseTerms.map((t, i) => `, ${t} AS __dense_sum_${i}`).join('')}
           ${Array.from({ length: rows.nsparse }, (_, i) => `, __ids_${i}`).join('')}
    FROM stage3
)
SELECT
    count(*) FILTER (WHERE __lab_err OR (__pass AND __err)) AS errors_all,
    count(*) FILTER (WHERE ${inRank} AND (__lab_err OR (__pass AND __err))) AS errors,
    count(*) FILTER (WHERE ${inRank} AND NOT __lab_err AND NOT __pass) AS filtered,
    count(*) FILTER (WHERE ${ok}) AS rows,
    sum(__lab) FILTER (WHERE ${ok}) AS label_plain, fsum(__lab) FILTER (WHERE ${ok}) AS label_f,
    sum(__dense_sum) FILTER (WHERE ${ok}) AS dense_plain,
    fsum(__dense_sum) FILTER (WHERE ${ok}) AS dense_f,
    sum(__w_sum) FILTER (WHERE ${ok}) AS w_plain, fsum(__w_sum) FILTER (WHERE ${ok}) AS w_f
    ${sparseAggs.length ? ',' + sparseAggs.join(',\n    ') : ''}
FROM stage4`;
    if (process.env.DPP_DUCK_SUMS_SQL)
        process.stderr.write(sql + '\n');
    const res = (await conn.runAndReadAll(sql)).getRowObjects()[0];

    if (spec.onCorrupt === 'fail' && Number(res.errors_all) > 0)
        refuse(`on_corrupt "fail": ${res.errors_all} record(s) with per-record errors; ` +
               'dpp fails the session');
    if (Number(res.errors) > 0)
        process.stderr.write(`duck_sums: ${res.errors} records skipped (per-record errors)\n`);
    if (Number(res.filtered) > 0)
        process.stderr.write(`duck_sums: ${res.filtered} rows filtered out\n`);

    const nrows = BigInt(res.rows);
    // The compensated sum, unless a value was infinite or NaN: then the plain
    // one, which propagates them as dppctl's plain addition does.
    const pick = (plain, comp) => {
        if (plain === null || plain === undefined)
            return 0;
        return Number.isFinite(Number(plain)) ? Number(comp) : Number(plain);
    };
    let lengths = 0n;
    let idsSum = 0n;
    let idsWsum = 0n;
    const sparseSums = [];
    for (let i = 0; i < rows.nsparse; i++) {
        const s = BigInt(res[`ids_${i}`] ?? 0);
        const n = BigInt(res[`len_${i}`] ?? 0);
        lengths += n;
        idsSum += s;
        idsWsum += BigInt(i + 1) * s;
        sparseSums.push(`${JSON.stringify(rows.sparseNames[i])}:` +
                        `{"lengths_sum":${n},"ids_sum":${wrapInt64(s)}}`);
    }
    const denseSums = rows.denseNames.map((name, i) => `${JSON.stringify(name)}:` +
        formatG17(pick(res[`dense_plain_${i}`], res[`dense_f_${i}`])));
    const bs = spec.batchSize;
    let batches = (nrows + bs - 1n) / bs;
    let padded = 0n;
    if (spec.remainder === 'pad') {
        batches = (range.most + bs - 1n) / bs;
        padded = batches * bs - nrows;
    }
    const lines = [];
    for (let e = 0n; e < spec.epochs; e++) {
        let line = `{"epoch":${e},"rows":${nrows},"batches":${batches},` +
            (rows.labelled ? `"label_sum":${formatG17(pick(res.label_plain, res.label_f))},` : '') +
            `"dense_sum":${formatG17(pick(res.dense_plain, res.dense_f))},` +
            `"sparse_lengths_sum":${lengths},"sparse_ids_sum":${wrapInt64(idsSum)},` +
            `"sparse_ids_wsum":${wrapInt64(idsWsum)}`;
        if (rows.weighted)
            line += `,"sparse_weights_sum":${formatG17(pick(res.w_plain, res.w_f))}`;
        if (padded > 0n)
            line += `,"rows_padded":${padded}`;
        line += `,"dense_sums":{${denseSums.join(',')}},"sparse_sums":{${sparseSums.join(',')}}`;
        lines.push(line + '}\n');
    }
    process.stdout.write(lines.join(''));
    return 0;
}

// A vocabulary file as a Map from its strings (bytes as latin1) to line
// numbers, found under the first data root that has it.
function loadVocab(file, roots, where) {
    if (file.startsWith('/') || file.split('/').includes('..'))
        refuse(`${where}.file: must be a relative path without ".."`);
    if (roots.length === 0)
        refuse(`${where}: vocab needs --data-root DIR to find "${file}"`);
    for (const root of roots) {
        let bytes;
        try {
            bytes = readFileSync(resolve(root, file));
        } catch {
            continue;
        }
        const lines = bytes.toString('latin1').split('\n');
        if (lines[lines.length - 1] === '')
            lines.pop(); // the last line's \n, or an empty file
        const ids = new Map();
        lines.forEach((s, k) => {
            if (!ids.has(s))
                ids.set(s, BigInt(k));
        });
        return ids;
    }
    refuse(`${where}.file: "${file}" not found under ${roots.join(', ')}`);
    return null;
}

if (process.argv[1] === fileURLToPath(import.meta.url))
    process.exitCode = await main(process.argv.slice(2));

// For tests of this script itself.
export { denseOp, sparseOp, MACROS, tof };
