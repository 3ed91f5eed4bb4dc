// SPDX-License-Identifier: Apache-2.0
// What the duck_*.mjs reference scripts share: loading DuckDB's Node API from
// the cache folder scripts/install-npm-tools.sh fills, a connection with
// reproducible settings, and number formatting that matches dppctl's.
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// Exit status for "cannot run here" (CTest SKIP_RETURN_CODE 77).
export const EXIT_SKIP = 77;

export function npmCache() {
    return process.env.DPP_NPM_CACHE || join(homedir(), '.cache', 'dpp-npm');
}

// The module lives outside the tree, where ESM resolution does not look, so
// resolve it from the cache folder. Exits 77 when it is not installed.
export async function loadDuckDB() {
    const cache = npmCache();
    let entry;
    try {
        entry = createRequire(join(cache, 'package.json')).resolve('@duckdb/node-api');
    } catch {
        process.stderr.write(`@duckdb/node-api is not installed in ${cache}` +
            ' (run scripts/install-npm-tools.sh)\n');
        process.exit(EXIT_SKIP);
    }
    return import(pathToFileURL(entry).href);
}

// One thread and insertion order kept, so that sums are added in the same
// order on every run and COPY writes the same bytes every time.
export async function connect(duck) {
    const instance = await duck.DuckDBInstance.create(':memory:', {
        threads: '1',
        preserve_insertion_order: 'true',
    });
    return instance.connect();
}

export async function duckdbVersion(conn) {
    const reader = await conn.runAndReadAll('SELECT version()');
    return reader.getRows()[0][0];
}

// A SQL string literal.
export function sqlString(s) {
    return `'${String(s).replaceAll("'", "''")}'`;
}

// A SQL identifier.
export function sqlIdent(s) {
    return `"${String(s).replaceAll('"', '""')}"`;
}

// A double as C's printf("%.17g") writes it (what dppctl prints), with inf
// and NaN as the strings dppctl uses since JSON has no such numbers. Returns
// a string to splice into JSON text as it is.
export function formatG17(x) {
    if (Number.isNaN(x))
        return '"nan"';
    if (!Number.isFinite(x))
        return x > 0 ? '"inf"' : '"-inf"';
    if (x === 0)
        return Object.is(x, -0) ? '-0' : '0';
    const [mant, expText] = x.toExponential(16).split('e');
    const exp = Number(expText);
    if (exp < -4 || exp >= 17) {
        const m = mant.includes('.') ? mant.replace(/0+$/, '').replace(/\.$/, '') : mant;
        const sign = exp < 0 ? '-' : '+';
        return `${m}e${sign}${String(Math.abs(exp)).padStart(2, '0')}`;
    }
    let fixed = x.toFixed(Math.max(0, 16 - exp));
    if (fixed.includes('.'))
        fixed = fixed.replace(/0+$/, '').replace(/\.$/, '');
    return fixed;
}

// Wraps an integer (BigInt) to int64 two's complement, as C's uint64_t sums
// printed with PRId64 do.
export function wrapInt64(v) {
    return BigInt.asIntN(64, BigInt(v));
}
