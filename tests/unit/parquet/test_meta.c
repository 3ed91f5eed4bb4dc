/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet metadata (src/parquet/meta.c, thrift.c): the real footers, page
 * headers and offset indexes of parquet-testing's conformance files (shapes
 * and counts as DuckDB reports them), schemas of every list form written
 * with a compact-protocol builder of this file's own, and hostile input:
 * footers cut at every length, offsets outside the file, lying counts,
 * nesting 10,000 deep, unknown fields of every Thrift type. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dpp/error.h"
#include "parquet/meta.h"

#define DATA_DIR DPP_SOURCE_DIR "/tests/data/parquet-testing/"
#define FILE_SIZE 65536 /* of the files the built footers describe */

/* ---- a compact-protocol writer, byte by byte ---- */

enum {
    T_TRUE = 1,
    T_FALSE,
    T_I8,
    T_I16,
    T_I32,
    T_I64,
    T_DOUBLE,
    T_BINARY,
    T_LIST,
    T_SET,
    T_MAP,
    T_STRUCT,
    T_UUID
};

typedef struct tb {
    uint8_t *buf;
    size_t len, cap;
    int16_t last[80]; /* previous field id of each open struct */
    int depth;
} tb_t;

static void tb_byte(tb_t *b, uint8_t v)
{
    if (b->len == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 256;
        b->buf = realloc(b->buf, b->cap);
        assert_non_null(b->buf);
    }
    b->buf[b->len++] = v;
}

static void tb_varint(tb_t *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        tb_byte(b, (uint8_t)(v | 0x80));
    tb_byte(b, (uint8_t)v);
}

static void tb_zigzag(tb_t *b, int64_t v)
{
    tb_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* A field header: short form when the id is 1..15 past the previous one. */
static void tb_field(tb_t *b, uint8_t type, int16_t id)
{
    int delta = id - b->last[b->depth];
    if (delta > 0 && delta <= 15) {
        tb_byte(b, (uint8_t)(delta << 4 | type));
    } else {
        tb_byte(b, type);
        tb_zigzag(b, id);
    }
    b->last[b->depth] = id;
}

/* Opens a struct whose header (field or list) is written. */
static void tb_open(tb_t *b)
{
    assert_true(b->depth + 1 < 80);
    b->last[++b->depth] = 0;
}

static void tb_struct(tb_t *b, int16_t id)
{
    tb_field(b, T_STRUCT, id);
    tb_open(b);
}

static void tb_stop(tb_t *b)
{
    tb_byte(b, 0);
    b->depth--;
}

static void tb_i32(tb_t *b, int16_t id, int32_t v)
{
    tb_field(b, T_I32, id);
    tb_zigzag(b, v);
}

static void tb_i64(tb_t *b, int16_t id, int64_t v)
{
    tb_field(b, T_I64, id);
    tb_zigzag(b, v);
}

static void tb_raw(tb_t *b, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tb_byte(b, ((const uint8_t *)p)[i]);
}

static void tb_str(tb_t *b, int16_t id, const char *s)
{
    tb_field(b, T_BINARY, id);
    tb_varint(b, strlen(s));
    tb_raw(b, s, strlen(s));
}

static void tb_list_header(tb_t *b, uint8_t elem, uint64_t n)
{
    if (n < 15) {
        tb_byte(b, (uint8_t)(n << 4 | elem));
    } else {
        tb_byte(b, (uint8_t)(0xf0 | elem));
        tb_varint(b, n);
    }
}

static void tb_list(tb_t *b, int16_t id, uint8_t elem, uint64_t n)
{
    tb_field(b, T_LIST, id);
    tb_list_header(b, elem, n);
}

/* Fields of every Thrift type under ids no Parquet struct uses, in an
 * order that needs both field-header forms. */
static void tb_unknown_fields(tb_t *b)
{
    static const uint8_t uuid[16] = {1, 2, 3};
    double d = 2.5;
    tb_field(b, T_TRUE, 100);
    tb_field(b, T_FALSE, 101);
    tb_field(b, T_I8, 102);
    tb_byte(b, 0xff);
    tb_field(b, T_I16, 90);
    tb_zigzag(b, -300);
    tb_i32(b, 91, INT32_MIN);
    tb_i64(b, 92, INT64_MAX);
    tb_field(b, T_DOUBLE, 93);
    tb_raw(b, &d, 8);
    tb_str(b, 300, "skipped");
    tb_list(b, 301, T_TRUE, 3); /* bools in a list: a byte each */
    tb_byte(b, 1);
    tb_byte(b, 2);
    tb_byte(b, 1);
    tb_field(b, T_SET, 302);
    tb_list_header(b, T_I32, 20); /* long-form size */
    for (int i = 0; i < 20; i++)
        tb_zigzag(b, i);
    tb_field(b, T_MAP, 303);
    tb_varint(b, 2);
    tb_byte(b, T_BINARY << 4 | T_STRUCT);
    for (int i = 0; i < 2; i++) {
        tb_varint(b, 1);
        tb_byte(b, 'k');
        tb_open(b);
        tb_list(b, 1, T_LIST, 1); /* list<list<double>> inside a map value */
        tb_list_header(b, T_DOUBLE, 1);
        tb_raw(b, &d, 8);
        tb_stop(b);
    }
    tb_field(b, T_MAP, 304); /* empty: no type byte */
    tb_varint(b, 0);
    tb_field(b, T_UUID, 305);
    tb_raw(b, uuid, 16);
    tb_struct(b, 306);
    tb_struct(b, 1);
    tb_field(b, T_TRUE, 2);
    tb_stop(b);
    tb_stop(b);
}

/* ---- footers from a schema description ---- */

enum { REQ = 0, OPT = 1, REP = 2 };
enum { CHUNK_CRYPTO = 1, CHUNK_ENCRYPTED_META, CHUNK_FILE_PATH, CHUNK_DICT_ZERO };

/* A schema element below the root: a leaf has type >= 0, a group nchildren. */
typedef struct elem {
    const char *name;
    int type, rep, nchildren, conv, logical;
} elem_t;
// clang-format off
#define LEAF(name, type, rep) {name, type, rep, -1, -1, -1}
#define LEAF_ANN(name, type, rep, conv, logical) {name, type, rep, -1, conv, logical}
#define GROUP(name, rep, n, conv, logical) {name, -1, rep, n, conv, logical}
// clang-format on

typedef struct spec {
    const elem_t *schema;
    int nschema, ntop;
    int64_t num_rows, rg_rows;
    int nrow_groups;             /* 0: 1 */
    int64_t dpo0, dict0, total0; /* chunk 0's offsets when not 0 (others: 4 + 100 i, 100) */
    int64_t oi0, oi_len0;        /* chunk 0's offset index when not 0 */
    int chunks_delta;            /* chunks a row group has beyond the leaf count */
    int wrong_type;              /* chunk 0's type is not its column's */
    int unknown;                 /* unknown fields in every struct */
    int chunk0;                  /* a CHUNK_ field in chunk 0 */
    void (*tail)(tb_t *);        /* writes more fields at the end of FileMetaData */
} spec_t;

static const elem_t FLAT[] = {LEAF("a", DPP_PQ_INT64, OPT), LEAF("b", DPP_PQ_BYTE_ARRAY, REQ)};
// clang-format off
#define FLAT_SPEC(...) {.schema = FLAT, .nschema = 2, .ntop = 2, __VA_ARGS__}
// clang-format on

static void tb_schema_elem(tb_t *b, const elem_t *e, int unknown)
{
    tb_open(b);
    if (unknown)
        tb_unknown_fields(b);
    if (e->type >= 0)
        tb_i32(b, 1, e->type);
    if (e->type == DPP_PQ_FIXED_LEN_BYTE_ARRAY)
        tb_i32(b, 2, 16);
    tb_i32(b, 3, e->rep);
    tb_str(b, 4, e->name);
    if (e->nchildren >= 0)
        tb_i32(b, 5, e->nchildren);
    if (e->conv >= 0)
        tb_i32(b, 6, e->conv);
    if (e->logical >= 0) {
        tb_struct(b, 10);
        tb_struct(b, (int16_t)e->logical);
        if (e->logical == 5) { /* DecimalType */
            tb_i32(b, 1, 2);
            tb_i32(b, 2, 9);
        }
        tb_stop(b);
        tb_stop(b);
    }
    tb_stop(b);
}

static void tb_chunk(tb_t *b, const spec_t *s, int i, int type)
{
    int extra = i == 0 ? s->chunk0 : 0;
    tb_open(b);
    if (extra == CHUNK_FILE_PATH)
        tb_str(b, 1, "other.parquet");
    tb_i64(b, 2, 0);
    tb_struct(b, 3);
    if (s->unknown)
        tb_unknown_fields(b);
    tb_i32(b, 1, i == 0 && s->wrong_type ? (type + 1) % 8 : type);
    tb_list(b, 2, T_I32, 1);
    tb_zigzag(b, DPP_PQ_PLAIN);
    tb_list(b, 3, T_BINARY, 1);
    tb_varint(b, 1);
    tb_byte(b, 'x');
    tb_i32(b, 4, DPP_PQ_ZSTD);
    tb_i64(b, 5, 10);
    tb_i64(b, 6, 100);
    tb_i64(b, 7, i == 0 && s->total0 ? s->total0 : 100);
    tb_i64(b, 9, i == 0 && s->dpo0 ? s->dpo0 : 4 + 100 * i);
    if (i == 0 && s->dict0)
        tb_i64(b, 11, s->dict0);
    if (extra == CHUNK_DICT_ZERO)
        tb_i64(b, 11, 0);
    tb_stop(b);
    if (i == 0 && s->oi0) {
        tb_i64(b, 4, s->oi0);
        tb_i32(b, 5, (int32_t)s->oi_len0);
    }
    if (extra == CHUNK_CRYPTO) {
        tb_struct(b, 8); /* ENCRYPTION_WITH_FOOTER_KEY */
        tb_struct(b, 1);
        tb_stop(b);
        tb_stop(b);
    }
    if (extra == CHUNK_ENCRYPTED_META)
        tb_str(b, 9, "ciphertext");
    tb_stop(b);
}

static void build_footer(tb_t *b, const spec_t *s)
{
    int leaves[64], nleaves = 0, nrg = s->nrow_groups ? s->nrow_groups : 1;
    for (int i = 0; i < s->nschema; i++)
        if (s->schema[i].type >= 0)
            leaves[nleaves++] = s->schema[i].type;
    memset(b, 0, sizeof *b);
    if (s->unknown)
        tb_unknown_fields(b);
    tb_i32(b, 1, 1);
    tb_list(b, 2, T_STRUCT, (uint64_t)s->nschema + 1);
    tb_open(b);
    tb_str(b, 4, "schema");
    tb_i32(b, 5, s->ntop);
    tb_stop(b);
    for (int i = 0; i < s->nschema; i++)
        tb_schema_elem(b, &s->schema[i], s->unknown);
    tb_i64(b, 3, s->num_rows);
    tb_list(b, 4, T_STRUCT, (uint64_t)nrg);
    for (int g = 0; g < nrg; g++) {
        tb_open(b);
        if (s->unknown)
            tb_unknown_fields(b);
        tb_list(b, 1, T_STRUCT, (uint64_t)(nleaves + s->chunks_delta));
        for (int i = 0; i < nleaves + s->chunks_delta; i++)
            tb_chunk(b, s, i, leaves[i % (nleaves ? nleaves : 1)]);
        tb_i64(b, 2, 1000);
        tb_i64(b, 3, s->rg_rows);
        tb_stop(b);
    }
    tb_str(b, 6, "dpp test");
    if (s->tail)
        s->tail(b);
    tb_stop(b);
}

static int parse_built(const spec_t *s, dpp_pq_meta_t *m, char *err, size_t errlen)
{
    tb_t b;
    build_footer(&b, s);
    int rc = dpp_pq_meta_parse(b.buf, b.len, FILE_SIZE, m, err, errlen);
    free(b.buf);
    return rc;
}

/* Parses spec s expecting DPP_ECORRUPT with `want` in the message. */
static void expect_corrupt(const spec_t *s, const char *want)
{
    dpp_pq_meta_t m;
    char err[512] = "";
    int rc = parse_built(s, &m, err, sizeof err);
    if (rc == 0)
        dpp_pq_meta_free(&m);
    if (rc != DPP_ECORRUPT || strstr(err, want) == NULL || strncmp(err, "footer byte ", 12) != 0)
        fail_msg("rc %d, err \"%s\", wanted \"%s\"", rc, err, want);
    assert_int_equal(m.ncolumns + m.nfields + m.nrow_groups, 0);
}

/* ---- the conformance files ---- */

typedef struct file {
    uint8_t *data;
    size_t size;
    uint32_t footer_len;
} file_t;

static void load(const char *name, file_t *f)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", DATA_DIR, name);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    f->size = (size_t)ftell(fp);
    rewind(fp);
    f->data = malloc(f->size);
    assert_non_null(f->data);
    assert_int_equal(fread(f->data, 1, f->size, fp), f->size);
    fclose(fp);
    char err[256];
    assert_int_equal(
        dpp_pq_footer_locate(f->data + f->size - 8, f->size, &f->footer_len, err, sizeof err), 0);
}

static const uint8_t *footer(const file_t *f)
{
    return f->data + f->size - 8 - f->footer_len;
}

static void load_meta(const char *name, file_t *f, dpp_pq_meta_t *m)
{
    char err[512];
    load(name, f);
    int rc = dpp_pq_meta_parse(footer(f), f->footer_len, f->size, m, err, sizeof err);
    if (rc)
        fail_msg("%s: %d %s", name, rc, err);
}

static const char *const FILES[] = {
    "alltypes_dictionary.parquet",        "alltypes_plain.parquet",
    "alltypes_plain.snappy.parquet",      "binary.parquet",
    "byte_stream_split.zstd.parquet",     "datapage_v1-snappy-compressed-checksum.parquet",
    "datapage_v2.snappy.parquet",         "delta_binary_packed.parquet",
    "delta_length_byte_array.parquet",    "hadoop_lz4_compressed.parquet",
    "int32_with_null_pages.parquet",      "list_columns.parquet",
    "lz4_raw_compressed.parquet",         "nulls.snappy.parquet",
    "repeated_primitive_no_list.parquet", "rle_boolean_encoding.parquet",
};
#define NFILES (sizeof FILES / sizeof *FILES)

/* Rows, columns and codec per file, as DuckDB's parquet_metadata() reports. */
static void test_conformance_counts(void **state)
{
    static const struct {
        int64_t rows;
        uint32_t columns;
        dpp_pq_codec_t codec;
    } want[NFILES] = {
        {2, 11, DPP_PQ_UNCOMPRESSED}, {8, 11, DPP_PQ_UNCOMPRESSED},   {2, 11, DPP_PQ_SNAPPY},
        {12, 1, DPP_PQ_UNCOMPRESSED}, {300, 2, DPP_PQ_ZSTD},          {5120, 2, DPP_PQ_SNAPPY},
        {5, 5, DPP_PQ_SNAPPY},        {200, 66, DPP_PQ_UNCOMPRESSED}, {1000, 1, DPP_PQ_ZSTD},
        {4, 3, DPP_PQ_LZ4},           {1000, 1, DPP_PQ_UNCOMPRESSED}, {3, 2, DPP_PQ_SNAPPY},
        {4, 3, DPP_PQ_LZ4_RAW},       {8, 1, DPP_PQ_SNAPPY},          {4, 4, DPP_PQ_UNCOMPRESSED},
        {68, 1, DPP_PQ_GZIP},
    };
    (void)state;
    for (size_t i = 0; i < NFILES; i++) {
        file_t f;
        dpp_pq_meta_t m;
        load_meta(FILES[i], &f, &m);
        assert_int_equal(m.num_rows, want[i].rows);
        assert_int_equal(m.nrow_groups, 1);
        assert_int_equal(m.row_groups[0].num_rows, want[i].rows);
        assert_int_equal(m.row_groups[0].first_row, 0);
        assert_int_equal(m.ncolumns, want[i].columns);
        for (uint32_t c = 0; c < m.ncolumns; c++) {
            assert_int_equal(m.row_groups[0].chunks[c].codec, want[i].codec);
            assert_int_equal(m.row_groups[0].chunks[c].type, m.columns[c].type);
            assert_false(m.row_groups[0].chunks[c].encrypted);
        }
        dpp_pq_meta_free(&m);
        free(f.data);
    }
}

static void assert_field(const dpp_pq_meta_t *m, const char *name, dpp_pq_shape_t shape,
                         int def_list, int def_elem, const char *path)
{
    const dpp_pq_field_t *fd = dpp_pq_meta_field(m, name);
    if (fd == NULL)
        fail_msg("no field %s", name);
    if (fd->shape != shape)
        fail_msg("%s: shape %d, wanted %d (%s)", name, fd->shape, shape, fd->why);
    if (shape == DPP_PQ_UNSUPPORTED)
        return;
    assert_true(fd->column < m->ncolumns);
    assert_string_equal(m->columns[fd->column].path, path);
    if (shape == DPP_PQ_LIST) {
        assert_int_equal(fd->def_list, def_list);
        assert_int_equal(fd->def_elem, def_elem);
    }
}

static void test_conformance_shapes(void **state)
{
    file_t f;
    dpp_pq_meta_t m;
    (void)state;

    /* parquet-cpp 1.5.1: optional group (LIST) { repeated group list { optional item } } */
    load_meta("list_columns.parquet", &f, &m);
    assert_int_equal(m.nfields, 2);
    assert_field(&m, "int64_list", DPP_PQ_LIST, 1, 2, "int64_list.list.item");
    assert_field(&m, "utf8_list", DPP_PQ_LIST, 1, 2, "utf8_list.list.item");
    assert_int_equal(m.columns[0].max_def, 3);
    assert_int_equal(m.columns[0].max_rep, 1);
    assert_int_equal(m.columns[0].type, DPP_PQ_INT64);
    assert_int_equal(m.columns[1].type, DPP_PQ_BYTE_ARRAY);
    assert_int_equal(m.columns[1].converted_type, 0); /* UTF8 */
    assert_int_equal(m.columns[1].logical_type, 1);   /* STRING */
    assert_int_equal(m.row_groups[0].chunks[0].dictionary_page_offset, 4);
    assert_string_equal(m.created_by, "parquet-cpp version 1.5.1-SNAPSHOT");
    dpp_pq_meta_free(&m);
    free(f.data);

    /* parquet-rs: top-level repeated primitives, and the same inside a struct */
    load_meta("repeated_primitive_no_list.parquet", &f, &m);
    assert_int_equal(m.nfields, 3);
    assert_field(&m, "Int32_list", DPP_PQ_LIST, 0, 1, "Int32_list");
    assert_field(&m, "String_list", DPP_PQ_LIST, 0, 1, "String_list");
    assert_field(&m, "group_of_lists", DPP_PQ_UNSUPPORTED, 0, 0, NULL);
    assert_non_null(strstr(dpp_pq_meta_field(&m, "group_of_lists")->why, "struct"));
    assert_int_equal(m.ncolumns, 4); /* the struct's columns keep their chunks */
    assert_string_equal(m.columns[3].path, "group_of_lists.String_list_in_group");
    assert_int_equal(m.columns[0].max_def, 1);
    assert_int_equal(m.columns[0].max_rep, 1);
    assert_int_equal(m.row_groups[0].chunks[0].offset_index_offset, 656);
    assert_int_equal(m.row_groups[0].chunks[0].offset_index_length, 10);
    dpp_pq_meta_free(&m);
    free(f.data);

    /* parquet-mr 1.8.1: scalars and optional group e (LIST) { repeated group list { required
     * int32 element } } */
    load_meta("datapage_v2.snappy.parquet", &f, &m);
    assert_int_equal(m.nfields, 5);
    assert_field(&m, "a", DPP_PQ_SCALAR, 0, 0, "a");
    assert_field(&m, "d", DPP_PQ_SCALAR, 0, 0, "d");
    assert_field(&m, "e", DPP_PQ_LIST, 1, 2, "e.list.element");
    assert_int_equal(m.columns[0].max_def, 1);
    assert_int_equal(m.columns[1].max_def, 0);
    assert_int_equal(m.columns[4].max_def, 2);
    assert_int_equal(m.columns[4].max_rep, 1);
    /* A dictionary page precedes the data of a, c, e, but the writer left
     * dictionary_page_offset unset. */
    assert_int_equal(m.row_groups[0].chunks[0].dictionary_page_offset, -1);
    assert_null(dpp_pq_meta_field(&m, "f"));
    dpp_pq_meta_free(&m);
    free(f.data);

    load_meta("nulls.snappy.parquet", &f, &m);
    assert_field(&m, "b_struct", DPP_PQ_UNSUPPORTED, 0, 0, NULL);
    assert_int_equal(m.columns[0].max_def, 2);
    dpp_pq_meta_free(&m);
    free(f.data);

    /* Impala: INT96 timestamps are scalars like any other. */
    load_meta("alltypes_plain.parquet", &f, &m);
    assert_field(&m, "timestamp_col", DPP_PQ_SCALAR, 0, 0, "timestamp_col");
    assert_int_equal(m.columns[10].type, DPP_PQ_INT96);
    assert_int_equal(m.row_groups[0].chunks[1].dictionary_page_offset, -1);
    assert_int_equal(m.row_groups[0].chunks[10].dictionary_page_offset, 929);
    assert_int_equal(m.row_groups[0].chunks[10].data_page_offset, 1040);
    assert_int_equal(m.row_groups[0].chunks[10].total_compressed_size, 139);
    dpp_pq_meta_free(&m);
    free(f.data);
}

/* Walks every chunk's pages by their headers: they must tile the chunk, and
 * the data pages' values add up to the chunk's; an offset index, where
 * there is one, lists the same data pages. */
static void test_conformance_pages(void **state)
{
    (void)state;
    for (size_t i = 0; i < NFILES; i++) {
        file_t f;
        dpp_pq_meta_t m;
        char err[512];
        load_meta(FILES[i], &f, &m);
        for (uint32_t c = 0; c < m.ncolumns; c++) {
            const dpp_pq_chunk_t *k = &m.row_groups[0].chunks[c];
            int64_t pos =
                k->dictionary_page_offset >= 0 ? k->dictionary_page_offset : k->data_page_offset;
            int64_t end = pos + k->total_compressed_size, values = 0, data_at[16];
            size_t ndata = 0;
            while (pos < end) {
                dpp_pq_page_header_t h;
                size_t used;
                int rc = dpp_pq_page_header_parse(f.data + pos, (size_t)(end - pos), &h, &used, err,
                                                  sizeof err);
                if (rc)
                    fail_msg("%s column %u at %lld: %s", FILES[i], c, (long long)pos, err);
                if (h.type != DPP_PQ_DICTIONARY_PAGE) {
                    values += h.num_values;
                    if (ndata < 16)
                        data_at[ndata++] = pos;
                }
                pos += (int64_t)used + h.compressed_size;
            }
            assert_int_equal(pos, end);
            assert_int_equal(values, k->num_values);
            if (k->offset_index_offset < 0)
                continue;
            dpp_pq_page_loc_t *locs;
            size_t n;
            assert_int_equal(dpp_pq_offset_index_parse(f.data + k->offset_index_offset,
                                                       (size_t)k->offset_index_length, &locs, &n,
                                                       err, sizeof err),
                             0);
            assert_int_equal(n, ndata);
            for (size_t p = 0; p < n; p++)
                assert_int_equal(locs[p].offset, data_at[p]);
            free(locs);
        }
        dpp_pq_meta_free(&m);
        free(f.data);
    }
}

/* A real footer cut at every length is refused; so is every length of a
 * real page header -EAGAIN. */
static void test_truncated(void **state)
{
    file_t f;
    dpp_pq_meta_t m;
    dpp_pq_page_header_t h;
    char err[512];
    size_t used;
    (void)state;
    for (size_t i = 0; i < NFILES; i++) {
        load(FILES[i], &f);
        for (uint32_t len = 0; len < f.footer_len; len++) {
            int rc = dpp_pq_meta_parse(footer(&f), len, f.size, &m, err, sizeof err);
            if (rc != DPP_ECORRUPT)
                fail_msg("%s cut to %u bytes: rc %d", FILES[i], len, rc);
            assert_int_equal(m.ncolumns, 0);
        }
        assert_int_equal(
            dpp_pq_page_header_parse(f.data + 4, f.size - 4, &h, &used, err, sizeof err), 0);
        for (size_t len = 0; len < used; len++)
            assert_int_equal(dpp_pq_page_header_parse(f.data + 4, len, &h, &used, err, sizeof err),
                             -EAGAIN);
        free(f.data);
    }
}

static void test_footer_locate(void **state)
{
    uint8_t tail[8] = {100, 0, 0, 0, 'P', 'A', 'R', '1'};
    uint32_t len = 0;
    char err[256];
    (void)state;
    assert_int_equal(dpp_pq_footer_locate(tail, 112, &len, err, sizeof err), 0);
    assert_int_equal(len, 100);
    assert_int_equal(dpp_pq_footer_locate(tail, 111, &len, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "footer length 100 does not fit a file of 111 bytes"));
    assert_int_equal(dpp_pq_footer_locate(tail, 11, &len, err, sizeof err), DPP_ECORRUPT);
    memcpy(tail, "\xff\xff\xff\xff", 4);
    assert_int_equal(dpp_pq_footer_locate(tail, UINT64_MAX, &len, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "exceeds the limit"));
    memcpy(tail + 4, "PARE", 4);
    assert_int_equal(dpp_pq_footer_locate(tail, 1000, &len, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "encrypted"));
    memcpy(tail + 4, "PAR2", 4);
    assert_int_equal(dpp_pq_footer_locate(tail, 1000, &len, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "not a Parquet file"));
}

/* ---- built schemas ---- */

static void test_flat_and_unknown_fields(void **state)
{
    dpp_pq_meta_t m;
    char err[512];
    (void)state;
    for (int unknown = 0; unknown < 2; unknown++) {
        spec_t s = FLAT_SPEC(.num_rows = 30, .rg_rows = 10, .nrow_groups = 3, .dict0 = 4,
                             .dpo0 = 50, .oi0 = 2000, .oi_len0 = 20, .unknown = unknown);
        if (parse_built(&s, &m, err, sizeof err))
            fail_msg("%s", err);
        assert_int_equal(m.version, 1);
        assert_int_equal(m.num_rows, 30);
        assert_string_equal(m.created_by, "dpp test");
        assert_int_equal(m.nfields, 2);
        assert_field(&m, "a", DPP_PQ_SCALAR, 0, 0, "a");
        assert_field(&m, "b", DPP_PQ_SCALAR, 0, 0, "b");
        assert_int_equal(m.columns[0].max_def, 1);
        assert_int_equal(m.columns[1].max_def, 0);
        assert_int_equal(m.columns[0].converted_type, -1);
        assert_int_equal(m.nrow_groups, 3);
        for (int g = 0; g < 3; g++) {
            const dpp_pq_row_group_t *rg = &m.row_groups[g];
            assert_int_equal(rg->first_row, 10 * g);
            assert_int_equal(rg->chunks[0].codec, DPP_PQ_ZSTD);
            assert_int_equal(rg->chunks[0].num_values, 10);
            assert_int_equal(rg->chunks[0].data_page_offset, 50);
            assert_int_equal(rg->chunks[0].dictionary_page_offset, 4);
            assert_int_equal(rg->chunks[0].offset_index_offset, 2000);
            assert_int_equal(rg->chunks[0].offset_index_length, 20);
            assert_int_equal(rg->chunks[1].data_page_offset, 104);
            assert_int_equal(rg->chunks[1].dictionary_page_offset, -1);
            assert_int_equal(rg->chunks[1].offset_index_offset, -1);
        }
        dpp_pq_meta_free(&m);
    }
    dpp_pq_meta_free(NULL);
}

/* Each list form of LogicalTypes.md, and what is not a list of primitives. */
static void test_list_forms(void **state)
{
    /* Indented as the tree; each block is a top-level field. */
    // clang-format off
    static const elem_t schema[] = {
        /* 3-level, nullable list */
        GROUP("l3", OPT, 1, 3, 3),
            GROUP("list", REP, 1, -1, -1),
                LEAF("element", 1, OPT),
        /* 3-level, required list, LIST by logicalType only */
        GROUP("l3req", REQ, 1, -1, 3),
            GROUP("list", REP, 1, -1, -1),
                LEAF("element", 2, REQ),
        /* 2-level: the repeated primitive is the element */
        GROUP("l2", OPT, 1, 3, -1),
            LEAF("element", 1, REP),
        /* rule 4: a repeated group of one field, named neither array nor _tuple */
        GROUP("l_elem", OPT, 1, 3, -1),
            GROUP("element", REP, 1, -1, -1),
                LEAF("str", 6, REQ),
        /* rule 3: the repeated group is the element (a one-field struct) */
        GROUP("l_arr", OPT, 1, 3, -1),
            GROUP("array", REP, 1, -1, -1),
                LEAF("str", 6, REQ),
        GROUP("l_tup", OPT, 1, 3, -1),
            GROUP("l_tup_tuple", REP, 1, -1, -1),
                LEAF("x", 1, REQ),
        /* rule 2: a repeated group of several fields */
        GROUP("l_two", OPT, 1, 3, -1),
            GROUP("element", REP, 2, -1, -1),
                LEAF("x", 1, REQ),
                LEAF("y", 1, REQ),
        /* list of lists */
        GROUP("ll", OPT, 1, 3, -1),
            GROUP("list", REP, 1, -1, -1),
                GROUP("element", OPT, 1, 3, -1),
                    GROUP("list", REP, 1, -1, -1),
                        LEAF("element", 1, OPT),
        /* list of structs under the standard names */
        GROUP("ls", OPT, 1, 3, -1),
            GROUP("list", REP, 1, -1, -1),
                GROUP("element", OPT, 1, -1, -1),
                    LEAF("x", 1, OPT),
        /* maps, new and legacy */
        GROUP("map", OPT, 1, 1, 2),
            GROUP("key_value", REP, 2, -1, -1),
                LEAF("key", 6, REQ),
                LEAF("value", 1, OPT),
        GROUP("mkv", OPT, 1, 2, -1),
            GROUP("map", REP, 1, -1, -1),
                LEAF("key", 6, REQ),
        /* a struct; a repeated group; a repeated LIST group */
        GROUP("st", OPT, 1, -1, -1),
            LEAF("x", 1, OPT),
        GROUP("rg", REP, 1, -1, -1),
            LEAF("x", 1, OPT),
        GROUP("rl", REP, 1, 3, -1),
            LEAF("element", 1, REP),
        /* decimals: by converted type and by logical type; a FIXED_LEN_BYTE_ARRAY */
        LEAF_ANN("dec", 1, OPT, 5, -1),
        GROUP("decs", OPT, 1, 3, -1),
            GROUP("list", REP, 1, -1, -1),
                LEAF_ANN("element", 7, OPT, -1, 5),
        /* an empty group, then a scalar after all that */
        GROUP("empty", OPT, 0, -1, -1),
        LEAF("last", 0, REQ),
        /* LIST groups that do not follow the form */
        GROUP("l_kids", OPT, 2, 3, -1),
            LEAF("a", 1, REP),
            LEAF("b", 1, REP),
        GROUP("l_norep", OPT, 1, 3, -1),
            LEAF("element", 1, OPT),
    };
    // clang-format on
    spec_t s = {.schema = schema, .nschema = sizeof schema / sizeof *schema, .ntop = 20};
    dpp_pq_meta_t m;
    char err[512];
    (void)state;
    if (parse_built(&s, &m, err, sizeof err))
        fail_msg("%s", err);
    assert_int_equal(m.nfields, 20);
    assert_field(&m, "l3", DPP_PQ_LIST, 1, 2, "l3.list.element");
    assert_field(&m, "l3req", DPP_PQ_LIST, 0, 1, "l3req.list.element");
    assert_field(&m, "l2", DPP_PQ_LIST, 1, 2, "l2.element");
    assert_field(&m, "l_elem", DPP_PQ_LIST, 1, 2, "l_elem.element.str");
    assert_field(&m, "last", DPP_PQ_SCALAR, 0, 0, "last");
    static const struct {
        const char *name, *why;
    } unsupported[] = {
        {"l_arr", "a list of structs"},
        {"l_tup", "a list of structs"},
        {"l_two", "a list of structs"},
        {"ll", "a list of lists"},
        {"ls", "a list of structs"},
        {"map", "a MAP"},
        {"mkv", "a MAP"},
        {"st", "a struct (group without LIST)"},
        {"rg", "a repeated group"},
        {"rl", "a LIST group that is not optional or required"},
        {"empty", "a struct (group without LIST)"},
        {"l_kids", "a LIST group without exactly one child"},
        {"l_norep", "a LIST group whose child is not repeated"},
    };
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const dpp_pq_field_t *fd = dpp_pq_meta_field(&m, unsupported[i].name);
        assert_non_null(fd);
        assert_int_equal(fd->shape, DPP_PQ_UNSUPPORTED);
        assert_string_equal(fd->why, unsupported[i].why);
    }
    const dpp_pq_column_t *c = &m.columns[dpp_pq_meta_field(&m, "l3")->column];
    assert_int_equal(c->max_def, 3);
    assert_int_equal(c->max_rep, 1);
    c = &m.columns[dpp_pq_meta_field(&m, "l2")->column];
    assert_int_equal(c->max_def, 2);
    assert_int_equal(c->max_rep, 1);
    c = &m.columns[dpp_pq_meta_field(&m, "dec")->column];
    assert_true(c->is_decimal);
    assert_int_equal(c->converted_type, 5);
    assert_field(&m, "decs", DPP_PQ_LIST, 1, 2, "decs.list.element");
    c = &m.columns[dpp_pq_meta_field(&m, "decs")->column];
    assert_true(c->is_decimal);
    assert_int_equal(c->logical_type, 5);
    assert_int_equal(c->type, DPP_PQ_FIXED_LEN_BYTE_ARRAY);
    assert_int_equal(c->type_length, 16);
    /* ll's leaf: two optional lists with optional elements */
    c = &m.columns[8];
    assert_string_equal(c->path, "ll.list.element.list.element");
    assert_int_equal(c->max_def, 5);
    assert_int_equal(c->max_rep, 2);
    dpp_pq_meta_free(&m);
}

static void test_bad_schemas(void **state)
{
    static const elem_t too_many[] = {GROUP("g", OPT, 3, -1, -1), LEAF("x", 1, OPT)};
    static const elem_t outside[] = {LEAF("x", 1, OPT), LEAF("y", 1, OPT)};
    static const elem_t lacks[] = {GROUP("g", OPT, 2, -1, -1), GROUP("h", OPT, 1, -1, -1),
                                   LEAF("x", 1, OPT)};
    static const elem_t neither[] = {{"x", -1, OPT, -1, -1, -1}};
    static const elem_t no_rep[] = {LEAF("x", 1, -1)};
    static const elem_t vector[] = {LEAF("x", 1, 3)};
    static const elem_t bad_type[] = {LEAF("x", 9, OPT)};
    elem_t deep[70];
    (void)state;
    expect_corrupt(&(spec_t){.schema = too_many, .nschema = 2, .ntop = 1},
                   "group \"g\" claims 3 children");
    expect_corrupt(&(spec_t){.schema = outside, .nschema = 2, .ntop = 1},
                   "lies outside the root's 1 children");
    expect_corrupt(&(spec_t){.schema = outside, .nschema = 2, .ntop = 5},
                   "the schema root has num_children 5");
    expect_corrupt(&(spec_t){.schema = lacks, .nschema = 3, .ntop = 1},
                   "group \"g\" lacks 1 of its children");
    expect_corrupt(&(spec_t){.schema = neither, .nschema = 1, .ntop = 1},
                   "neither a type nor num_children");
    expect_corrupt(&(spec_t){.schema = bad_type, .nschema = 1, .ntop = 1}, "unknown type 9");
    expect_corrupt(&(spec_t){.schema = no_rep, .nschema = 1, .ntop = 1},
                   "schema element \"x\" has no repetition_type");
    /* VECTOR (3), or whatever comes after it: not for dpp, but not corrupt */
    dpp_pq_meta_t m;
    char err[512];
    assert_int_equal(
        parse_built(&(spec_t){.schema = vector, .nschema = 1, .ntop = 1}, &m, err, sizeof err), 0);
    assert_int_equal(m.fields[0].shape, DPP_PQ_UNSUPPORTED);
    assert_string_equal(m.fields[0].why, "a field of repetition_type 3");
    dpp_pq_meta_free(&m);

    /* Fifty leaves under a group of a 4000-byte name: 200 kB of paths. */
    static char long_name[4001];
    elem_t wide[51];
    memset(long_name, 'n', 4000);
    wide[0] = (elem_t)GROUP(long_name, OPT, 50, -1, -1);
    for (int i = 1; i <= 50; i++)
        wide[i] = (elem_t)LEAF("x", 1, OPT);
    expect_corrupt(&(spec_t){.schema = wide, .nschema = 51, .ntop = 1},
                   "the column paths take more than");
    wide[0].nchildren = 10;
    assert_int_equal(
        parse_built(&(spec_t){.schema = wide, .nschema = 11, .ntop = 1}, &m, err, sizeof err), 0);
    assert_int_equal(strlen(m.columns[9].path), 4002);
    dpp_pq_meta_free(&m);

    tb_t b;
    memset(&b, 0, sizeof b);
    tb_i32(&b, 1, 1);
    tb_list(&b, 2, T_STRUCT, 0);
    tb_i64(&b, 3, 0);
    tb_list(&b, 4, T_STRUCT, 0);
    tb_stop(&b);
    assert_int_equal(dpp_pq_meta_parse(b.buf, b.len, FILE_SIZE, &m, err, sizeof err), DPP_ECORRUPT);
    assert_string_equal(err, "footer byte 2: the schema is empty");
    free(b.buf);

    for (int i = 0; i < 69; i++)
        deep[i] = (elem_t)GROUP("g", OPT, 1, -1, -1);
    deep[69] = (elem_t)LEAF("x", 1, OPT);
    expect_corrupt(&(spec_t){.schema = deep, .nschema = 70, .ntop = 1},
                   "the schema nests deeper than 64 levels");
    /* 62 groups and a leaf fit: levels up to 63 */
    spec_t ok = {.schema = deep + 7, .nschema = 63, .ntop = 1};
    assert_int_equal(parse_built(&ok, &m, err, sizeof err), 0);
    assert_int_equal(m.columns[0].max_def, 63);
    assert_int_equal(m.fields[0].shape, DPP_PQ_UNSUPPORTED);
    dpp_pq_meta_free(&m);
}

static void test_chunk_fields(void **state)
{
    dpp_pq_meta_t m;
    char err[512];
    (void)state;
    for (int extra = CHUNK_CRYPTO; extra <= CHUNK_ENCRYPTED_META; extra++) {
        assert_int_equal(parse_built(&(spec_t)FLAT_SPEC(.chunk0 = extra), &m, err, sizeof err), 0);
        assert_true(m.row_groups[0].chunks[0].encrypted);
        assert_false(m.row_groups[0].chunks[1].encrypted);
        dpp_pq_meta_free(&m);
    }
    /* Byte 0 is the magic: a dictionary there means none. */
    assert_int_equal(
        parse_built(&(spec_t)FLAT_SPEC(.chunk0 = CHUNK_DICT_ZERO), &m, err, sizeof err), 0);
    assert_int_equal(m.row_groups[0].chunks[0].dictionary_page_offset, -1);
    dpp_pq_meta_free(&m);
    expect_corrupt(&(spec_t)FLAT_SPEC(.chunk0 = CHUNK_FILE_PATH),
                   "row group 0 column 0 (\"a\"): its data lies in another file (file_path)");
}

static void test_bad_chunks(void **state)
{
    (void)state;
    expect_corrupt(&(spec_t)FLAT_SPEC(.dpo0 = 9999999),
                   ": row group 0 column 0 (\"a\"): data_page_offset 9999999 is past the end of "
                   "the file (65536 bytes)");
    expect_corrupt(&(spec_t)FLAT_SPEC(.dpo0 = 65500),
                   "data_page_offset 65500 lies in the footer, which starts at byte");
    expect_corrupt(&(spec_t)FLAT_SPEC(.dpo0 = 3), "data_page_offset 3 lies before the first page");
    expect_corrupt(&(spec_t)FLAT_SPEC(.dpo0 = -5), "data_page_offset -5 lies before");
    expect_corrupt(&(spec_t)FLAT_SPEC(.dict0 = 99999),
                   "dictionary_page_offset 99999 is past the end");
    expect_corrupt(&(spec_t)FLAT_SPEC(.total0 = 65500),
                   "65500 bytes from byte 4 run into the footer");
    expect_corrupt(&(spec_t)FLAT_SPEC(.total0 = INT64_MAX), "run into the footer");
    expect_corrupt(&(spec_t)FLAT_SPEC(.total0 = -1), "negative");
    expect_corrupt(&(spec_t)FLAT_SPEC(.oi0 = 60000, .oi_len0 = 9000), "offset index of 9000 bytes");
    expect_corrupt(&(spec_t)FLAT_SPEC(.oi0 = 60000, .oi_len0 = -1), "offset index of -1 bytes");
    expect_corrupt(&(spec_t)FLAT_SPEC(.oi0 = 1 << 20, .oi_len0 = 1), "offset_index_offset 1048576");
    expect_corrupt(&(spec_t)FLAT_SPEC(.wrong_type = 1), "has type INT96, the schema says INT64");
    expect_corrupt(&(spec_t)FLAT_SPEC(.chunks_delta = 1), "row group 0 has 3 column chunks for 2");
    expect_corrupt(&(spec_t)FLAT_SPEC(.chunks_delta = -1), "row group 0 has 1 column chunks for 2");
    expect_corrupt(&(spec_t)FLAT_SPEC(.num_rows = -1, .rg_rows = -1), "num_rows -1 is negative");
    expect_corrupt(&(spec_t)FLAT_SPEC(.num_rows = 0, .rg_rows = -1),
                   "row group 0: num_rows -1 is negative");
    expect_corrupt(&(spec_t)FLAT_SPEC(.num_rows = 21, .rg_rows = 10, .nrow_groups = 2),
                   "the row groups hold 20 rows, num_rows says 21");
    expect_corrupt(&(spec_t)FLAT_SPEC(.num_rows = 0, .rg_rows = INT64_MAX, .nrow_groups = 2),
                   "more than 2^63 rows");
}

static void deep_structs(tb_t *b)
{
    tb_field(b, T_STRUCT, 20);
    for (int i = 0; i < 10000; i++)
        tb_byte(b, 1 << 4 | T_STRUCT);
    for (int i = 0; i <= 10000; i++)
        tb_byte(b, 0);
}

static void deep_lists(tb_t *b)
{
    tb_field(b, T_LIST, 20);
    for (int i = 0; i < 10000; i++)
        tb_byte(b, 1 << 4 | T_LIST);
    tb_byte(b, 0);
}

static void nested_63(tb_t *b)
{
    /* structs down to depth 64 with FileMetaData's: the deepest allowed */
    tb_field(b, T_STRUCT, 20);
    for (int i = 0; i < 62; i++)
        tb_byte(b, 1 << 4 | T_STRUCT);
    for (int i = 0; i < 63; i++)
        tb_byte(b, 0);
}

static void nested_64(tb_t *b)
{
    tb_field(b, T_STRUCT, 20);
    for (int i = 0; i < 63; i++)
        tb_byte(b, 1 << 4 | T_STRUCT);
    for (int i = 0; i < 64; i++)
        tb_byte(b, 0);
}

static void huge_list(tb_t *b)
{
    tb_list(b, 20, T_I32, 1u << 31);
}

static void long_list(tb_t *b)
{
    tb_list(b, 20, T_I32, INT32_MAX);
}

static void huge_map(tb_t *b)
{
    tb_field(b, T_MAP, 20);
    tb_varint(b, 1u << 30);
    tb_byte(b, T_I32 << 4 | T_I32);
}

static void huge_binary(tb_t *b)
{
    tb_field(b, T_BINARY, 20);
    tb_varint(b, 1u << 30);
}

static void long_varint(tb_t *b)
{
    tb_field(b, T_I64, 20);
    for (int i = 0; i < 10; i++)
        tb_byte(b, 0xff);
    tb_byte(b, 1);
}

static void bad_type(tb_t *b)
{
    tb_byte(b, 0x1e); /* field type 14 */
}

static void twice(tb_t *b)
{
    tb_i32(b, 1, 1); /* version again */
}

static void field_id_overflow(tb_t *b)
{
    tb_byte(b, T_I32);
    tb_zigzag(b, INT16_MAX);
    tb_zigzag(b, 0);
    tb_byte(b, 1 << 4 | T_I32); /* id 32768 */
    tb_zigzag(b, 0);
}

static void test_hostile_thrift(void **state)
{
    static const struct {
        void (*field)(tb_t *);
        const char *want; /* NULL: parses */
    } cases[] = {
        {deep_structs, "structs nest deeper than 64"},
        {deep_lists, "values nest deeper than 64"},
        {nested_63, NULL},
        {nested_64, "structs nest deeper than 64"},
        {huge_list, "list of 2147483648 elements"},
        {long_list, "a list (a byte an element) runs past the end: 2147483647 bytes needed"},
        {huge_map, "a map (two bytes an entry) runs past the end"},
        {huge_binary, "a binary runs past the end: 1073741824 bytes needed"},
        {long_varint, "varint longer than 64 bits"},
        {bad_type, "field header 0x1e has no valid type"},
        {twice, "field 1 appears twice"},
        {field_id_overflow, "field id 32768 out of range"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[512] = "";
        dpp_pq_meta_t m;
        int rc = parse_built(&(spec_t)FLAT_SPEC(.tail = cases[i].field), &m, err, sizeof err);
        dpp_pq_meta_free(&m);
        if (cases[i].want == NULL ? rc != 0
                                  : rc != DPP_ECORRUPT || strstr(err, cases[i].want) == NULL)
            fail_msg("case %zu: rc %d, err \"%s\"", i, rc, err);
    }
}

static void test_meta_parse_args(void **state)
{
    tb_t b;
    dpp_pq_meta_t m;
    char err[512], tiny[4];
    spec_t s = FLAT_SPEC(.num_rows = 0);
    (void)state;
    build_footer(&b, &s);
    assert_int_equal(dpp_pq_meta_parse(b.buf, b.len, b.len + 11, &m, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "does not fit a file of"));
    /* The chunks (4 + 100 bytes) must end before the footer. */
    assert_int_equal(dpp_pq_meta_parse(b.buf, b.len, b.len + 12 + 199, &m, err, sizeof err),
                     DPP_ECORRUPT);
    assert_int_equal(dpp_pq_meta_parse(b.buf, b.len, b.len + 12 + 200, &m, NULL, 0), 0);
    dpp_pq_meta_free(&m);
    assert_int_equal(dpp_pq_meta_parse(b.buf, b.len / 2, FILE_SIZE, &m, tiny, sizeof tiny),
                     DPP_ECORRUPT);
    assert_int_equal(strlen(tiny), 3);
    free(b.buf);
}

/* ---- page headers ---- */

typedef struct page {
    int type;
    int32_t usize, csize, num_values, num_nulls, def_len, rep_len;
    int sub;     /* writes the type's header (else none) */
    int unknown; /* statistics and unknown fields */
    int compressed_false;
} page_t;

static void build_page(tb_t *b, const page_t *p)
{
    memset(b, 0, sizeof *b);
    tb_i32(b, 1, p->type);
    tb_i32(b, 2, p->usize);
    tb_i32(b, 3, p->csize);
    tb_i32(b, 4, -1); /* crc */
    if (p->unknown)
        tb_unknown_fields(b);
    if (p->sub && p->type == DPP_PQ_DATA_PAGE) {
        tb_struct(b, 5);
        tb_i32(b, 1, p->num_values);
        tb_i32(b, 2, DPP_PQ_RLE_DICTIONARY);
        tb_i32(b, 3, DPP_PQ_RLE);
        tb_i32(b, 4, DPP_PQ_BIT_PACKED);
        if (p->unknown) {
            tb_struct(b, 5); /* statistics */
            tb_str(b, 1, "max");
            tb_str(b, 2, "min");
            tb_i64(b, 3, 0);
            tb_stop(b);
        }
        tb_stop(b);
    } else if (p->sub && p->type == DPP_PQ_DICTIONARY_PAGE) {
        tb_struct(b, 7);
        tb_i32(b, 1, p->num_values);
        tb_i32(b, 2, DPP_PQ_PLAIN);
        tb_field(b, T_TRUE, 3);
        tb_stop(b);
    } else if (p->sub && p->type == DPP_PQ_DATA_PAGE_V2) {
        tb_struct(b, 8);
        tb_i32(b, 1, p->num_values);
        tb_i32(b, 2, p->num_nulls);
        tb_i32(b, 3, p->num_values);
        tb_i32(b, 4, DPP_PQ_DELTA_BINARY_PACKED);
        tb_i32(b, 5, p->def_len);
        tb_i32(b, 6, p->rep_len);
        if (p->compressed_false)
            tb_field(b, T_FALSE, 7);
        tb_stop(b);
    }
    tb_stop(b);
}

static int parse_page(const page_t *p, dpp_pq_page_header_t *h, char *err, size_t errlen)
{
    tb_t b;
    size_t used = 0;
    build_page(&b, p);
    tb_byte(&b, 0xaa); /* the page body follows */
    int rc = dpp_pq_page_header_parse(b.buf, b.len, h, &used, err, errlen);
    if (rc == 0)
        assert_int_equal(used, b.len - 1);
    for (size_t len = 0; rc == 0 && len < used; len++)
        assert_int_equal(dpp_pq_page_header_parse(b.buf, len, h, &used, err, errlen), -EAGAIN);
    if (rc == 0)
        assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, h, &used, err, errlen), 0);
    free(b.buf);
    return rc;
}

static void test_page_headers(void **state)
{
    dpp_pq_page_header_t h;
    char err[512];
    (void)state;
    for (int unknown = 0; unknown < 2; unknown++) {
        page_t v1 = {DPP_PQ_DATA_PAGE, 100, 60, .num_values = 7, .sub = 1, .unknown = unknown};
        assert_int_equal(parse_page(&v1, &h, err, sizeof err), 0);
        assert_int_equal(h.type, DPP_PQ_DATA_PAGE);
        assert_int_equal(h.uncompressed_size, 100);
        assert_int_equal(h.compressed_size, 60);
        assert_true(h.has_crc);
        assert_int_equal(h.crc, UINT32_MAX);
        assert_int_equal(h.num_values, 7);
        assert_int_equal(h.encoding, DPP_PQ_RLE_DICTIONARY);
        assert_int_equal(h.def_encoding, DPP_PQ_RLE);
        assert_int_equal(h.rep_encoding, DPP_PQ_BIT_PACKED);
    }
    page_t dict = {DPP_PQ_DICTIONARY_PAGE, 10, 10, .num_values = 3, .sub = 1};
    assert_int_equal(parse_page(&dict, &h, err, sizeof err), 0);
    assert_int_equal(h.type, DPP_PQ_DICTIONARY_PAGE);
    assert_int_equal(h.num_values, 3);
    assert_int_equal(h.encoding, DPP_PQ_PLAIN);

    page_t v2 = {DPP_PQ_DATA_PAGE_V2, 50, 40, 9, 2, 3, 4, .sub = 1};
    assert_int_equal(parse_page(&v2, &h, err, sizeof err), 0);
    assert_int_equal(h.num_values, 9);
    assert_int_equal(h.num_nulls, 2);
    assert_int_equal(h.num_rows, 9);
    assert_int_equal(h.encoding, DPP_PQ_DELTA_BINARY_PACKED);
    assert_int_equal(h.def_levels_len, 3);
    assert_int_equal(h.rep_levels_len, 4);
    assert_true(h.is_compressed);
    v2.compressed_false = 1;
    assert_int_equal(parse_page(&v2, &h, err, sizeof err), 0);
    assert_false(h.is_compressed);

    page_t index = {.type = DPP_PQ_INDEX_PAGE};
    assert_int_equal(parse_page(&index, &h, err, sizeof err), 0);

    static const struct {
        page_t page;
        const char *want;
    } bad[] = {
        {{DPP_PQ_DATA_PAGE, -1, 60, .num_values = 1, .sub = 1}, "uncompressed_page_size -1"},
        {{DPP_PQ_DATA_PAGE, 10, -60, .num_values = 1, .sub = 1}, "compressed_page_size -60"},
        {{DPP_PQ_DATA_PAGE, 10, INT32_MAX, .num_values = 1, .sub = 1}, "is outside 0..268435456"},
        {{DPP_PQ_DATA_PAGE, 10, 10, .num_values = -1, .sub = 1}, "num_values -1 is negative"},
        {{DPP_PQ_DATA_PAGE, 10, 10, .num_values = 1}, "lacks its header (field 5)"},
        {{.type = DPP_PQ_DICTIONARY_PAGE, .usize = 10, .csize = 10}, "lacks its header (field 7)"},
        {{.type = DPP_PQ_DATA_PAGE_V2, .usize = 10, .csize = 10}, "lacks its header (field 8)"},
        {{.type = 4, .usize = 10, .csize = 10}, "unknown page type 4"},
        {{.type = -1, .usize = 10, .csize = 10}, "unknown page type -1"},
        {{DPP_PQ_DATA_PAGE_V2, 50, 6, 9, 2, 3, 4, .sub = 1}, "level lengths 3 + 4"},
        {{DPP_PQ_DATA_PAGE_V2, 5, 60, 9, 2, 3, 4, .sub = 1}, "level lengths 3 + 4"},
        {{DPP_PQ_DATA_PAGE_V2, 50, 40, 9, 2, -3, 4, .sub = 1}, "level lengths -3 + 4"},
        {{DPP_PQ_DATA_PAGE_V2, 50, 40, 9, 10, 3, 4, .sub = 1}, "num_nulls 10"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        int rc = parse_page(&bad[i].page, &h, err, sizeof err);
        if (rc != DPP_ECORRUPT || strstr(err, bad[i].want) == NULL ||
            strncmp(err, "page header byte ", 17) != 0)
            fail_msg("case %zu: rc %d, err \"%s\"", i, rc, err);
    }
}

/* Page headers that end early wait for more bytes, unless what they claim
 * could never fit the header limit. */
static void test_page_header_claims(void **state)
{
    dpp_pq_page_header_t h;
    size_t used;
    char err[512];
    tb_t b;
    (void)state;
    memset(&b, 0, sizeof b);
    tb_i32(&b, 1, DPP_PQ_DATA_PAGE);
    tb_field(&b, T_BINARY, 20);
    tb_varint(&b, 1000); /* 1000 bytes of which none are there yet */
    assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, &h, &used, err, sizeof err), -EAGAIN);
    b.len -= 2;
    tb_varint(&b, (uint64_t)DPP_PQ_MAX_FOOTER + 1);
    assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, &h, &used, err, sizeof err),
                     DPP_ECORRUPT);
    free(b.buf);

    memset(&b, 0, sizeof b);
    tb_i32(&b, 1, DPP_PQ_DATA_PAGE);
    tb_str(&b, 2, "size as a string");
    assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, &h, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "page header byte 2: field 2 has type binary, expected i32"));
    b.len = 2;
    b.last[0] = 1;
    tb_field(&b, T_I32, 2);
    tb_varint(&b, (uint64_t)1 << 33);
    assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, &h, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "page header byte 3: varint 8589934592 does not fit an i32"));
    free(b.buf);

    memset(&b, 0, sizeof b);
    tb_list(&b, 20, T_I64, INT32_MAX);
    assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, &h, &used, err, sizeof err),
                     DPP_ECORRUPT);
    free(b.buf);

    memset(&b, 0, sizeof b);
    deep_structs(&b);
    assert_int_equal(dpp_pq_page_header_parse(b.buf, b.len, &h, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "nest deeper"));
    assert_int_equal(dpp_pq_page_header_parse(b.buf, 70, &h, &used, err, sizeof err), DPP_ECORRUPT);
    free(b.buf);
}

/* ---- offset indexes ---- */

static void build_offset_index(tb_t *b, const int64_t (*locs)[3], size_t n)
{
    memset(b, 0, sizeof *b);
    tb_list(b, 1, T_STRUCT, n);
    for (size_t i = 0; i < n; i++) {
        tb_open(b);
        tb_i64(b, 1, locs[i][0]);
        tb_i32(b, 2, (int32_t)locs[i][1]);
        tb_i64(b, 3, locs[i][2]);
        tb_stop(b);
    }
    tb_list(b, 2, T_I64, 2);
    tb_zigzag(b, 5);
    tb_zigzag(b, 6);
    tb_stop(b);
}

static int parse_index(const int64_t (*locs)[3], size_t n, char *err, size_t errlen)
{
    tb_t b;
    dpp_pq_page_loc_t *out = NULL;
    size_t nout = 7;
    build_offset_index(&b, locs, n);
    int rc = dpp_pq_offset_index_parse(b.buf, b.len, &out, &nout, err, errlen);
    if (rc == 0) {
        assert_int_equal(nout, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(out[i].offset, locs[i][0]);
            assert_int_equal(out[i].compressed_page_size, locs[i][1]);
            assert_int_equal(out[i].first_row_index, locs[i][2]);
        }
    } else {
        assert_null(out);
        assert_int_equal(nout, 0);
    }
    for (size_t len = 0; len < b.len; len++) {
        dpp_pq_page_loc_t *cut;
        size_t ncut;
        assert_int_equal(dpp_pq_offset_index_parse(b.buf, len, &cut, &ncut, NULL, 0), DPP_ECORRUPT);
    }
    free(out);
    free(b.buf);
    return rc;
}

static void test_offset_index(void **state)
{
    static const int64_t good[][3] = {{4, 100, 0}, {104, 50, 10}, {200, 1, 11}};
    static const int64_t overlap[][3] = {{4, 100, 0}, {103, 50, 10}};
    static const int64_t same_row[][3] = {{4, 100, 0}, {104, 50, 0}};
    static const int64_t late_start[][3] = {{4, 100, 3}};
    static const int64_t empty_page[][3] = {{4, 0, 0}};
    char err[512];
    (void)state;
    assert_int_equal(parse_index(good, 3, err, sizeof err), 0);
    assert_int_equal(parse_index(good, 0, err, sizeof err), 0);
    assert_int_equal(parse_index(overlap, 2, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "page 1 (byte 103, row 10) does not follow page 0"));
    assert_int_equal(parse_index(same_row, 2, err, sizeof err), DPP_ECORRUPT);
    assert_int_equal(parse_index(late_start, 1, err, sizeof err), DPP_ECORRUPT);
    assert_non_null(strstr(err, "the first page starts at row 3"));
    assert_int_equal(parse_index(empty_page, 1, err, sizeof err), DPP_ECORRUPT);

    tb_t b;
    dpp_pq_page_loc_t *out;
    size_t n;
    memset(&b, 0, sizeof b);
    tb_list(&b, 1, T_STRUCT, 1u << 31);
    assert_int_equal(dpp_pq_offset_index_parse(b.buf, b.len, &out, &n, err, sizeof err),
                     DPP_ECORRUPT);
    b.len = 0;
    tb_list(&b, 1, T_STRUCT, 3); /* needs 21 bytes at least, has 3 */
    tb_byte(&b, 0);
    tb_byte(&b, 0);
    tb_byte(&b, 0);
    assert_int_equal(dpp_pq_offset_index_parse(b.buf, b.len, &out, &n, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "3 page locations cannot fit in 3 bytes"));
    b.len = 0;
    tb_byte(&b, 0);
    assert_int_equal(dpp_pq_offset_index_parse(b.buf, b.len, &out, &n, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "lacks its page_locations"));
    free(b.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conformance_counts), cmocka_unit_test(test_conformance_shapes),
        cmocka_unit_test(test_conformance_pages),  cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_footer_locate),      cmocka_unit_test(test_flat_and_unknown_fields),
        cmocka_unit_test(test_list_forms),         cmocka_unit_test(test_bad_schemas),
        cmocka_unit_test(test_chunk_fields),       cmocka_unit_test(test_bad_chunks),
        cmocka_unit_test(test_hostile_thrift),     cmocka_unit_test(test_meta_parse_args),
        cmocka_unit_test(test_page_headers),       cmocka_unit_test(test_page_header_claims),
        cmocka_unit_test(test_offset_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
