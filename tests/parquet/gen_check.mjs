// SPDX-License-Identifier: Apache-2.0
// Reads a `dpp-gen --format parquet` table with two readers that share no
// code with dpp: DuckDB (@duckdb/node-api) and hyparquet. Prints one JSON
// object: the table's sums as DuckDB computes them ("sums"), which must equal
// hyparquet's (checked here) and gen_check.py's over the TFRecord table of the
// same arguments (checked by gen_check.sh), plus what the structure walk saw.
// The structure walk checks each column chunk's OffsetIndex against the pages
// it points at and walks every RLE/bit-packed hybrid run of every page.
// Exits 1 naming what is wrong.
//
// Dense sums are exact: each value times 2^35 is an integer (dpp-gen's reals
// have exponents of at least -12 and 24 significant bits), summed as such.
//
// Usage: node gen_check.mjs DIR
// Packages come from $DPP_NPM_CACHE (default /root/.cache/dpp-npm), which
// must hold node_modules/@duckdb/node-api, hyparquet and hyparquet-compressors.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

const cache = process.env.DPP_NPM_CACHE || '/root/.cache/dpp-npm';
const require = createRequire(join(cache, 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');
const esm = (p) => import(pathToFileURL(join(cache, 'node_modules', p)).href);
const { parquetMetadata, parquetReadObjects, readOffsetIndex } = await esm('hyparquet/src/index.js');
const { deserializeTCompactProtocol } = await esm('hyparquet/src/thrift.js');
const { compressors } = await esm('hyparquet-compressors/src/index.js');

const NDENSE = 13;
const NSPARSE = 26;
const SCALE = 2 ** 35; // see the header: a dense value times SCALE is an integer
const dense = Array.from({ length: NDENSE }, (_, j) => `i${j + 1}`);
const sparse = Array.from({ length: NSPARSE }, (_, j) => `c${j + 1}`);

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node gen_check.mjs DIR');
  process.exit(2);
}
const problems = [];
const fail = (msg) => problems.push(msg);

function listParquet(d) {
  const out = [];
  for (const e of readdirSync(d, { withFileTypes: true })) {
    const p = join(d, e.name);
    if (e.isDirectory()) out.push(...listParquet(p));
    else if (e.name.endsWith('.parquet')) out.push(p);
  }
  return out.sort();
}
const fileKey = (p) => relative(dir, p).replace(/\.parquet$/, '');
const str = (v) => (v === null || v === undefined ? '0' : String(v));

// ---- DuckDB ----------------------------------------------------------------

async function duckdbSums(files) {
  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  const src = `read_parquet('${dir.replace(/'/g, "''")}/**/*.parquet', hive_partitioning = false, filename = true)`;
  const cols = ['count(*) AS "rows"', 'sum(label) AS label', 'sum(row_id) AS row_id'];
  for (const n of dense)
    cols.push(`count(${n}) AS "${n}.present"`, `sum((${n}::DOUBLE * ${SCALE})::HUGEINT) AS "${n}.sum"`,
      `sum(row_id::HUGEINT * (${n}::DOUBLE * ${SCALE})::HUGEINT) AS "${n}.xrow"`);
  for (const n of sparse)
    cols.push(`count(*) - count(${n}) AS "${n}.absent"`, `sum(len(${n})) AS "${n}.lens"`, `sum(list_sum(${n})::HUGEINT) AS "${n}.ids"`,
      `sum(row_id::HUGEINT * list_sum(${n})::HUGEINT) AS "${n}.xrow"`);
  cols.push('count(s1) AS "s1.present"', 'count(DISTINCT s1) AS "s1.distinct"',
    'sum(substr(s1, 2)::BIGINT) AS "s1.num"',
    'sum(row_id::HUGEINT * substr(s1, 2)::BIGINT) AS "s1.xrow"');
  const row = (await con.runAndReadAll(`SELECT ${cols.join(', ')} FROM ${src}`)).getRowObjectsJson()[0];
  const sums = emptySums();
  for (const [k, v] of Object.entries(row)) {
    const [a, b] = k.split('.');
    if (b === undefined) sums[a] = str(v);
    else (sums.dense[a] || sums.sparse[a] || sums.s1)[b] = str(v);
  }
  const per = (await con.runAndReadAll(
    `SELECT filename, count(*) AS n FROM ${src} GROUP BY filename`)).getRowObjectsJson();
  for (const { filename, n } of per) sums.files[fileKey(filename)] = str(n);
  // A file with no rows has no row to group by.
  for (const f of files) sums.files[fileKey(f)] ??= '0';
  sums.files = sortKeys(sums.files);
  return sums;
}

function emptySums() {
  const s = { rows: '0', label: '0', row_id: '0', files: {}, dense: {}, sparse: {}, s1: {} };
  for (const n of dense) s.dense[n] = {};
  for (const n of sparse) s.sparse[n] = {};
  return s;
}

const sortKeys = (o) => Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)));

// ---- hyparquet: sums row by row ----------------------------------------------

async function hyparquetSums(files) {
  const acc = { rows: 0n, label: 0n, row_id: 0n, files: {}, dense: {}, sparse: {}, s1: null };
  for (const n of dense) acc.dense[n] = { present: 0n, sum: 0n, xrow: 0n };
  for (const n of sparse) acc.sparse[n] = { absent: 0n, lens: 0n, ids: 0n, xrow: 0n };
  acc.s1 = { present: 0n, distinct: new Set(), num: 0n, xrow: 0n };
  for (const f of files) {
    const buf = readFileSync(f);
    const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    const rows = await parquetReadObjects({ file, compressors });
    acc.files[fileKey(f)] = String(rows.length);
    for (const r of rows) {
      const id = BigInt(r.row_id);
      acc.rows++;
      acc.label += BigInt(r.label);
      acc.row_id += id;
      for (const n of dense) {
        if (r[n] === null || r[n] === undefined) continue;
        const v = BigInt(r[n] * SCALE); // throws if not an integer
        const d = acc.dense[n];
        d.present++;
        d.sum += v;
        d.xrow += id * v;
      }
      for (const n of sparse) {
        const s = acc.sparse[n];
        if (r[n] === null || r[n] === undefined) { // a null list (--nulls)
          s.absent++;
          continue;
        }
        const t = r[n].reduce((x, y) => x + BigInt(y), 0n);
        s.lens += BigInt(r[n].length);
        s.ids += t;
        s.xrow += id * t;
      }
      if (r.s1 !== null && r.s1 !== undefined) {
        const v = BigInt(r.s1.slice(1));
        acc.s1.present++;
        acc.s1.distinct.add(r.s1);
        acc.s1.num += v;
        acc.s1.xrow += id * v;
      }
    }
  }
  acc.s1.distinct = acc.s1.distinct.size;
  return JSON.parse(JSON.stringify(acc, (_, v) => (typeof v === 'bigint' || typeof v === 'number' ? String(v) : v)));
}

// ---- structure: offset index, page headers, hybrid runs ---------------------

function reader(buf, offset) {
  return { view: new DataView(buf.buffer, buf.byteOffset, buf.byteLength), offset };
}

function varint(buf, at) {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[at.i++];
    if (b === undefined) throw new Error('varint past the end');
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return v;
    shift += 7n;
  }
}

// Decodes the hybrid stream of bit width w in buf[from, to), counting its
// RLE and bit-packed runs; returns the values, bit-packing padding included.
function walkHybrid(buf, from, to, w, stats) {
  const at = { i: from };
  const out = [];
  while (at.i < to) {
    const h = varint(buf, at);
    if (h & 1n) {
      const count = Number(h >> 1n) * 8;
      for (let k = 0; k < count; k++) {
        let v = 0;
        for (let bit = 0; bit < w; bit++) {
          const pos = k * w + bit;
          v |= ((buf[at.i + (pos >> 3)] >> (pos & 7)) & 1) << bit;
        }
        out.push(v >>> 0);
      }
      at.i += (count / 8) * w;
      stats.bitpacked++;
    } else {
      let v = 0;
      for (let k = 0; k < Math.ceil(w / 8); k++) v |= buf[at.i + k] << (8 * k);
      at.i += Math.ceil(w / 8);
      for (let k = Number(h >> 1n); k > 0; k--) out.push(v >>> 0);
      stats.rle++;
    }
  }
  if (at.i !== to) throw new Error(`hybrid runs overrun their block by ${at.i - to} bytes`);
  return out;
}

const levelsOf = (name) =>
  name.startsWith('c') ? { rep: 1, def: 2 } : name.startsWith('i') || name === 's1' ? { rep: 0, def: 1 } : { rep: 0, def: 0 };
const bitWidth = (max) => (max === 0 ? 0 : 32 - Math.clz32(max));

// CRC-32 (zlib's, the one PageHeader.crc holds), over the page's stored
// bytes; written out here rather than taken from dpp or zlib.
const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();
function crc32(bytes) {
  let c = -1;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ -1) | 0;
}

function checkCrc(at, what, h, stored) {
  if (h.field_4 === undefined) return fail(`${at}: ${what} has no CRC`);
  if ((h.field_4 | 0) !== crc32(stored)) fail(`${at}: ${what}: CRC ${h.field_4}, the bytes give ${crc32(stored)}`);
}

function pageHeader(buf, offset) {
  const r = reader(buf, offset);
  const h = deserializeTCompactProtocol(r);
  return { h, len: r.offset - offset };
}

function checkFile(path, stats) {
  const buf = readFileSync(path);
  const meta = parquetMetadata(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
  const where = fileKey(path);
  if (!String(meta.created_by).startsWith('dpp-gen ')) fail(`${where}: created_by "${meta.created_by}"`);
  meta.row_groups.forEach((rg, g) => {
    const numRows = Number(rg.num_rows);
    let total = 0;
    rg.columns.forEach((cc) => {
      const md = cc.meta_data;
      const name = md.path_in_schema[0];
      const at = `${where} row group ${g} ${md.path_in_schema.join('.')}`;
      const { rep, def } = levelsOf(name);
      const dictOff = md.dictionary_page_offset === undefined ? null : Number(md.dictionary_page_offset);
      const dataOff = Number(md.data_page_offset);
      const start = dictOff ?? dataOff;
      const end = start + Number(md.total_compressed_size);
      total += Number(md.total_uncompressed_size);
      if (cc.offset_index_offset === undefined) return fail(`${at}: no offset index`);
      const oiOff = Number(cc.offset_index_offset);
      const oi = readOffsetIndex(reader(buf.subarray(oiOff, oiOff + Number(cc.offset_index_length)), 0));
      const locs = oi.page_locations.map((l) => ({
        offset: Number(l.offset), size: Number(l.compressed_page_size), first: Number(l.first_row_index),
      }));
      if (!locs.length) return fail(`${at}: empty offset index`);
      let dictSize = 0;
      if (dictOff !== null) {
        const { h, len } = pageHeader(buf, dictOff);
        if (h.field_1 !== 2) fail(`${at}: page at the dictionary offset has type ${h.field_1}`);
        if (dictOff + len + h.field_3 !== dataOff) fail(`${at}: dictionary page does not end at data_page_offset`);
        checkCrc(at, 'dictionary page', h, buf.subarray(dictOff + len, dictOff + len + h.field_3));
        dictSize = h.field_7.field_1;
        stats.dictPages++;
      }
      if (locs[0].offset !== dataOff) fail(`${at}: first page at ${locs[0].offset}, data_page_offset ${dataOff}`);
      if (locs[0].first !== 0) fail(`${at}: first page's first_row_index ${locs[0].first}`);
      let values = 0;
      locs.forEach((l, k) => {
        const next = locs[k + 1];
        const rowsInPage = (next ? next.first : numRows) - l.first;
        if (rowsInPage <= 0) fail(`${at}: page ${k} holds ${rowsInPage} rows`);
        if (next && l.offset + l.size !== next.offset) fail(`${at}: page ${k} does not end where page ${k + 1} starts`);
        if (!next && l.offset + l.size !== end) fail(`${at}: last page ends at ${l.offset + l.size}, chunk at ${end}`);
        const { h, len } = pageHeader(buf, l.offset);
        // DATA_PAGE (0): levels with a length prefix, compressed with the
        // values. DATA_PAGE_V2 (3): levels first, uncompressed, their lengths
        // in the header; then the values, compressed unless is_compressed
        // is false.
        const v2 = h.field_1 === 3;
        if (h.field_1 !== 0 && !v2) return fail(`${at}: page ${k} has type ${h.field_1}, not a data page`);
        stats[v2 ? 'v2pages' : 'v1pages']++;
        if (len + h.field_3 !== l.size) fail(`${at}: page ${k}: header + compressed ${len + h.field_3} != ${l.size}`);
        const dh = v2 ? h.field_8 : h.field_5;
        const n = dh.field_1;
        const encoding = v2 ? dh.field_4 : dh.field_2;
        values += n;
        if (!rep && n !== rowsInPage) fail(`${at}: page ${k}: ${n} values for ${rowsInPage} rows`);
        if (v2 && dh.field_3 !== rowsInPage) fail(`${at}: page ${k}: num_rows ${dh.field_3}, ${rowsInPage} by the offset index`);
        stats.pages++;
        // The page body, decompressed, and its hybrid runs.
        let body = buf.subarray(l.offset + len, l.offset + l.size);
        checkCrc(at, `page ${k}`, h, body);
        const levelLen = v2 ? [dh.field_6, dh.field_5] : null; // rep, def
        if (v2) {
          const lv = levelLen[0] + levelLen[1];
          let vals = body.subarray(lv);
          if (dh.field_7 !== false && md.codec !== 'UNCOMPRESSED') vals = compressors[md.codec](vals, h.field_2 - lv);
          if (dh.field_7 === false && md.codec !== 'UNCOMPRESSED') fail(`${at}: page ${k}: is_compressed false under ${md.codec}`);
          const whole = new Uint8Array(lv + vals.length);
          whole.set(body.subarray(0, lv));
          whole.set(vals, lv);
          body = whole;
        } else if (md.codec !== 'UNCOMPRESSED') {
          body = compressors[md.codec](body, h.field_2);
        }
        if (body.length !== h.field_2) return fail(`${at}: page ${k} body is ${body.length}, header says ${h.field_2}`);
        // Levels: the rows a page holds are its repetition level zeros, so
        // first_row_index is checked for list columns too.
        let p = 0;
        let present = n;
        for (const [max, kind] of [[rep, 'rep'], [def, 'def']]) {
          if (!max) continue;
          let blen;
          if (v2) {
            blen = levelLen[kind === 'rep' ? 0 : 1];
          } else {
            blen = body[p] | (body[p + 1] << 8) | (body[p + 2] << 16) | (body[p + 3] << 24);
            p += 4;
          }
          const lv = walkHybrid(body, p, p + blen, bitWidth(max), stats);
          if (lv.length < n || lv.length - n >= 8) fail(`${at}: page ${k}: ${kind} levels hold ${lv.length} values for ${n}`);
          lv.length = n;
          if (lv.some((v) => v > max)) fail(`${at}: page ${k}: ${kind} level above ${max}`);
          if (kind === 'rep') {
            const starts = lv.filter((v) => v === 0).length;
            if (lv[0] !== 0 || starts !== rowsInPage) fail(`${at}: page ${k}: ${starts} rows by the repetition levels, ${rowsInPage} by the offset index`);
          } else {
            present = lv.filter((v) => v === max).length;
            if (v2 && dh.field_2 !== n - present) fail(`${at}: page ${k}: num_nulls ${dh.field_2}, levels say ${n - present}`);
          }
          p += blen;
        }
        if (encoding === 8) {
          const w = body[p];
          const idx = walkHybrid(body, p + 1, body.length, w, stats);
          if (idx.length < present || idx.length - present >= 8) fail(`${at}: page ${k}: ${idx.length} indices for ${present} values`);
          idx.length = present;
          if (idx.some((v) => v >= dictSize)) fail(`${at}: page ${k}: index past the ${dictSize}-entry dictionary`);
        } else if (encoding === 0) {
          const size = md.type === 'FLOAT' ? 4 : 8;
          if (body.length - p !== present * size) fail(`${at}: page ${k}: ${body.length - p} value bytes for ${present} values`);
        } else {
          fail(`${at}: page ${k}: encoding ${encoding}`);
        }
      });
      if (values !== Number(md.num_values)) fail(`${at}: pages hold ${values} values, metadata says ${md.num_values}`);
    });
    if (total !== Number(rg.total_byte_size)) fail(`${where} row group ${g}: total_byte_size ${rg.total_byte_size}, columns add up to ${total}`);
  });
  return Number(meta.num_rows);
}

const files = listParquet(dir);
if (!files.length) {
  console.error(`gen_check: no .parquet files under ${dir}`);
  process.exit(1);
}
const stats = { files: files.length, pages: 0, v1pages: 0, v2pages: 0, dictPages: 0, rle: 0, bitpacked: 0 };
let footerRows = 0;
for (const f of files) {
  try {
    footerRows += checkFile(f, stats);
  } catch (e) {
    fail(`${fileKey(f)}: ${e.message}`);
  }
}
const sums = await duckdbSums(files);
const hy = await hyparquetSums(files);
if (String(footerRows) !== sums.rows) fail(`footers say ${footerRows} rows, DuckDB read ${sums.rows}`);
if (JSON.stringify(sortDeep(hy)) !== JSON.stringify(sortDeep(sums)))
  fail(`hyparquet and DuckDB disagree:\n  duckdb    ${JSON.stringify(sortDeep(sums))}\n  hyparquet ${JSON.stringify(sortDeep(hy))}`);

function sortDeep(o) {
  if (o === null || typeof o !== 'object') return o;
  return Object.fromEntries(Object.keys(o).sort().map((k) => [k, sortDeep(o[k])]));
}

console.log(JSON.stringify({ sums: sortDeep(sums), structure: stats }));
if (problems.length) {
  for (const p of problems) console.error(`gen_check: ${p}`);
  process.exit(1);
}
