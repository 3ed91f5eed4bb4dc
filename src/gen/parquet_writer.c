/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet files of dpp-gen's schema: data page v1, PLAIN or RLE_DICTIONARY
 * values, RLE/bit-packed hybrid levels, an OffsetIndex per column chunk, and
 * the Thrift compact-protocol encoder that the page headers and footer need. */
#include "gen/parquet_writer.h"

#include <errno.h>
#include <limits.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "base/alloc.h"

/* Column order of the file: row_id, label, i1..i13, c1..c26, s1. */
#define NCOL (2 + DPP_GEN_NDENSE + DPP_GEN_NSPARSE + 1)
#define ZSTD_LEVEL 3 /* zstd's own default level */

/* parquet.thrift enums. */
enum { PT_INT64 = 2, PT_FLOAT = 4, PT_BYTE_ARRAY = 6 };
enum { REP_REQUIRED = 0, REP_OPTIONAL = 1, REP_REPEATED = 2 };
enum { CONV_UTF8 = 0, CONV_LIST = 3 };
enum { ENC_PLAIN = 0, ENC_RLE = 3, ENC_RLE_DICTIONARY = 8 };
enum { PAGE_DATA = 0, PAGE_DICTIONARY = 2, PAGE_DATA_V2 = 3 };

/* ---- growable byte buffers ---------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf_t;

static void buf_reserve(buf_t *b, size_t more)
{
    if (b->cap - b->len >= more)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    b->p = dpp_xrealloc(b->p, cap);
    b->cap = cap;
}

static void buf_put(buf_t *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_byte(buf_t *b, uint8_t v)
{
    buf_reserve(b, 1);
    b->p[b->len++] = v;
}

/* The low n bytes of v, little-endian. */
static void buf_le(buf_t *b, uint64_t v, unsigned n)
{
    buf_reserve(b, n);
    for (unsigned i = 0; i < n; i++)
        b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

static void buf_varint(buf_t *b, uint64_t v)
{
    buf_reserve(b, 10);
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

static void buf_free(buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

typedef struct u32vec {
    uint32_t *v;
    size_t n, cap;
} u32vec_t;

static void u32_push(u32vec_t *a, uint32_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 1024;
        a->v = dpp_xrealloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = x;
}

/* ---- Thrift compact protocol, writing only ------------------------------ */

enum {
    CT_STOP = 0,
    CT_TRUE = 1,
    CT_FALSE = 2,
    CT_I16 = 4,
    CT_I32 = 5,
    CT_I64 = 6,
    CT_BINARY = 8,
    CT_LIST = 9,
    CT_STRUCT = 12,
};
#define TW_DEPTH 8 /* FileMetaData > RowGroup > ColumnChunk > ColumnMetaData is 4 */

/* A struct being written: the compact protocol codes each field id as a
 * delta from the previous one of the same struct, so each open struct keeps
 * its last id. */
typedef struct tw {
    buf_t *b;
    int depth;
    int16_t last[TW_DEPTH];
} tw_t;

static void tw_begin(tw_t *t, buf_t *b)
{
    t->b = b;
    t->depth = 0;
    t->last[0] = 0;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static void tw_field(tw_t *t, int16_t id, uint8_t type)
{
    int delta = id - t->last[t->depth];

    if (delta > 0 && delta <= 15) {
        buf_byte(t->b, (uint8_t)(delta << 4 | type));
    } else {
        buf_byte(t->b, type);
        buf_varint(t->b, zigzag(id));
    }
    t->last[t->depth] = id;
}

static void tw_push(tw_t *t)
{
    if (t->depth + 1 >= TW_DEPTH)
        abort(); /* the schema of this file is fixed: a deeper nesting is a bug here */
    t->last[++t->depth] = 0;
}

/* Ends the innermost open struct (the outermost one too). */
static void tw_end(tw_t *t)
{
    buf_byte(t->b, CT_STOP);
    t->depth--;
}

static void tw_i16(tw_t *t, int16_t id, int16_t v)
{
    tw_field(t, id, CT_I16);
    buf_varint(t->b, zigzag(v));
}

/* A bool field: the compact protocol puts the value in the field's type. */
static void tw_bool(tw_t *t, int16_t id, int v)
{
    tw_field(t, id, v ? CT_TRUE : CT_FALSE);
}

static void tw_i32(tw_t *t, int16_t id, int32_t v)
{
    tw_field(t, id, CT_I32);
    buf_varint(t->b, zigzag(v));
}

static void tw_i64(tw_t *t, int16_t id, int64_t v)
{
    tw_field(t, id, CT_I64);
    buf_varint(t->b, zigzag(v));
}

static void tw_string(tw_t *t, int16_t id, const char *s)
{
    size_t n = strlen(s);

    tw_field(t, id, CT_BINARY);
    buf_varint(t->b, n);
    buf_put(t->b, s, n);
}

static void tw_struct(tw_t *t, int16_t id)
{
    tw_field(t, id, CT_STRUCT);
    tw_push(t);
}

static void tw_list(tw_t *t, int16_t id, uint8_t elem_type, size_t n)
{
    tw_field(t, id, CT_LIST);
    if (n < 15) {
        buf_byte(t->b, (uint8_t)(n << 4 | elem_type));
    } else {
        buf_byte(t->b, (uint8_t)(0xf0 | elem_type));
        buf_varint(t->b, n);
    }
}

static void tw_elem_i32(tw_t *t, int32_t v)
{
    buf_varint(t->b, zigzag(v));
}

static void tw_elem_string(tw_t *t, const char *s)
{
    size_t n = strlen(s);

    buf_varint(t->b, n);
    buf_put(t->b, s, n);
}

/* A struct element of a list: no field header. */
static void tw_elem_struct(tw_t *t)
{
    tw_push(t);
}

/* ---- RLE / bit-packed hybrid -------------------------------------------- */

static unsigned bit_width(uint32_t max)
{
    return max ? 32u - (unsigned)__builtin_clz(max) : 0;
}

/* Appends n values of w bits, LSB first, zero-padded to whole groups of 8. */
static void bit_pack(buf_t *b, const uint32_t *v, size_t n, unsigned w)
{
    size_t padded = (n + 7) / 8 * 8;
    uint64_t acc = 0;
    unsigned nbits = 0;

    buf_reserve(b, padded / 8 * w);
    for (size_t i = 0; i < padded; i++) {
        acc |= (uint64_t)(i < n ? v[i] : 0) << nbits;
        nbits += w;
        while (nbits >= 8) {
            b->p[b->len++] = (uint8_t)acc;
            acc >>= 8;
            nbits -= 8;
        }
    }
}

/* Length of the run of equal values at v[i], looking at most cap ahead. */
static size_t run_len(const uint32_t *v, size_t i, size_t n, size_t cap)
{
    size_t j = i + 1;

    while (j < n && j - i < cap && v[j] == v[i])
        j++;
    return j - i;
}

/* Encodes v[0..n) of w bits: a run of 8 or more equal values becomes an RLE
 * run, anything else groups of 8 bit-packed values. A bit-packed stretch may
 * only end on a group boundary, so it goes on while the next group does not
 * start a run of 8; only the stream's last group is padded. */
static void hybrid_encode(buf_t *b, const uint32_t *v, size_t n, unsigned w)
{
    size_t i = 0;

    while (i < n) {
        size_t r = run_len(v, i, n, SIZE_MAX);
        if (r >= 8) {
            buf_varint(b, (uint64_t)r << 1);
            buf_le(b, v[i], (w + 7) / 8);
            i += r;
            continue;
        }
        size_t j = i;
        do
            j += 8;
        while (j < n && run_len(v, j, n, 8) < 8);
        if (j > n)
            j = n;
        buf_varint(b, (uint64_t)((j - i + 7) / 8) << 1 | 1);
        bit_pack(b, v + i, j - i, w);
        i = j;
    }
}

/* A v1 page's level block: 4-byte LE length, then the hybrid. */
static void level_block(buf_t *b, const u32vec_t *levels, unsigned max_level)
{
    size_t at = b->len;

    buf_le(b, 0, 4);
    hybrid_encode(b, levels->v, levels->n, bit_width(max_level));
    uint32_t len = (uint32_t)(b->len - at - 4);
    for (unsigned k = 0; k < 4; k++)
        b->p[at + k] = (uint8_t)(len >> (8 * k));
}

/* Levels of a DATA_PAGE_V2: the hybrid runs without the length prefix (the
 * page header says their length). Returns the bytes appended. */
static size_t level_runs(buf_t *b, const u32vec_t *levels, unsigned max_level)
{
    size_t at = b->len;
    hybrid_encode(b, levels->v, levels->n, bit_width(max_level));
    return b->len - at;
}

/* ---- dictionaries --------------------------------------------------------- */

/* The distinct values of one column chunk, in PLAIN encoding back to back:
 * that is the dictionary page's body as it stands. */
typedef struct dict_slot {
    uint64_t hash;
    uint32_t entry; /* entry + 1, or 0 for a free slot */
    uint32_t len;
} dict_slot_t;

typedef struct dict {
    buf_t plain;
    size_t *off; /* entry e is plain.p[off[e] .. off[e + 1]) */
    size_t n, off_cap;
    dict_slot_t *slot; /* open addressing, at most half full */
    size_t mask;
} dict_t;

/* An 8-byte key (every int64, some strings) goes through splitmix64's
 * finaliser, a bijection: equal hashes and lengths then mean equal keys, and
 * the lookups of the id columns compare no bytes (that took about 40% off
 * dpp-gen's CPU time). Other lengths: FNV-1a and the same finaliser. */
static uint64_t hash_key(const uint8_t *p, size_t n)
{
    uint64_t h = 0;

    if (n == 8) {
        for (unsigned i = 0; i < 8; i++)
            h |= (uint64_t)p[i] << (8 * i);
    } else {
        h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < n; i++)
            h = (h ^ p[i]) * 0x100000001b3ull;
    }
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static void dict_rehash(dict_t *d, size_t slots)
{
    dict_slot_t *old = d->slot;
    size_t old_slots = old ? d->mask + 1 : 0;

    d->slot = dpp_xcalloc(slots, sizeof(*d->slot));
    d->mask = slots - 1;
    for (size_t k = 0; k < old_slots; k++) {
        if (!old[k].entry)
            continue;
        size_t i = old[k].hash & d->mask;
        while (d->slot[i].entry)
            i = (i + 1) & d->mask;
        d->slot[i] = old[k];
    }
    free(old);
}

static void dict_reset(dict_t *d)
{
    d->plain.len = 0;
    d->n = 0;
    if (!d->off) {
        d->off_cap = 1024;
        d->off = dpp_xmalloc(d->off_cap * sizeof(*d->off));
    }
    d->off[0] = 0;
    if (!d->slot)
        dict_rehash(d, 1024);
    else
        memset(d->slot, 0, (d->mask + 1) * sizeof(*d->slot));
}

/* The index of the entry whose PLAIN encoding is key[0..n), added if new. */
static uint32_t dict_index(dict_t *d, const uint8_t *key, size_t n)
{
    uint64_t h = hash_key(key, n);

    if (2 * (d->n + 1) > d->mask + 1)
        dict_rehash(d, 2 * (d->mask + 1));
    for (size_t i = h & d->mask;; i = (i + 1) & d->mask) {
        dict_slot_t *s = &d->slot[i];
        if (s->entry == 0) {
            if (d->n + 2 > d->off_cap) {
                d->off_cap *= 2;
                d->off = dpp_xrealloc(d->off, d->off_cap * sizeof(*d->off));
            }
            buf_put(&d->plain, key, n);
            d->off[d->n + 1] = d->plain.len;
            *s = (dict_slot_t){.hash = h, .entry = (uint32_t)(++d->n), .len = (uint32_t)n};
            return (uint32_t)(d->n - 1);
        }
        if (s->hash != h || s->len != n)
            continue;
        size_t e = s->entry - 1;
        if (n == 8 || memcmp(d->plain.p + d->off[e], key, n) == 0)
            return (uint32_t)e;
    }
}

static void dict_free(dict_t *d)
{
    buf_free(&d->plain);
    free(d->off);
    free(d->slot);
}

/* ---- columns ---------------------------------------------------------------- */

typedef enum col_kind { COL_ROW_ID, COL_LABEL, COL_DENSE, COL_SPARSE, COL_S1 } col_kind_t;

typedef struct page_loc {
    uint64_t offset;    /* in the file; in the chunk's page buffer until written */
    uint32_t size;      /* header included */
    uint64_t first_row; /* in the row group */
} page_loc_t;

/* A written column chunk, as the footer and the offset index describe it. */
typedef struct chunk_meta {
    uint64_t start;
    uint64_t dict_page_offset; /* 0: no dictionary page */
    uint64_t data_page_offset;
    uint64_t uncompressed, compressed; /* page headers included */
    uint64_t num_values;
    page_loc_t *locs; /* owned */
    size_t nlocs;
    uint64_t oi_offset;
    uint32_t oi_length;
} chunk_meta_t;

typedef struct row_group_meta {
    uint64_t num_rows, file_offset, uncompressed, compressed;
    chunk_meta_t col[NCOL];
} row_group_meta_t;

typedef struct column {
    col_kind_t kind;
    unsigned j; /* index among the dense or the sparse features */
    char name[8];
    int type;
    unsigned max_def, max_rep;
    int dict_encoded;

    /* The open page. */
    u32vec_t def, rep, idx;
    buf_t plain;
    uint64_t page_rows, page_values;

    /* The open chunk: finished data pages, headers included, not yet written. */
    buf_t pages;
    page_loc_t *locs;
    size_t nlocs, locs_cap;
    uint64_t chunk_rows, uncompressed, compressed, num_values;
    dict_t dict;
} column_t;

struct dpp_gen_pq {
    dpp_gen_pq_opts_t o;
    char *created_by;
    FILE *f;
    uint64_t pos;
    int err; /* sticky: after an error only _free */
    column_t col[NCOL];
    uint64_t rg_rows, file_rows;
    row_group_meta_t *rgs;
    size_t nrgs, rgs_cap;
    buf_t body, comp, header, meta, levels; /* scratch */
    ZSTD_CCtx *zctx;
};

static void column_setup(column_t *c, unsigned i)
{
    memset(c, 0, sizeof(*c));
    if (i == 0) {
        c->kind = COL_ROW_ID;
        c->type = PT_INT64;
        snprintf(c->name, sizeof(c->name), "row_id");
    } else if (i == 1) {
        c->kind = COL_LABEL;
        c->type = PT_INT64;
        snprintf(c->name, sizeof(c->name), "label");
    } else if (i < 2 + DPP_GEN_NDENSE) {
        c->kind = COL_DENSE;
        c->j = i - 2;
        c->type = PT_FLOAT;
        c->max_def = 1;
        snprintf(c->name, sizeof(c->name), "i%u", c->j + 1);
    } else if (i < 2 + DPP_GEN_NDENSE + DPP_GEN_NSPARSE) {
        c->kind = COL_SPARSE;
        c->j = i - 2 - DPP_GEN_NDENSE;
        c->type = PT_INT64;
        c->max_def = 2; /* optional list, repeated group list */
        c->max_rep = 1;
        c->dict_encoded = 1;
        snprintf(c->name, sizeof(c->name), "c%u", c->j + 1);
    } else {
        c->kind = COL_S1;
        c->type = PT_BYTE_ARRAY;
        c->max_def = 1;
        c->dict_encoded = 1;
        snprintf(c->name, sizeof(c->name), "s1");
    }
}

static void column_free(column_t *c)
{
    free(c->def.v);
    free(c->rep.v);
    free(c->idx.v);
    buf_free(&c->plain);
    buf_free(&c->pages);
    free(c->locs);
    dict_free(&c->dict);
}

dpp_gen_pq_t *dpp_gen_pq_new(const dpp_gen_pq_opts_t *opts)
{
    dpp_gen_pq_t *w = dpp_xcalloc(1, sizeof(*w));

    w->o = *opts;
    w->created_by = dpp_xstrdup(opts->created_by ? opts->created_by : "dpp-gen");
    w->o.created_by = w->created_by;
    if (w->o.row_group_rows == 0)
        w->o.row_group_rows = 1;
    for (unsigned i = 0; i < NCOL; i++) {
        column_setup(&w->col[i], i);
        if (w->col[i].dict_encoded)
            dict_reset(&w->col[i].dict);
    }
    if (w->o.codec == DPP_GEN_CODEC_ZSTD && !(w->zctx = ZSTD_createCCtx()))
        dpp_oom();
    return w;
}

static void forget_row_groups(dpp_gen_pq_t *w)
{
    for (size_t g = 0; g < w->nrgs; g++)
        for (unsigned i = 0; i < NCOL; i++)
            free(w->rgs[g].col[i].locs);
    w->nrgs = 0;
}

void dpp_gen_pq_free(dpp_gen_pq_t *w)
{
    if (!w)
        return;
    forget_row_groups(w);
    free(w->rgs);
    for (unsigned i = 0; i < NCOL; i++)
        column_free(&w->col[i]);
    buf_free(&w->body);
    buf_free(&w->comp);
    buf_free(&w->header);
    buf_free(&w->meta);
    buf_free(&w->levels);
    ZSTD_freeCCtx(w->zctx);
    free(w->created_by);
    free(w);
}

static int out(dpp_gen_pq_t *w, const void *p, size_t n)
{
    errno = 0;
    if (n && fwrite(p, 1, n, w->f) != n)
        return w->err = errno ? -errno : -EIO;
    w->pos += n;
    return 0;
}

/* Compresses w->body with the file's codec. *data points into w->body or
 * w->comp, valid until the next call. Returns 0, -EIO when the codec fails,
 * or -EFBIG past what a page's i32 sizes can say. */
static int compress_body(dpp_gen_pq_t *w, const uint8_t **data, size_t *len)
{
    const buf_t *in = &w->body;

    if (in->len > INT32_MAX)
        return -EFBIG;
    switch (w->o.codec) {
    case DPP_GEN_CODEC_SNAPPY: {
        size_t n = snappy_max_compressed_length(in->len);
        w->comp.len = 0;
        buf_reserve(&w->comp, n);
        if (snappy_compress((const char *)in->p, in->len, (char *)w->comp.p, &n) != SNAPPY_OK)
            return -EIO;
        w->comp.len = n;
        break;
    }
    case DPP_GEN_CODEC_ZSTD: {
        size_t bound = ZSTD_compressBound(in->len);
        w->comp.len = 0;
        buf_reserve(&w->comp, bound);
        size_t n = ZSTD_compressCCtx(w->zctx, w->comp.p, bound, in->p, in->len, ZSTD_LEVEL);
        if (ZSTD_isError(n))
            return -EIO;
        w->comp.len = n;
        break;
    }
    default:
        *data = in->p;
        *len = in->len;
        return 0;
    }
    if (w->comp.len > INT32_MAX)
        return -EFBIG;
    *data = w->comp.p;
    *len = w->comp.len;
    return 0;
}

/* PageHeader of a data page (v1) or a dictionary page, into w->header. */
static void page_header(dpp_gen_pq_t *w, int type, size_t uncompressed, size_t compressed,
                        uint64_t num_values, int encoding, uint32_t crc)
{
    tw_t t;

    w->header.len = 0;
    tw_begin(&t, &w->header);
    tw_i32(&t, 1, type);
    tw_i32(&t, 2, (int32_t)uncompressed);
    tw_i32(&t, 3, (int32_t)compressed);
    tw_i32(&t, 4, (int32_t)crc);
    if (type == PAGE_DATA) {
        tw_struct(&t, 5); /* DataPageHeader */
        tw_i32(&t, 1, (int32_t)num_values);
        tw_i32(&t, 2, encoding);
        tw_i32(&t, 3, ENC_RLE);
        tw_i32(&t, 4, ENC_RLE);
        tw_end(&t);
    } else {
        tw_struct(&t, 7); /* DictionaryPageHeader */
        tw_i32(&t, 1, (int32_t)num_values);
        tw_i32(&t, 2, encoding);
        tw_end(&t);
    }
    tw_end(&t);
}

/* PageHeader of a DATA_PAGE_V2 into w->header: sizes include the levels
 * (stored uncompressed before the values, rep_len + def_len bytes). */
static void page_header_v2(dpp_gen_pq_t *w, const column_t *c, size_t uncompressed,
                           size_t compressed, size_t rep_len, size_t def_len, int encoding,
                           uint32_t crc)
{
    tw_t t;
    uint64_t nulls = 0;
    for (size_t i = 0; i < c->def.n; i++)
        nulls += c->def.v[i] < (uint32_t)c->max_def;

    w->header.len = 0;
    tw_begin(&t, &w->header);
    tw_i32(&t, 1, PAGE_DATA_V2);
    tw_i32(&t, 2, (int32_t)uncompressed);
    tw_i32(&t, 3, (int32_t)compressed);
    tw_i32(&t, 4, (int32_t)crc);
    tw_struct(&t, 8); /* DataPageHeaderV2 */
    tw_i32(&t, 1, (int32_t)c->page_values);
    tw_i32(&t, 2, (int32_t)nulls);
    tw_i32(&t, 3, (int32_t)c->page_rows);
    tw_i32(&t, 4, encoding);
    tw_i32(&t, 5, (int32_t)def_len);
    tw_i32(&t, 6, (int32_t)rep_len);
    if (w->o.codec == DPP_GEN_CODEC_NONE)
        tw_bool(&t, 7, 0); /* is_compressed (default true) */
    tw_end(&t);
    tw_end(&t);
}

/* Closes the column's open page into its chunk buffer: a DATA_PAGE (levels
 * and values compressed together) or a DATA_PAGE_V2 (levels first, as they
 * are; then the values, compressed). */
static int flush_page(dpp_gen_pq_t *w, column_t *c)
{
    const uint8_t *data;
    size_t len;
    int rc;

    if (c->page_rows == 0)
        return 0;
    int v2 = w->o.page_version == 2;
    int encoding = c->dict_encoded ? ENC_RLE_DICTIONARY : ENC_PLAIN;
    size_t rep_len = 0, def_len = 0;
    w->levels.len = 0;
    if (c->max_rep)
        v2 ? (void)(rep_len = level_runs(&w->levels, &c->rep, c->max_rep))
           : level_block(&w->levels, &c->rep, c->max_rep);
    if (c->max_def)
        v2 ? (void)(def_len = level_runs(&w->levels, &c->def, c->max_def))
           : level_block(&w->levels, &c->def, c->max_def);
    w->body.len = 0;
    if (!v2)
        buf_put(&w->body, w->levels.p, w->levels.len);
    if (c->dict_encoded) {
        unsigned width = c->dict.n > 1 ? bit_width((uint32_t)(c->dict.n - 1)) : 0;
        buf_byte(&w->body, (uint8_t)width);
        hybrid_encode(&w->body, c->idx.v, c->idx.n, width);
    } else {
        buf_put(&w->body, c->plain.p, c->plain.len);
    }
    if ((rc = compress_body(w, &data, &len)) != 0)
        return w->err = rc;
    size_t lv = v2 ? w->levels.len : 0;
    uint32_t crc = (uint32_t)crc32(crc32(0, w->levels.p, (uInt)lv), data, (uInt)len);
    if (v2)
        page_header_v2(w, c, lv + w->body.len, lv + len, rep_len, def_len, encoding, crc);
    else
        page_header(w, PAGE_DATA, w->body.len, len, c->page_values, encoding, crc);

    if (c->nlocs == c->locs_cap) {
        c->locs_cap = c->locs_cap ? 2 * c->locs_cap : 16;
        c->locs = dpp_xrealloc(c->locs, c->locs_cap * sizeof(*c->locs));
    }
    c->locs[c->nlocs++] = (page_loc_t){
        .offset = c->pages.len,
        .size = (uint32_t)(w->header.len + lv + len),
        .first_row = c->chunk_rows,
    };
    buf_put(&c->pages, w->header.p, w->header.len);
    buf_put(&c->pages, w->levels.p, lv);
    buf_put(&c->pages, data, len);
    c->uncompressed += w->header.len + lv + w->body.len;
    c->compressed += w->header.len + lv + len;
    c->num_values += c->page_values;
    c->chunk_rows += c->page_rows;
    c->page_rows = c->page_values = 0;
    c->def.n = c->rep.n = c->idx.n = 0;
    c->plain.len = 0;
    return 0;
}

/* Writes one column's chunk: its dictionary page, then its data pages. */
static int write_chunk(dpp_gen_pq_t *w, column_t *c, chunk_meta_t *m)
{
    int rc;

    m->start = w->pos;
    if (c->dict_encoded) {
        const uint8_t *data;
        size_t len;

        w->body.len = 0;
        buf_put(&w->body, c->dict.plain.p, c->dict.plain.len);
        if ((rc = compress_body(w, &data, &len)) != 0)
            return w->err = rc;
        page_header(w, PAGE_DICTIONARY, w->body.len, len, c->dict.n, ENC_PLAIN,
                    (uint32_t)crc32(0, data, (uInt)len));
        m->dict_page_offset = w->pos;
        if ((rc = out(w, w->header.p, w->header.len)) != 0 || (rc = out(w, data, len)) != 0)
            return rc;
        c->uncompressed += w->header.len + w->body.len;
        c->compressed += w->header.len + len;
    }
    m->data_page_offset = w->pos;
    if ((rc = out(w, c->pages.p, c->pages.len)) != 0)
        return rc;
    for (size_t k = 0; k < c->nlocs; k++)
        c->locs[k].offset += m->data_page_offset;
    m->locs = c->locs;
    m->nlocs = c->nlocs;
    m->uncompressed = c->uncompressed;
    m->compressed = c->compressed;
    m->num_values = c->num_values;

    c->locs = NULL;
    c->nlocs = c->locs_cap = 0;
    c->pages.len = 0;
    c->chunk_rows = c->uncompressed = c->compressed = c->num_values = 0;
    if (c->dict_encoded)
        dict_reset(&c->dict);
    return 0;
}

static int flush_row_group(dpp_gen_pq_t *w)
{
    row_group_meta_t *g;
    int rc;

    if (w->rg_rows == 0)
        return 0;
    for (unsigned i = 0; i < NCOL; i++)
        if ((rc = flush_page(w, &w->col[i])) != 0)
            return rc;
    if (w->nrgs == w->rgs_cap) {
        w->rgs_cap = w->rgs_cap ? 2 * w->rgs_cap : 4;
        w->rgs = dpp_xrealloc(w->rgs, w->rgs_cap * sizeof(*w->rgs));
    }
    g = &w->rgs[w->nrgs++];
    memset(g, 0, sizeof(*g));
    g->num_rows = w->rg_rows;
    g->file_offset = w->pos;
    for (unsigned i = 0; i < NCOL; i++) {
        if ((rc = write_chunk(w, &w->col[i], &g->col[i])) != 0)
            return rc;
        g->uncompressed += g->col[i].uncompressed;
        g->compressed += g->col[i].compressed;
    }
    w->rg_rows = 0;
    return 0;
}

int dpp_gen_pq_begin(dpp_gen_pq_t *w, FILE *f)
{
    w->f = f;
    w->pos = 0;
    w->err = 0;
    w->rg_rows = w->file_rows = 0;
    forget_row_groups(w);
    return out(w, "PAR1", 4);
}

static void plain_key_i64(uint8_t key[8], int64_t v)
{
    for (unsigned k = 0; k < 8; k++)
        key[k] = (uint8_t)((uint64_t)v >> (8 * k));
}

static void column_add(column_t *c, const dpp_gen_row_t *r)
{
    uint8_t key[4 + DPP_GEN_S1_MAX];

    switch (c->kind) {
    case COL_ROW_ID:
        buf_le(&c->plain, (uint64_t)r->row_id, 8);
        c->page_values++;
        break;
    case COL_LABEL:
        buf_le(&c->plain, (uint64_t)r->label, 8);
        c->page_values++;
        break;
    case COL_DENSE:
        if (r->dense_null >> c->j & 1) {
            u32_push(&c->def, 0);
        } else {
            uint32_t bits;
            memcpy(&bits, &r->dense[c->j], sizeof(bits));
            u32_push(&c->def, 1);
            buf_le(&c->plain, bits, 4);
        }
        c->page_values++;
        break;
    case COL_SPARSE:
        /* A null list is one entry at definition level 0, an empty one at 1
         * (the list is there, no element); every id is at the full level 2.
         * Repetition 0 starts a row. */
        if (r->n_ids[c->j] == 0) {
            u32_push(&c->rep, 0);
            u32_push(&c->def, r->sparse_null >> c->j & 1 ? 0 : 1);
            c->page_values++;
            break;
        }
        for (unsigned k = 0; k < r->n_ids[c->j]; k++) {
            plain_key_i64(key, r->ids[c->j][k]);
            u32_push(&c->rep, k ? 1 : 0);
            u32_push(&c->def, 2);
            u32_push(&c->idx, dict_index(&c->dict, key, 8));
        }
        c->page_values += r->n_ids[c->j];
        break;
    case COL_S1: {
        size_t n = r->s1_len < DPP_GEN_S1_MAX ? r->s1_len : DPP_GEN_S1_MAX;
        key[0] = (uint8_t)n;
        key[1] = key[2] = key[3] = 0;
        memcpy(key + 4, r->s1, n);
        if (r->s1_null) {
            u32_push(&c->def, 0);
            c->page_values++;
            break;
        }
        u32_push(&c->def, 1);
        u32_push(&c->idx, dict_index(&c->dict, key, 4 + n));
        c->page_values++;
        break;
    }
    }
    c->page_rows++;
}

int dpp_gen_pq_add(dpp_gen_pq_t *w, const dpp_gen_row_t *row)
{
    int rc;

    if (w->err)
        return w->err;
    for (unsigned i = 0; i < NCOL; i++) {
        column_t *c = &w->col[i];
        column_add(c, row);
        if ((c->page_rows >= DPP_GEN_PAGE_ROWS || c->page_values >= DPP_GEN_PAGE_VALUES) &&
            (rc = flush_page(w, c)) != 0)
            return rc;
    }
    w->file_rows++;
    if (++w->rg_rows >= w->o.row_group_rows)
        return flush_row_group(w);
    return 0;
}

static void write_schema(tw_t *t, const column_t *cols)
{
    tw_list(t, 2, CT_STRUCT, 1 + NCOL + 2 * DPP_GEN_NSPARSE);
    tw_elem_struct(t);
    tw_string(t, 4, "schema");
    tw_i32(t, 5, NCOL);
    tw_end(t);
    for (unsigned i = 0; i < NCOL; i++) {
        const column_t *c = &cols[i];
        tw_elem_struct(t);
        if (c->kind == COL_SPARSE) {
            /* optional group cK (LIST) { repeated group list { required int64 element; } } */
            tw_i32(t, 3, REP_OPTIONAL);
            tw_string(t, 4, c->name);
            tw_i32(t, 5, 1);
            tw_i32(t, 6, CONV_LIST);
            tw_struct(t, 10); /* LogicalType */
            tw_struct(t, 3);  /* LIST */
            tw_end(t);
            tw_end(t);
            tw_end(t);
            tw_elem_struct(t);
            tw_i32(t, 3, REP_REPEATED);
            tw_string(t, 4, "list");
            tw_i32(t, 5, 1);
            tw_end(t);
            tw_elem_struct(t);
            tw_i32(t, 1, PT_INT64);
            tw_i32(t, 3, REP_REQUIRED);
            tw_string(t, 4, "element");
            tw_end(t);
        } else {
            tw_i32(t, 1, c->type);
            tw_i32(t, 3, c->max_def ? REP_OPTIONAL : REP_REQUIRED);
            tw_string(t, 4, c->name);
            if (c->kind == COL_S1) {
                tw_i32(t, 6, CONV_UTF8);
                tw_struct(t, 10); /* LogicalType */
                tw_struct(t, 1);  /* STRING */
                tw_end(t);
                tw_end(t);
            }
            tw_end(t);
        }
    }
}

static void write_column_chunk(tw_t *t, const column_t *c, const chunk_meta_t *m, int codec)
{
    tw_elem_struct(t);
    tw_i64(t, 2, (int64_t)m->start);
    tw_struct(t, 3); /* ColumnMetaData */
    tw_i32(t, 1, c->type);
    if (c->dict_encoded) {
        tw_list(t, 2, CT_I32, 3);
        tw_elem_i32(t, ENC_PLAIN); /* the dictionary page */
        tw_elem_i32(t, ENC_RLE);
        tw_elem_i32(t, ENC_RLE_DICTIONARY);
    } else if (c->max_def) {
        tw_list(t, 2, CT_I32, 2);
        tw_elem_i32(t, ENC_PLAIN);
        tw_elem_i32(t, ENC_RLE);
    } else {
        tw_list(t, 2, CT_I32, 1);
        tw_elem_i32(t, ENC_PLAIN);
    }
    if (c->kind == COL_SPARSE) {
        tw_list(t, 3, CT_BINARY, 3);
        tw_elem_string(t, c->name);
        tw_elem_string(t, "list");
        tw_elem_string(t, "element");
    } else {
        tw_list(t, 3, CT_BINARY, 1);
        tw_elem_string(t, c->name);
    }
    tw_i32(t, 4, codec);
    tw_i64(t, 5, (int64_t)m->num_values);
    tw_i64(t, 6, (int64_t)m->uncompressed);
    tw_i64(t, 7, (int64_t)m->compressed);
    tw_i64(t, 9, (int64_t)m->data_page_offset);
    if (m->dict_page_offset)
        tw_i64(t, 11, (int64_t)m->dict_page_offset);
    tw_end(t);
    tw_i64(t, 4, (int64_t)m->oi_offset);
    tw_i32(t, 5, (int32_t)m->oi_length);
    tw_end(t);
}

int dpp_gen_pq_end(dpp_gen_pq_t *w, uint64_t *bytes)
{
    tw_t t;
    int rc;

    if (w->err)
        return w->err;
    if ((rc = flush_row_group(w)) != 0)
        return rc;

    /* The offset indexes, all after the row groups (the page index layout). */
    for (size_t g = 0; g < w->nrgs; g++) {
        for (unsigned i = 0; i < NCOL; i++) {
            chunk_meta_t *m = &w->rgs[g].col[i];
            w->meta.len = 0;
            tw_begin(&t, &w->meta);
            tw_list(&t, 1, CT_STRUCT, m->nlocs);
            for (size_t k = 0; k < m->nlocs; k++) {
                tw_elem_struct(&t);
                tw_i64(&t, 1, (int64_t)m->locs[k].offset);
                tw_i32(&t, 2, (int32_t)m->locs[k].size);
                tw_i64(&t, 3, (int64_t)m->locs[k].first_row);
                tw_end(&t);
            }
            tw_end(&t);
            m->oi_offset = w->pos;
            m->oi_length = (uint32_t)w->meta.len;
            if ((rc = out(w, w->meta.p, w->meta.len)) != 0)
                return rc;
        }
    }

    w->meta.len = 0;
    tw_begin(&t, &w->meta);
    tw_i32(&t, 1, 1);
    write_schema(&t, w->col);
    tw_i64(&t, 3, (int64_t)w->file_rows);
    tw_list(&t, 4, CT_STRUCT, w->nrgs);
    for (size_t g = 0; g < w->nrgs; g++) {
        const row_group_meta_t *rg = &w->rgs[g];
        tw_elem_struct(&t);
        tw_list(&t, 1, CT_STRUCT, NCOL);
        for (unsigned i = 0; i < NCOL; i++)
            write_column_chunk(&t, &w->col[i], &rg->col[i], (int)w->o.codec);
        tw_i64(&t, 2, (int64_t)rg->uncompressed);
        tw_i64(&t, 3, (int64_t)rg->num_rows);
        tw_i64(&t, 5, (int64_t)rg->file_offset);
        tw_i64(&t, 6, (int64_t)rg->compressed);
        if (g <= INT16_MAX)
            tw_i16(&t, 7, (int16_t)g);
        tw_end(&t);
    }
    tw_string(&t, 6, w->created_by);
    tw_end(&t);
    if (w->meta.len > UINT32_MAX)
        return w->err = -EFBIG;
    buf_le(&w->meta, w->meta.len, 4);
    buf_put(&w->meta, "PAR1", 4);
    if ((rc = out(w, w->meta.p, w->meta.len)) != 0)
        return rc;
    if (bytes)
        *bytes = w->pos;
    return 0;
}
