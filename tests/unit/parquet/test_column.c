/* SPDX-License-Identifier: Apache-2.0 */
/* The Parquet file and column reader (src/parquet/column.c) on real files
 * and on damaged copies of them. Good files are read through the column API
 * and held against DuckDB's statistics (tests/data/<dir>/expected.jsonl,
 * as tests/parquet/compare.py reads them). Damaged copies — cut at every
 * length, footer lengths that lie, wrong magic, a bit flipped in every
 * byte, pages made by hand with sizes, counts and indices that lie — must
 * each end in an error code with a sentence naming the file (and, for a
 * page, the column and an offset), never in a crash, and the error must
 * stick. Last, skipping rows (by page headers and by offset indexes) must
 * give the rows that reading gives. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "dpp/error.h"
#include "parquet/column.h"
#include "test_tmpdir.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
/* The sanitizer runtime's (sanitizer/allocator_interface.h, which not
 * every compiler installs). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define PT_DIR DPP_SOURCE_DIR "/tests/data/parquet-testing/"
#define DUCK_DIR DPP_SOURCE_DIR "/tests/data/parquet-duckdb/"

static char tmpdir[PATH_MAX];

/* Bytes the process has allocated now (ASan builds; 0 otherwise). */
static size_t heap_now(void)
{
#ifdef HAVE_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    return 0;
#endif
}

/* ---- files as bytes ---- */

typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
} bytes_t;

static void b_put(bytes_t *b, const void *p, size_t n)
{
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void b_byte(bytes_t *b, uint8_t v)
{
    b_put(b, &v, 1);
}

static void b_le32(bytes_t *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    b_put(b, x, 4);
}

static void b_le64(bytes_t *b, uint64_t v)
{
    b_le32(b, (uint32_t)v);
    b_le32(b, (uint32_t)(v >> 32));
}

static void b_uleb(bytes_t *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        b_byte(b, (uint8_t)(v | 0x80));
    b_byte(b, (uint8_t)v);
}

static bytes_t slurp(const char *path)
{
    bytes_t b = {0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        b_put(&b, chunk, n);
    fclose(f);
    return b;
}

static void spill(const char *path, const uint8_t *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static uint32_t le32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void set_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---- reading every row of every field ---- */

typedef struct stats {
    uint64_t nulls, empty, values;
    double sum;
    uint64_t hash;
    int list;
} stats_t;

static uint64_t fnv1a(const uint8_t *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Adds one row's slot to st, as tests/parquet/pqstat.c counts. */
static void add_slot(stats_t *st, const uint8_t *slot, size_t len)
{
    dpp_feat_ref_t r;
    assert_int_equal(dpp_pq_row_decode(slot, len, 1, &r), 0);
    if (r.kind == DPP_FEAT_ABSENT) {
        st->nulls++;
        return;
    }
    size_t n = 0;
    if (r.kind == DPP_FEAT_BYTES) {
        const uint8_t *s;
        size_t pos = 0, l;
        while (dpp_feat_bytes_next(&r, &pos, &s, &l) == 1) {
            st->hash += fnv1a(s, l);
            n++;
        }
    } else if (r.kind == DPP_FEAT_FLOAT) {
        n = r.list_len / 4;
        for (size_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, r.list + 4 * i, 4);
            st->sum += v;
        }
    } else {
        assert_int_equal(r.kind, DPP_FEAT_INT64);
        n = r.list_len / 8;
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, r.list + 8 * i, 8);
            st->sum += (double)v;
        }
    }
    if (st->list && n == 0)
        st->empty++;
    st->values += n;
}

/* An error from the reader: a code dpp documents and a sentence that names
 * the file; one from a page also names the column and an offset. */
static void check_error(int rc, const char *err, const char *name, const char *column)
{
    if (!(rc == DPP_ECORRUPT || rc == DPP_ETYPE))
        fail_msg("rc %d (%s): %s", rc, dpp_err_name(rc), err);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "file %s:", name);
    if (strstr(err, want) == NULL)
        fail_msg("the error does not name the file %s: %s", name, err);
    if (column != NULL) {
        snprintf(want, sizeof want, "column \"%s\"", column);
        if (strstr(err, want) == NULL || strstr(err, "offset") == NULL)
            fail_msg("the error does not name column %s and an offset: %s", column, err);
    }
}

/* Reads every row of field in every row group as a caller does, into st
 * (may be NULL). Returns 0 or the field's first error (checked, and checked
 * to repeat), its text in err. Each row read must come from a page of its
 * chunk (the offset dpp_pq_col_read reports). */
static int read_field(dpp_pq_file_t *f, const dpp_pq_field_t *field, dpp_pq_dctx_t *dctx,
                      stats_t *st, char *err, size_t errlen)
{
    dpp_pq_buf_t b = {0};
    int rc = 0;
    for (uint32_t g = 0; g < f->meta.nrow_groups && rc == 0; g++) {
        dpp_pq_col_t *c;
        assert_int_equal(dpp_pq_col_open(&c, f, g, field, dctx), 0);
        const dpp_pq_chunk_t *k = &f->meta.row_groups[g].chunks[field->column];
        for (int64_t r = 0; r < f->meta.row_groups[g].num_rows && rc == 0; r++) {
            b.len = 0;
            uint64_t off = UINT64_MAX;
            rc = dpp_pq_col_read(c, &b, &off, err, errlen);
            if (rc == 0) {
                int64_t start =
                    k->dictionary_page_offset > 0 && k->dictionary_page_offset < k->data_page_offset
                        ? k->dictionary_page_offset
                        : k->data_page_offset;
                assert_true(off >= (uint64_t)start &&
                            off < (uint64_t)start + (uint64_t)k->total_compressed_size);
                if (st)
                    add_slot(st, b.data, b.len);
            }
        }
        if (rc) {
            check_error(rc, err, f->name, field->name);
            /* The column is done: every later call fails the same way. */
            char again[512];
            for (int i = 0; i < 2; i++) {
                b.len = 0;
                assert_int_equal(dpp_pq_col_read(c, &b, NULL, again, sizeof again), rc);
                assert_string_equal(again, err);
                assert_int_equal(b.len, 0);
            }
            assert_int_equal(dpp_pq_col_skip(c, 1, again, sizeof again), rc);
            assert_string_equal(again, err);
        }
        dpp_pq_col_free(c);
    }
    dpp_pq_buf_free(&b);
    return rc;
}

typedef struct outcome {
    int open_rc;   /* of dpp_pq_file_open */
    int read_rc;   /* the first error of a field */
    char err[512]; /* the first error's text */
} outcome_t;

/* Opens path as `name` and reads every field that dpp_pq_field_check
 * passes, each up to its first error. st, when not NULL, gets a field's
 * statistics at the field's index (fields refused by the check are left
 * unchecked). */
static outcome_t read_file(const char *path, const char *name, stats_t *st, size_t nst)
{
    outcome_t o = {0};
    dpp_pq_file_t f;
    dpp_pq_dctx_t dctx = {0};
    o.open_rc = dpp_pq_file_open(&f, path, name, o.err, sizeof o.err);
    if (o.open_rc != 0) {
        if (o.open_rc != DPP_ECORRUPT)
            fail_msg("open: rc %d: %s", o.open_rc, o.err);
        check_error(o.open_rc, o.err, name, NULL);
        dpp_pq_file_close(&f);
        return o;
    }
    for (uint32_t i = 0; i < f.meta.nfields; i++) {
        const dpp_pq_field_t *field = &f.meta.fields[i];
        char err[512];
        int rc = dpp_pq_field_check(&f, field, err, sizeof err);
        if (rc != 0) {
            assert_int_equal(rc, DPP_ETYPE);
            char want[256];
            snprintf(want, sizeof want, "column \"%s\"", field->name);
            assert_non_null(strstr(err, want));
            check_error(rc, err, name, NULL);
            continue;
        }
        stats_t *fs = st && i < nst ? &st[i] : NULL;
        if (fs) {
            memset(fs, 0, sizeof *fs);
            fs->list = field->shape == DPP_PQ_LIST;
        }
        rc = read_field(&f, field, &dctx, fs, err, sizeof err);
        if (rc != 0 && o.read_rc == 0) {
            o.read_rc = rc;
            snprintf(o.err, sizeof o.err, "%s", err);
        }
    }
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
    return o;
}

/* ---- DuckDB's statistics (expected.jsonl) ---- */

/* The value of "key": in the JSON object text obj, or NULL. */
static const char *json_key(const char *obj, const char *key)
{
    char want[64];
    snprintf(want, sizeof want, "\"%s\":", key);
    const char *p = strstr(obj, want);
    return p ? p + strlen(want) : NULL;
}

/* Holds what read_file gave for file (in dir) against DuckDB's line. */
static void check_duckdb_stats(const char *dir, const char *file)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%sexpected.jsonl", dir);
    bytes_t all = slurp(path);
    b_byte(&all, 0);
    char key[256];
    snprintf(key, sizeof key, "{\"file\":\"%s\"", file);
    const char *line = strstr((const char *)all.p, key);
    assert_non_null(line);
    const char *eol = strchr(line, '\n');
    size_t line_len = eol ? (size_t)(eol - line) : strlen(line);

    snprintf(path, sizeof path, "%s%s", dir, file);
    dpp_pq_file_t f;
    char err[512];
    assert_int_equal(dpp_pq_file_open(&f, path, file, err, sizeof err), 0);
    const char *rows = json_key(line, "rows");
    assert_non_null(rows);
    assert_int_equal(f.meta.num_rows, strtoll(rows, NULL, 10));

    uint32_t checked = 0;
    dpp_pq_dctx_t dctx = {0};
    for (uint32_t i = 0; i < f.meta.nfields; i++) {
        const dpp_pq_field_t *field = &f.meta.fields[i];
        snprintf(key, sizeof key, "\"%s\":{", field->name);
        const char *at = strstr(line, key);
        assert_true(at != NULL && at < line + line_len);
        at += strlen(key) - 1;
        const char *close = strchr(at, '}');
        char obj[1024];
        snprintf(obj, sizeof obj, "%.*s", (int)(close - at + 1), at);
        int rc = dpp_pq_field_check(&f, field, err, sizeof err);
        if (json_key(obj, "unsupported")) {
            assert_int_equal(rc, DPP_ETYPE);
            check_error(rc, err, file, NULL);
            continue;
        }
        assert_int_equal(rc, 0);
        stats_t st = {.list = field->shape == DPP_PQ_LIST};
        if ((rc = read_field(&f, field, &dctx, &st, err, sizeof err)) != 0)
            fail_msg("%s: %s", file, err);
        const char *v;
        assert_non_null(v = json_key(obj, "nulls"));
        assert_int_equal(st.nulls, strtoull(v, NULL, 10));
        assert_non_null(v = json_key(obj, "values"));
        assert_int_equal(st.values, strtoull(v, NULL, 10));
        if ((v = json_key(obj, "empty")) != NULL)
            assert_int_equal(st.empty, strtoull(v, NULL, 10));
        if ((v = json_key(obj, "hash")) != NULL) {
            assert_int_equal(st.hash, strtoull(v + 1, NULL, 10));
        } else {
            assert_non_null(v = json_key(obj, "sum"));
            double want = strtod(v, NULL);
            /* compare.py's tolerance: dpp hands doubles over as float32 */
            if (fabs(st.sum - want) > fmax(1e-3, 1e-5 * fmax(fabs(st.sum), fabs(want))))
                fail_msg("%s column %s: sum %.17g, DuckDB %.17g", file, field->name, st.sum, want);
        }
        checked++;
    }
    assert_true(checked > 0);
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
    free(all.p);
}

static void test_against_duckdb(void **state)
{
    (void)state;
    static const char *const testing[] = {
        "alltypes_plain.parquet",        "alltypes_dictionary.parquet",
        "list_columns.parquet",          "repeated_primitive_no_list.parquet",
        "int32_with_null_pages.parquet", "datapage_v1-snappy-compressed-checksum.parquet",
        "datapage_v2.snappy.parquet",    "byte_stream_split.zstd.parquet",
    };
    for (size_t i = 0; i < sizeof testing / sizeof *testing; i++)
        check_duckdb_stats(PT_DIR, testing[i]);
    static const char *const duck[] = {"criteo_zstd_v2.parquet", "criteo_snappy_v1.parquet",
                                       "criteo_brotli_v2.parquet"};
    for (size_t i = 0; i < sizeof duck / sizeof *duck; i++)
        check_duckdb_stats(DUCK_DIR, duck[i]);
}

/* ---- damaged copies of real files ---- */

/* Where the footer starts in a good file's bytes. */
static size_t data_end_of(const bytes_t *b)
{
    assert_true(b->len >= 12);
    return b->len - 8 - le32_at(b->p + b->len - 8);
}

/* The path of tmpdir/name, in a static buffer. */
static const char *tmp_path(const char *name)
{
    static char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* Reads all of the copy tmpdir/name; the outcome must be a checked error
 * or a full read. */
static outcome_t read_tmp(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s", tmp_path(name));
    return read_file(path, name, NULL, 0);
}

/* Writes bytes as the copy tmpdir/name and reads it all. */
static outcome_t read_copy(const uint8_t *p, size_t len, const char *name)
{
    spill(tmp_path(name), p, len);
    return read_tmp(name);
}

/* Overwrites bytes [off, off + n) of the copy tmpdir/name in place (the
 * damage tests change a byte or four at a time). */
static void poke(const char *name, size_t off, const void *p, size_t n)
{
    int fd = open(tmp_path(name), O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
    assert_int_equal(close(fd), 0);
}

static void test_truncated(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        size_t stride;
    } files[] = {
        {PT_DIR "alltypes_plain.parquet", 1},
        {PT_DIR "list_columns.parquet", 1},
        {PT_DIR "datapage_v1-snappy-compressed-checksum.parquet", 3},
        {PT_DIR "rle_boolean_encoding.parquet", 1},
        {DUCK_DIR "criteo_snappy_v1.parquet", 1999},
        {DUCK_DIR "criteo_gzip_v2.parquet", 3001},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        bytes_t b = slurp(files[i].path);
        size_t data_end = data_end_of(&b), stride = files[i].stride;
        uint8_t *copy = malloc(b.len);
        assert_non_null(copy);
        /* Cut at len: the footer's length and magic are gone. */
        spill(tmp_path("cut.parquet"), b.p, b.len);
        for (size_t len = b.len - 1; len < b.len; len -= stride) {
            assert_int_equal(truncate(tmp_path("cut.parquet"), (off_t)len), 0);
            outcome_t o = read_tmp("cut.parquet");
            assert_int_equal(o.open_rc, DPP_ECORRUPT);
        }
        /* The data lost from len on (zeros), the footer in place: the pages
         * themselves are cut. (Zeros can be good values: only the footer
         * must still open.) */
        spill(tmp_path("zeroed.parquet"), b.p, b.len);
        static const uint8_t zeros[4096];
        for (size_t len = data_end; len > stride;) {
            len -= stride;
            poke("zeroed.parquet", len, zeros, stride);
            outcome_t o = read_tmp("zeroed.parquet");
            assert_int_equal(o.open_rc, 0);
        }
        /* The data cut at len but the footer kept: chunks now run into the
         * footer or past the file. */
        for (size_t len = 0; len < data_end; len += 3 * stride) {
            memcpy(copy, b.p, len);
            memcpy(copy + len, b.p + data_end, b.len - data_end);
            read_copy(copy, len + (b.len - data_end), "cut-data.parquet");
        }
        free(copy);
        free(b.p);
    }

    /* The file cut after it was opened: the pages are no longer there. */
    bytes_t b = slurp(PT_DIR "int32_with_null_pages.parquet");
    spill(tmp_path("shrinks.parquet"), b.p, b.len);
    dpp_pq_file_t f;
    char err[512];
    assert_int_equal(
        dpp_pq_file_open(&f, tmp_path("shrinks.parquet"), "shrinks.parquet", err, sizeof err), 0);
    assert_int_equal(truncate(tmp_path("shrinks.parquet"), 1000), 0);
    dpp_pq_dctx_t dctx = {0};
    int rc = read_field(&f, &f.meta.fields[0], &dctx, NULL, err, sizeof err);
    assert_int_equal(rc, DPP_ECORRUPT);
    assert_non_null(strstr(err, "shorter than its footer says"));
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
    free(b.p);
}

static void test_footer_lies(void **state)
{
    (void)state;
    static const char *const files[] = {PT_DIR "alltypes_plain.parquet",
                                        PT_DIR "list_columns.parquet",
                                        PT_DIR "int32_with_null_pages.parquet"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        bytes_t b = slurp(files[i]);
        uint8_t *len_at = b.p + b.len - 8;
        uint32_t flen = le32_at(len_at);
        spill(tmp_path("footer-len.parquet"), b.p, b.len);
        /* Bigger than the file, and every length that points into the data
         * or into the middle of the footer. */
        const uint32_t huge[] = {UINT32_MAX, 0x80000000u, (uint32_t)b.len, (uint32_t)b.len - 11};
        for (size_t k = 0; k < sizeof huge / sizeof *huge; k++) {
            set_le32(len_at, huge[k]);
            poke("footer-len.parquet", b.len - 8, len_at, 4);
            outcome_t o = read_tmp("footer-len.parquet");
            assert_int_equal(o.open_rc, DPP_ECORRUPT);
            assert_non_null(strstr(o.err, "footer length"));
        }
        for (uint32_t len = 0; len <= b.len - 12; len++) {
            if (len == flen)
                continue;
            set_le32(len_at, len);
            poke("footer-len.parquet", b.len - 8, len_at, 4);
            outcome_t o = read_tmp("footer-len.parquet");
            assert_true(o.open_rc == DPP_ECORRUPT);
            /* Refused by the footer's parser: it says where. */
            assert_non_null(strstr(o.err, "offset"));
        }
        set_le32(len_at, flen);
        outcome_t o = read_copy(b.p, b.len, "good.parquet");
        assert_int_equal(o.open_rc, 0);
        assert_int_equal(o.read_rc, 0);
        free(b.p);
    }
}

static void test_magic(void **state)
{
    (void)state;
    bytes_t b = slurp(PT_DIR "alltypes_plain.parquet");
    uint8_t *magic = b.p + b.len - 4;
    static const struct {
        const char *magic, *says;
    } cases[] = {
        {"PARE", "encrypted"},
        {"PAR2", "not a Parquet file"},
        {"par1", "not a Parquet file"},
        {"\0\0\0\0", "not a Parquet file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(magic, cases[i].magic, 4);
        outcome_t o = read_copy(b.p, b.len, "magic.parquet");
        assert_int_equal(o.open_rc, DPP_ECORRUPT);
        assert_non_null(strstr(o.err, cases[i].says));
    }
    /* Files too short to hold a footer at all. */
    for (size_t len = 0; len < 12; len++) {
        outcome_t o = read_copy((const uint8_t *)"PAR1PAR1PAR1", len, "short.parquet");
        assert_int_equal(o.open_rc, DPP_ECORRUPT);
    }
    outcome_t o = read_copy((const uint8_t *)"PAR1\0\0\0\0PAR1", 12, "empty-footer.parquet");
    assert_int_equal(o.open_rc, DPP_ECORRUPT);
    assert_non_null(strstr(o.err, "offset"));
    free(b.p);

    /* A file that is not there: -errno, named. */
    dpp_pq_file_t f;
    char err[512], path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/missing.parquet", tmpdir);
    assert_int_equal(dpp_pq_file_open(&f, path, "missing.parquet", err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "file missing.parquet:"));
    dpp_pq_file_close(&f);
    assert_int_equal(dpp_pq_file_open(&f, tmpdir, "a-directory", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "file a-directory:"));
    dpp_pq_file_close(&f);
}

/* Flips one bit in every stride-th byte of [from, to) of a copy of path and
 * reads the copy each time. Returns how many copies read without an error. */
static size_t flip_each(const char *path, size_t from, size_t to, size_t stride)
{
    bytes_t b = slurp(path);
    if (to > b.len)
        to = b.len;
    size_t clean = 0;
    spill(tmp_path("flipped.parquet"), b.p, b.len);
    for (size_t i = from; i < to; i += stride) {
        uint8_t flipped = b.p[i] ^ (uint8_t)(1u << (i % 8));
        poke("flipped.parquet", i, &flipped, 1);
        outcome_t o = read_tmp("flipped.parquet");
        clean += o.open_rc == 0 && o.read_rc == 0;
        poke("flipped.parquet", i, &b.p[i], 1);
    }
    free(b.p);
    return clean;
}

static void test_bit_flips(void **state)
{
    (void)state;
    /* The whole file, footer included, of a small one; the data pages of
     * others (each codec, list columns, v2 pages, dictionary pages). */
    flip_each(PT_DIR "alltypes_plain.parquet", 0, SIZE_MAX, 1);
    static const char *const files[] = {
        PT_DIR "list_columns.parquet",
        PT_DIR "datapage_v2.snappy.parquet",
        PT_DIR "alltypes_dictionary.parquet",
        PT_DIR "repeated_primitive_no_list.parquet",
        PT_DIR "hadoop_lz4_compressed.parquet",
        PT_DIR "lz4_raw_compressed.parquet",
        PT_DIR "rle_boolean_encoding.parquet",
        PT_DIR "byte_stream_split.zstd.parquet",
        PT_DIR "delta_length_byte_array.parquet",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        bytes_t b = slurp(files[i]);
        size_t end = data_end_of(&b);
        free(b.p);
        flip_each(files[i], 4, end, 1);
    }
}

/* For a file whose pages carry CRCs: a bit flipped anywhere in a page's
 * stored bytes must give a CRC error in that page's column, at that page. */
static void check_crc_flips(const char *path, size_t stride)
{
    dpp_pq_dctx_t dctx = {0};
    bytes_t b = slurp(path);
    char err[512];
    dpp_pq_file_t f;
    assert_int_equal(dpp_pq_file_open(&f, path, "crc.parquet", err, sizeof err), 0);
    char copy_path[PATH_MAX + 64];
    snprintf(copy_path, sizeof copy_path, "%s", tmp_path("crc-flipped.parquet"));
    spill(copy_path, b.p, b.len);
    size_t pages = 0;
    for (uint32_t g = 0; g < f.meta.nrow_groups; g++) {
        for (uint32_t fi = 0; fi < f.meta.nfields; fi++) {
            const dpp_pq_field_t *field = &f.meta.fields[fi];
            const dpp_pq_chunk_t *k = &f.meta.row_groups[g].chunks[field->column];
            uint64_t pos = (uint64_t)(k->dictionary_page_offset > 0 &&
                                              k->dictionary_page_offset < k->data_page_offset
                                          ? k->dictionary_page_offset
                                          : k->data_page_offset);
            uint64_t end = pos + (uint64_t)k->total_compressed_size;
            while (pos < end) {
                dpp_pq_page_header_t h;
                size_t hlen;
                assert_int_equal(
                    dpp_pq_page_header_parse(b.p + pos, b.len - pos, &h, &hlen, err, sizeof err),
                    0);
                assert_true(h.has_crc);
                uint64_t body = pos + hlen;
                for (uint64_t i = body; i < body + (uint64_t)h.compressed_size; i += stride) {
                    uint8_t flipped = b.p[i] ^ (uint8_t)(1u << (i % 8));
                    poke("crc-flipped.parquet", i, &flipped, 1);
                    dpp_pq_file_t d;
                    assert_int_equal(
                        dpp_pq_file_open(&d, copy_path, "crc-flipped.parquet", err, sizeof err), 0);
                    int rc = read_field(&d, &d.meta.fields[fi], &dctx, NULL, err, sizeof err);
                    if (rc != DPP_ECORRUPT || strstr(err, "CRC") == NULL)
                        fail_msg("byte %" PRIu64 " flipped: rc %d, %s", i, rc, err);
                    char at[64];
                    snprintf(at, sizeof at, "page at offset %" PRIu64 ":", pos);
                    assert_non_null(strstr(err, at));
                    dpp_pq_file_close(&d);
                    poke("crc-flipped.parquet", i, &b.p[i], 1);
                }
                pages++;
                pos = body + (uint64_t)h.compressed_size;
            }
        }
    }
    assert_true(pages > 1);
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
    free(b.p);
}

/* ---- files made here: a compact-protocol writer and pages by hand ---- */

enum {
    CT_TRUE = 1,
    CT_FALSE = 2,
    CT_I32 = 5,
    CT_I64 = 6,
    CT_BINARY = 8,
    CT_LIST = 9,
    CT_STRUCT = 12
};

typedef struct tw {
    bytes_t *b;
    int16_t last[16]; /* previous field id of each open struct */
    int depth;
} tw_t;

static void tw_field(tw_t *w, uint8_t type, int16_t id)
{
    int delta = id - w->last[w->depth];
    if (delta > 0 && delta <= 15) {
        b_byte(w->b, (uint8_t)(delta << 4 | type));
    } else {
        b_byte(w->b, type);
        b_uleb(w->b, (uint64_t)(((uint32_t)id << 1) ^ (uint32_t)(id >> 15)));
    }
    w->last[w->depth] = id;
}

static void tw_zigzag(tw_t *w, int64_t v)
{
    b_uleb(w->b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void tw_i32(tw_t *w, int16_t id, int32_t v)
{
    tw_field(w, CT_I32, id);
    tw_zigzag(w, v);
}

static void tw_i64(tw_t *w, int16_t id, int64_t v)
{
    tw_field(w, CT_I64, id);
    tw_zigzag(w, v);
}

static void tw_str(tw_t *w, const char *s)
{
    b_uleb(w->b, strlen(s));
    b_put(w->b, s, strlen(s));
}

static void tw_field_str(tw_t *w, int16_t id, const char *s)
{
    tw_field(w, CT_BINARY, id);
    tw_str(w, s);
}

static void tw_list(tw_t *w, int16_t id, uint8_t elem, uint32_t n)
{
    tw_field(w, CT_LIST, id);
    if (n < 15) {
        b_byte(w->b, (uint8_t)(n << 4 | elem));
    } else {
        b_byte(w->b, (uint8_t)(0xf0 | elem));
        b_uleb(w->b, n);
    }
}

/* Opens a struct: a field of the current one (id > 0) or a list element. */
static void tw_begin(tw_t *w, int16_t id)
{
    if (id > 0)
        tw_field(w, CT_STRUCT, id);
    w->last[++w->depth] = 0;
}

static void tw_end(tw_t *w)
{
    b_byte(w->b, 0);
    w->depth--;
}

/* The column of a made file: one top-level field of INT64 values. */
typedef enum syn_shape {
    SYN_REQUIRED, /* "v", required: max_def 0 */
    SYN_OPTIONAL, /* "v", optional: max_def 1 */
    SYN_LIST,     /* "l", optional LIST of optional elements: max_def 3, max_rep 1 */
} syn_shape_t;

/* A page header as written; sizes of -1 are the body's length. */
typedef struct page_hdr {
    dpp_pq_page_type_t type;
    int32_t uncompressed, compressed;
    int32_t num_values;
    dpp_pq_encoding_t encoding;
    int32_t num_nulls, num_rows, def_len, rep_len; /* v2 */
    int crc;                                       /* write the body's CRC */
} page_hdr_t;

#define SYN_MAX_PAGES 256

typedef struct syn {
    bytes_t file;
    syn_shape_t shape;
    int64_t dict_off, data_off; /* -1: none yet */
    size_t npages;
    int64_t page_off[SYN_MAX_PAGES], first_row[SYN_MAX_PAGES];
    int32_t page_size[SYN_MAX_PAGES];
} syn_t;

static void syn_begin(syn_t *s, syn_shape_t shape)
{
    memset(s, 0, sizeof *s);
    s->shape = shape;
    s->dict_off = s->data_off = -1;
    b_put(&s->file, "PAR1", 4);
}

/* Appends a page: its header, then body[0..len). first_row: the row its
 * data starts at (offset index). */
static void syn_page(syn_t *s, const page_hdr_t *h, const void *body, size_t len, int64_t first_row)
{
    int64_t at = (int64_t)s->file.len;
    tw_t w = {.b = &s->file};
    tw_begin(&w, 0);
    tw_i32(&w, 1, (int32_t)h->type);
    tw_i32(&w, 2, h->uncompressed >= 0 ? h->uncompressed : (int32_t)len);
    tw_i32(&w, 3, h->compressed >= 0 ? h->compressed : (int32_t)len);
    if (h->crc)
        tw_i32(&w, 4, (int32_t)crc32(0, body, (uInt)len));
    if (h->type == DPP_PQ_DICTIONARY_PAGE) {
        tw_begin(&w, 7);
        tw_i32(&w, 1, h->num_values);
        tw_i32(&w, 2, (int32_t)h->encoding);
        tw_end(&w);
        if (s->dict_off < 0)
            s->dict_off = at;
    } else if (h->type == DPP_PQ_DATA_PAGE) {
        tw_begin(&w, 5);
        tw_i32(&w, 1, h->num_values);
        tw_i32(&w, 2, (int32_t)h->encoding);
        tw_i32(&w, 3, DPP_PQ_RLE);
        tw_i32(&w, 4, DPP_PQ_RLE);
        tw_end(&w);
    } else {
        tw_begin(&w, 8);
        tw_i32(&w, 1, h->num_values);
        tw_i32(&w, 2, h->num_nulls);
        tw_i32(&w, 3, h->num_rows);
        tw_i32(&w, 4, (int32_t)h->encoding);
        tw_i32(&w, 5, h->def_len);
        tw_i32(&w, 6, h->rep_len);
        tw_field(&w, CT_FALSE, 7); /* is_compressed */
        tw_end(&w);
    }
    tw_end(&w);
    b_put(&s->file, body, len);
    if (h->type != DPP_PQ_DICTIONARY_PAGE) {
        if (s->data_off < 0)
            s->data_off = at;
        assert_true(s->npages < SYN_MAX_PAGES);
        s->page_off[s->npages] = at;
        s->page_size[s->npages] = (int32_t)((int64_t)s->file.len - at);
        s->first_row[s->npages++] = first_row;
    }
}

/* What the footer says about the chunk. */
typedef struct syn_end {
    int64_t num_values; /* the chunk's level entries */
    int64_t num_rows;   /* the row group's rows */
    int offset_index;   /* write one (from the data pages' first rows) */
} syn_end_t;

/* Ends the file (offset index, footer) and writes it to tmpdir/name;
 * returns its path in a static buffer. */
static const char *syn_finish(syn_t *s, const syn_end_t *e, const char *name)
{
    int64_t start = s->dict_off >= 0 ? s->dict_off : s->data_off;
    if (start < 0)
        start = 4;
    int64_t chunk_len = (int64_t)s->file.len - start;
    int64_t oi_off = -1, oi_len = 0;
    tw_t w = {.b = &s->file};
    if (e->offset_index) {
        oi_off = (int64_t)s->file.len;
        tw_begin(&w, 0);
        tw_list(&w, 1, CT_STRUCT, (uint32_t)s->npages);
        for (size_t i = 0; i < s->npages; i++) {
            tw_begin(&w, -1);
            tw_i64(&w, 1, s->page_off[i]);
            tw_i32(&w, 2, s->page_size[i]);
            tw_i64(&w, 3, s->first_row[i]);
            tw_end(&w);
        }
        tw_end(&w);
        oi_len = (int64_t)s->file.len - oi_off;
    }

    size_t footer = s->file.len;
    tw_begin(&w, 0);
    tw_i32(&w, 1, 1);
    int list = s->shape == SYN_LIST;
    tw_list(&w, 2, CT_STRUCT, list ? 4 : 2);
    tw_begin(&w, -1);
    tw_field_str(&w, 4, "schema");
    tw_i32(&w, 5, 1);
    tw_end(&w);
    if (list) {
        tw_begin(&w, -1);
        tw_i32(&w, 3, 1);
        tw_field_str(&w, 4, "l");
        tw_i32(&w, 5, 1);
        tw_i32(&w, 6, 3); /* LIST */
        tw_end(&w);
        tw_begin(&w, -1);
        tw_i32(&w, 3, 2);
        tw_field_str(&w, 4, "list");
        tw_i32(&w, 5, 1);
        tw_end(&w);
    }
    tw_begin(&w, -1);
    tw_i32(&w, 1, DPP_PQ_INT64);
    tw_i32(&w, 3, s->shape == SYN_REQUIRED ? 0 : 1);
    tw_field_str(&w, 4, list ? "element" : "v");
    tw_end(&w);
    tw_i64(&w, 3, e->num_rows);
    tw_list(&w, 4, CT_STRUCT, 1);
    tw_begin(&w, -1);
    tw_list(&w, 1, CT_STRUCT, 1);
    tw_begin(&w, -1);
    tw_i64(&w, 2, start);
    tw_begin(&w, 3);
    tw_i32(&w, 1, DPP_PQ_INT64);
    tw_list(&w, 2, CT_I32, 2);
    tw_zigzag(&w, DPP_PQ_PLAIN);
    tw_zigzag(&w, DPP_PQ_RLE);
    tw_list(&w, 3, CT_BINARY, list ? 3 : 1);
    if (list) {
        tw_str(&w, "l");
        tw_str(&w, "list");
        tw_str(&w, "element");
    } else {
        tw_str(&w, "v");
    }
    tw_i32(&w, 4, DPP_PQ_UNCOMPRESSED);
    tw_i64(&w, 5, e->num_values);
    tw_i64(&w, 6, chunk_len);
    tw_i64(&w, 7, chunk_len);
    tw_i64(&w, 9, s->data_off >= 0 ? s->data_off : start);
    if (s->dict_off >= 0)
        tw_i64(&w, 11, s->dict_off);
    tw_end(&w);
    if (oi_off >= 0) {
        tw_i64(&w, 4, oi_off);
        tw_i32(&w, 5, (int32_t)oi_len);
    }
    tw_end(&w);
    tw_i64(&w, 2, chunk_len);
    tw_i64(&w, 3, e->num_rows);
    tw_end(&w);
    tw_end(&w);
    b_le32(&s->file, (uint32_t)(s->file.len - footer));
    b_put(&s->file, "PAR1", 4);

    static char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    spill(path, s->file.p, s->file.len);
    free(s->file.p);
    s->file = (bytes_t){0};
    return path;
}

/* The RLE/bit-packing hybrid of n values of `width` bits, as bit-packed
 * groups of 8 (the last one padded with zeros). */
static void hybrid(bytes_t *b, const uint32_t *v, size_t n, unsigned width)
{
    size_t groups = (n + 7) / 8;
    b_uleb(b, (uint64_t)groups << 1 | 1);
    for (size_t g = 0; g < groups; g++) {
        uint64_t acc = 0;
        for (size_t i = 0; i < 8; i++) {
            uint32_t x = g * 8 + i < n ? v[g * 8 + i] : 0;
            acc |= (uint64_t)x << (i * width);
        }
        for (unsigned k = 0; k < width; k++)
            b_byte(b, (uint8_t)(acc >> (8 * k)));
    }
}

/* One RLE run: n copies of value, `width` bits wide. */
static void rle_run(bytes_t *b, uint32_t value, uint64_t n, unsigned width)
{
    b_uleb(b, n << 1);
    for (unsigned k = 0; k < (width + 7) / 8; k++)
        b_byte(b, (uint8_t)(value >> (8 * k)));
}

/* Levels as a v1 page stores them: a 4-byte length, then the hybrid. */
static void v1_levels(bytes_t *b, const uint32_t *v, size_t n, unsigned width)
{
    bytes_t h = {0};
    hybrid(&h, v, n, width);
    b_le32(b, (uint32_t)h.len);
    b_put(b, h.p, h.len);
    free(h.p);
}

/* ---- pages made to lie ---- */

/* Makes the required column's chunk: pages written by the caller after
 * syn_begin. Reads it: the expected error (code, words) must come, at
 * most `heap` bytes may be held by the failed column. */
static void expect_failure(const char *path, const char *name, const char *words, size_t heap,
                           uint64_t skip)
{
    char err[512] = "";
    dpp_pq_file_t f;
    int rc = dpp_pq_file_open(&f, path, name, err, sizeof err);
    if (rc)
        fail_msg("%s: %s", name, err);
    assert_int_equal(f.meta.nfields, 1);
    const dpp_pq_field_t *field = &f.meta.fields[0];
    assert_int_equal(dpp_pq_field_check(&f, field, err, sizeof err), 0);
    dpp_pq_dctx_t dctx = {0};
    dpp_pq_buf_t b = {0};
    dpp_pq_col_t *c;
    size_t before = heap_now();
    assert_int_equal(dpp_pq_col_open(&c, &f, 0, field, &dctx), 0);
    if (skip) {
        rc = dpp_pq_col_skip(c, skip, err, sizeof err);
    } else {
        for (int64_t r = 0; r < f.meta.row_groups[0].num_rows && rc == 0; r++) {
            b.len = 0;
            rc = dpp_pq_col_read(c, &b, NULL, err, sizeof err);
        }
    }
    if (rc != DPP_ECORRUPT || strstr(err, words) == NULL)
        fail_msg("%s: rc %d, \"%s\", expected \"%s\"", name, rc, err, words);
    check_error(rc, err, name, field->name);
    size_t held = heap_now() - before;
    if (held > heap)
        fail_msg("%s: %zu bytes held after the error", name, held);
    char again[512];
    assert_int_equal(dpp_pq_col_read(c, &b, NULL, again, sizeof again), rc);
    assert_string_equal(again, err);
    dpp_pq_col_free(c);
    dpp_pq_buf_free(&b);
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
}

/* A PLAIN page of the required column holding values first..first+n-1. */
static void plain_body(bytes_t *b, int64_t first, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b_le64(b, (uint64_t)(first + (int64_t)i));
}

static void test_lying_pages(void **state)
{
    (void)state;
    syn_t s;
    bytes_t body = {0};
    const size_t small = 1u << 20; /* what a failed column may hold */

    /* The baseline: two pages of 10 rows read fine. */
    syn_begin(&s, SYN_REQUIRED);
    plain_body(&body, 0, 10);
    page_hdr_t h = {.type = DPP_PQ_DATA_PAGE,
                    .uncompressed = -1,
                    .compressed = -1,
                    .num_values = 10,
                    .encoding = DPP_PQ_PLAIN};
    syn_page(&s, &h, body.p, body.len, 0);
    syn_page(&s, &h, body.p, body.len, 10);
    const char *path = syn_finish(&s, &(syn_end_t){20, 20, 1}, "good.parquet");
    stats_t st[1];
    outcome_t o = read_file(path, "good.parquet", st, 1);
    assert_int_equal(o.open_rc, 0);
    assert_int_equal(o.read_rc, 0);
    assert_int_equal(st[0].values, 20);
    assert_true(st[0].sum == 90.0);

    /* DATA_PAGE_V2 of a required column whose header still gives level
     * lengths (writers may write a level block at max level 0): the bytes
     * are passed over, the values read after them. */
    syn_begin(&s, SYN_REQUIRED);
    bytes_t v2body = {0};
    b_put(&v2body, (const uint8_t *)"\x03\x00\x05\x07\x01", 5); /* 2 + 3 bytes of "levels" */
    b_put(&v2body, body.p, body.len);
    page_hdr_t h2 = {.type = DPP_PQ_DATA_PAGE_V2,
                     .uncompressed = -1,
                     .compressed = -1,
                     .num_values = 10,
                     .encoding = DPP_PQ_PLAIN,
                     .num_rows = 10,
                     .rep_len = 2,
                     .def_len = 3};
    syn_page(&s, &h2, v2body.p, v2body.len, 0);
    free(v2body.p);
    path = syn_finish(&s, &(syn_end_t){10, 10, 0}, "v2-levels-at-0.parquet");
    o = read_file(path, "v2-levels-at-0.parquet", st, 1);
    if (o.open_rc || o.read_rc)
        fail_msg("v2-levels-at-0.parquet: %s", o.err);
    assert_int_equal(st[0].values, 10);
    assert_true(st[0].sum == 45.0);

    /* compressed_page_size of ~2 GiB: refused by the header's limits. */
    syn_begin(&s, SYN_REQUIRED);
    h.compressed = h.uncompressed = 0x7ffffff0;
    syn_page(&s, &h, body.p, body.len, 0);
    path = syn_finish(&s, &(syn_end_t){10, 10, 0}, "page-2gib.parquet");
    expect_failure(path, "page-2gib.parquet", "compressed_page_size", small, 0);

    /* 200 MiB, inside the header's limits but past the file: refused
     * before a byte of it is read or allocated. */
    syn_begin(&s, SYN_REQUIRED);
    h.compressed = h.uncompressed = 200 << 20;
    syn_page(&s, &h, body.p, body.len, 0);
    path = syn_finish(&s, &(syn_end_t){10, 10, 0}, "page-200mib.parquet");
    expect_failure(path, "page-200mib.parquet", "run past", small, 0);

    /* An uncompressed page that claims 200 MiB but stores 80 bytes. */
    syn_begin(&s, SYN_REQUIRED);
    h.compressed = -1;
    syn_page(&s, &h, body.p, body.len, 0);
    path = syn_finish(&s, &(syn_end_t){10, 10, 0}, "page-claims.parquet");
    expect_failure(path, "page-claims.parquet", "UNCOMPRESSED", small, 0);
    h.uncompressed = -1;

    /* num_values beyond what the page holds: by one, by far, and by 2^31 - 1
     * (beyond what the chunk holds too: no 4 GiB of levels for 200 bytes). */
    const int32_t counts[] = {11, 1000, INT32_MAX};
    const char *const says[] = {"11 values of 8 bytes", "1000 PLAIN values in 80 bytes",
                                "where the chunk has 10 left"};
    for (size_t i = 0; i < 3; i++) {
        syn_begin(&s, SYN_REQUIRED);
        h.num_values = counts[i];
        syn_page(&s, &h, body.p, body.len, 0);
        path = syn_finish(&s, &(syn_end_t){counts[i] > 1000 ? 10 : counts[i], 10, 0},
                          "too-many.parquet");
        expect_failure(path, "too-many.parquet", says[i], small, 0);
    }
    h.num_values = 10;

    /* A page of 2^26 + 1 nulls in a few bytes, which the chunk agrees to:
     * more than a page may hold. */
    syn_begin(&s, SYN_OPTIONAL);
    {
        bytes_t ob = {0}, run = {0};
        rle_run(&run, 0, (1u << 26) + 1, 1);
        b_le32(&ob, (uint32_t)run.len);
        b_put(&ob, run.p, run.len);
        h.num_values = (1 << 26) + 1;
        syn_page(&s, &h, ob.p, ob.len, 0);
        free(ob.p);
        free(run.p);
    }
    path = syn_finish(&s, &(syn_end_t){(1 << 26) + 1, (1 << 26) + 1, 0}, "many-nulls.parquet");
    expect_failure(path, "many-nulls.parquet", "at most", small, 0);
    h.num_values = 10;

    /* The optional column: levels say 10 values are there, the page holds 9. */
    syn_begin(&s, SYN_OPTIONAL);
    {
        bytes_t ob = {0};
        uint32_t defs[10];
        for (int i = 0; i < 10; i++)
            defs[i] = 1;
        v1_levels(&ob, defs, 10, 1);
        plain_body(&ob, 0, 9);
        syn_page(&s, &h, ob.p, ob.len, 0);
        free(ob.p);
    }
    path = syn_finish(&s, &(syn_end_t){10, 10, 0}, "short-values.parquet");
    expect_failure(path, "short-values.parquet", "10 values of 8 bytes", small, 0);

    /* Dictionary indices: one out of range; a dictionary-encoded page with
     * no dictionary page before it; a dictionary after a dictionary. */
    bytes_t dict = {0};
    plain_body(&dict, 100, 2);
    page_hdr_t dh = {.type = DPP_PQ_DICTIONARY_PAGE,
                     .uncompressed = -1,
                     .compressed = -1,
                     .num_values = 2,
                     .encoding = DPP_PQ_PLAIN};
    bytes_t idx = {0};
    const uint32_t indices[] = {0, 1, 1, 0, 3, 0};
    b_byte(&idx, 2);
    hybrid(&idx, indices, 6, 2);
    bytes_t good_idx = {0};
    const uint32_t good_indices[] = {0, 1, 1, 0, 1, 0};
    b_byte(&good_idx, 1);
    hybrid(&good_idx, good_indices, 6, 1);
    page_hdr_t ih = {.type = DPP_PQ_DATA_PAGE,
                     .uncompressed = -1,
                     .compressed = -1,
                     .num_values = 6,
                     .encoding = DPP_PQ_RLE_DICTIONARY};
    syn_begin(&s, SYN_REQUIRED);
    syn_page(&s, &dh, dict.p, dict.len, 0);
    syn_page(&s, &ih, idx.p, idx.len, 0);
    path = syn_finish(&s, &(syn_end_t){6, 6, 0}, "index-range.parquet");
    expect_failure(path, "index-range.parquet", "index 3", small, 0);

    syn_begin(&s, SYN_REQUIRED);
    syn_page(&s, &ih, idx.p, idx.len, 0);
    path = syn_finish(&s, &(syn_end_t){6, 6, 0}, "no-dictionary.parquet");
    expect_failure(path, "no-dictionary.parquet", "without a dictionary page", small, 0);

    syn_begin(&s, SYN_REQUIRED);
    syn_page(&s, &dh, dict.p, dict.len, 0);
    syn_page(&s, &dh, dict.p, dict.len, 0);
    syn_page(&s, &ih, good_idx.p, good_idx.len, 0);
    path = syn_finish(&s, &(syn_end_t){6, 6, 0}, "two-dictionaries.parquet");
    expect_failure(path, "two-dictionaries.parquet", "second dictionary", small, 0);

    /* A dictionary of 2^31 - 1 values in 16 bytes. */
    syn_begin(&s, SYN_REQUIRED);
    dh.num_values = INT32_MAX;
    syn_page(&s, &dh, dict.p, dict.len, 0);
    dh.num_values = 2;
    syn_page(&s, &ih, idx.p, idx.len, 0);
    path = syn_finish(&s, &(syn_end_t){6, 6, 0}, "huge-dictionary.parquet");
    expect_failure(path, "huge-dictionary.parquet", "a dictionary of 2147483647 values", small, 0);
    /* 2^22 values (32 MiB widened) in 16 bytes: refused before the memory
     * for them is asked for. */
    syn_begin(&s, SYN_REQUIRED);
    dh.num_values = 1 << 22;
    syn_page(&s, &dh, dict.p, dict.len, 0);
    dh.num_values = 2;
    syn_page(&s, &ih, idx.p, idx.len, 0);
    path = syn_finish(&s, &(syn_end_t){6, 6, 0}, "big-dictionary.parquet");
    expect_failure(path, "big-dictionary.parquet", "PLAIN values in 16 bytes", small, 0);

    /* Pages that end before the row group's rows: the chunk's count agrees
     * with the pages, or claims rows that no page holds. */
    syn_begin(&s, SYN_REQUIRED);
    syn_page(&s, &h, body.p, body.len, 0);
    path = syn_finish(&s, &(syn_end_t){10, 20, 0}, "short-chunk.parquet");
    expect_failure(path, "short-chunk.parquet", "ends at row 10 of 20", small, 0);
    expect_failure(path, "short-chunk.parquet", "ends at row 10", small, 15);
    syn_begin(&s, SYN_REQUIRED);
    syn_page(&s, &h, body.p, body.len, 0);
    path = syn_finish(&s, &(syn_end_t){20, 20, 0}, "short-chunk2.parquet");
    expect_failure(path, "short-chunk2.parquet", "ends at row 10 of 20", small, 0);

    /* Many empty pages are passed over, not a hang; then the chunk ends. */
    syn_begin(&s, SYN_REQUIRED);
    h.num_values = 0;
    for (int i = 0; i < 200; i++)
        syn_page(&s, &h, NULL, 0, 0);
    h.num_values = 10;
    path = syn_finish(&s, &(syn_end_t){10, 10, 0}, "empty-pages.parquet");
    expect_failure(path, "empty-pages.parquet", "ends at row 0 of 10", small, 0);

    /* An offset index that points into the middle of a page: the skip
     * fails cleanly at the page it lands on. */
    syn_begin(&s, SYN_REQUIRED);
    for (int i = 0; i < 4; i++)
        syn_page(&s, &h, body.p, body.len, 10 * i);
    s.page_off[2] += 3; /* still a valid index: page 2 shrinks */
    s.page_size[2] -= 3;
    path = syn_finish(&s, &(syn_end_t){40, 40, 1}, "bad-index.parquet");
    expect_failure(path, "bad-index.parquet", "page header", small, 25);

    free(body.p);
    free(dict.p);
    free(idx.p);
    free(good_idx.p);
}

/* ---- made files with many pages, for skipping ---- */

/* What a made file holds, computed while writing it. */
typedef struct made {
    const char *path;
    stats_t want;
} made_t;

/* An optional INT64 "v" of 1000 rows in pages of 1 to 61 rows: a
 * dictionary page first, every third data page dictionary-encoded, the
 * others PLAIN; every 7th row null. */
static made_t make_optional(int v2, int offset_index, const char *name)
{
    static char path[PATH_MAX + 64];
    made_t m = {.path = path};
    syn_t s;
    syn_begin(&s, SYN_OPTIONAL);
    bytes_t dict = {0};
    for (int j = 0; j < 16; j++)
        b_le64(&dict, (uint64_t)(j * 1000 + 7));
    syn_page(&s,
             &(page_hdr_t){.type = DPP_PQ_DICTIONARY_PAGE,
                           .uncompressed = -1,
                           .compressed = -1,
                           .num_values = 16,
                           .encoding = DPP_PQ_PLAIN},
             dict.p, dict.len, 0);
    free(dict.p);
    const int64_t total = 1000;
    int64_t row = 0;
    for (int k = 0; row < total; k++) {
        int64_t cnt = 1 + (k * 37) % 61;
        if (cnt > total - row)
            cnt = total - row;
        uint32_t defs[64], idx[64];
        size_t nn = 0;
        int dict_page = k % 3 == 1;
        bytes_t vals = {0};
        for (int64_t i = row; i < row + cnt; i++) {
            defs[i - row] = i % 7 != 3;
            if (!defs[i - row]) {
                m.want.nulls++;
                continue;
            }
            int64_t v = dict_page ? (i % 16) * 1000 + 7 : i * i - 500;
            m.want.values++;
            m.want.sum += (double)v;
            if (dict_page)
                idx[nn++] = (uint32_t)(i % 16);
            else
                b_le64(&vals, (uint64_t)v);
        }
        if (dict_page) {
            b_byte(&vals, 4);
            hybrid(&vals, idx, nn, 4);
        }
        bytes_t body = {0};
        page_hdr_t h = {.type = v2 ? DPP_PQ_DATA_PAGE_V2 : DPP_PQ_DATA_PAGE,
                        .uncompressed = -1,
                        .compressed = -1,
                        .num_values = (int32_t)cnt,
                        .encoding = dict_page ? DPP_PQ_RLE_DICTIONARY : DPP_PQ_PLAIN,
                        .num_nulls = (int32_t)(cnt - (int64_t)nn),
                        .num_rows = (int32_t)cnt};
        if (v2) {
            hybrid(&body, defs, (size_t)cnt, 1);
            h.def_len = (int32_t)body.len;
        } else {
            v1_levels(&body, defs, (size_t)cnt, 1);
        }
        b_put(&body, vals.p, vals.len);
        syn_page(&s, &h, body.p, body.len, row);
        free(body.p);
        free(vals.p);
        row += cnt;
    }
    syn_finish(&s, &(syn_end_t){total, total, offset_index}, name);
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return m;
}

/* A LIST<INT64> "l" of 600 rows in pages of 1 to 47 rows: null lists,
 * empty lists, lists of 1 to 4 elements with null elements among them;
 * every third page dictionary-encoded. */
static made_t make_list(int v2, int offset_index, const char *name)
{
    static char path[PATH_MAX + 64];
    made_t m = {.path = path, .want.list = 1};
    syn_t s;
    syn_begin(&s, SYN_LIST);
    bytes_t dict = {0};
    for (int j = 0; j < 16; j++)
        b_le64(&dict, (uint64_t)(j * 3 - 20));
    syn_page(&s,
             &(page_hdr_t){.type = DPP_PQ_DICTIONARY_PAGE,
                           .uncompressed = -1,
                           .compressed = -1,
                           .num_values = 16,
                           .encoding = DPP_PQ_PLAIN},
             dict.p, dict.len, 0);
    free(dict.p);
    const int64_t total = 600;
    int64_t row = 0, entries = 0;
    for (int k = 0; row < total; k++) {
        int64_t cnt = 1 + (k * 29) % 47;
        if (cnt > total - row)
            cnt = total - row;
        uint32_t reps[200], defs[200], idx[200];
        size_t n = 0, nn = 0, npresent = 0;
        int dict_page = k % 3 == 1;
        bytes_t vals = {0};
        for (int64_t i = row; i < row + cnt; i++) {
            if (i % 11 == 5) {
                reps[n] = 0;
                defs[n++] = 0;
                m.want.nulls++;
                continue;
            }
            if (i % 13 == 0) {
                reps[n] = 0;
                defs[n++] = 1;
                m.want.empty++;
                continue;
            }
            int present = 0;
            for (int64_t j = 0; j < i % 4 + 1; j++) {
                reps[n] = j ? 1 : 0;
                defs[n++] = (i + j) % 9 == 0 ? 2 : 3;
                if ((i + j) % 9 == 0)
                    continue;
                present++;
                npresent++;
                int64_t v = dict_page ? ((i + j) % 16) * 3 - 20 : i * 10 + j;
                m.want.values++;
                m.want.sum += (double)v;
                if (dict_page)
                    idx[nn++] = (uint32_t)((i + j) % 16);
                else
                    b_le64(&vals, (uint64_t)v);
            }
            m.want.empty += present == 0;
        }
        if (dict_page) {
            b_byte(&vals, 4);
            hybrid(&vals, idx, nn, 4);
        }
        bytes_t body = {0};
        page_hdr_t h = {.type = v2 ? DPP_PQ_DATA_PAGE_V2 : DPP_PQ_DATA_PAGE,
                        .uncompressed = -1,
                        .compressed = -1,
                        .num_values = (int32_t)n,
                        .encoding = dict_page ? DPP_PQ_RLE_DICTIONARY : DPP_PQ_PLAIN,
                        .num_nulls = (int32_t)(n - npresent),
                        .num_rows = (int32_t)cnt};
        if (v2) {
            hybrid(&body, reps, n, 1);
            h.rep_len = (int32_t)body.len;
            hybrid(&body, defs, n, 2);
            h.def_len = (int32_t)body.len - h.rep_len;
        } else {
            v1_levels(&body, reps, n, 1);
            v1_levels(&body, defs, n, 2);
        }
        b_put(&body, vals.p, vals.len);
        syn_page(&s, &h, body.p, body.len, row);
        free(body.p);
        free(vals.p);
        entries += (int64_t)n;
        row += cnt;
    }
    syn_finish(&s, &(syn_end_t){entries, total, offset_index}, name);
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return m;
}

/* The rows of one chunk as read: row r is data[end[r - 1], end[r]). */
typedef struct rows {
    bytes_t data;
    size_t *end;
    size_t n;
} rows_t;

static void read_rows(const dpp_pq_file_t *f, const dpp_pq_field_t *field, uint32_t g,
                      dpp_pq_dctx_t *dctx, rows_t *out)
{
    char err[512];
    dpp_pq_col_t *c;
    dpp_pq_buf_t b = {0};
    out->n = (size_t)f->meta.row_groups[g].num_rows;
    out->end = calloc(out->n + 1, sizeof *out->end);
    assert_non_null(out->end);
    assert_int_equal(dpp_pq_col_open(&c, f, g, field, dctx), 0);
    for (size_t r = 0; r < out->n; r++) {
        b.len = 0;
        if (dpp_pq_col_read(c, &b, NULL, err, sizeof err) != 0)
            fail_msg("row %zu: %s", r, err);
        b_put(&out->data, b.data, b.len);
        out->end[r] = out->data.len;
    }
    dpp_pq_col_free(c);
    dpp_pq_buf_free(&b);
}

/* Reads rows from..n of c and holds each against ref. */
static void check_rows_from(dpp_pq_col_t *c, const rows_t *ref, size_t from, const char *what)
{
    char err[512];
    dpp_pq_buf_t b = {0};
    for (size_t r = from; r < ref->n; r++) {
        b.len = 0;
        if (dpp_pq_col_read(c, &b, NULL, err, sizeof err) != 0)
            fail_msg("%s: row %zu: %s", what, r, err);
        size_t at = r ? ref->end[r - 1] : 0;
        if (b.len != ref->end[r] - at || memcmp(b.data, ref->data.p + at, b.len) != 0)
            fail_msg("%s: row %zu differs from the row read", what, r);
    }
    dpp_pq_buf_free(&b);
}

/* Skipping n rows then reading gives what reading them gives, for n every
 * stride rows of each chunk of each field (and in two skips with a read
 * between); skipping past the end fails, naming the column. */
static void check_skips(const char *path, size_t stride)
{
    const char *name = strrchr(path, '/') + 1;
    char err[512], what[PATH_MAX + 64];
    dpp_pq_file_t f;
    assert_int_equal(dpp_pq_file_open(&f, path, name, err, sizeof err), 0);
    dpp_pq_dctx_t dctx = {0};
    size_t checked = 0;
    for (uint32_t fi = 0; fi < f.meta.nfields; fi++) {
        const dpp_pq_field_t *field = &f.meta.fields[fi];
        if (dpp_pq_field_check(&f, field, err, sizeof err) != 0)
            continue;
        for (uint32_t g = 0; g < f.meta.nrow_groups; g++) {
            rows_t ref = {0};
            read_rows(&f, field, g, &dctx, &ref);
            for (size_t n = 0; n <= ref.n;
                 n = n < ref.n && n + stride > ref.n ? ref.n : n + stride) {
                dpp_pq_col_t *c;
                snprintf(what, sizeof what, "%s column %s row group %u, skip %zu", name,
                         field->name, g, n);
                assert_int_equal(dpp_pq_col_open(&c, &f, g, field, &dctx), 0);
                if (dpp_pq_col_skip(c, n, err, sizeof err) != 0)
                    fail_msg("%s: %s", what, err);
                check_rows_from(c, &ref, n, what);
                dpp_pq_col_free(c);
                checked++;
                if (n < 2)
                    continue;
                /* In two skips with a row read between (the second never
                 * from the row group's start, so by page headers). */
                size_t a = n / 2, rest = n - a - 1;
                assert_int_equal(dpp_pq_col_open(&c, &f, g, field, &dctx), 0);
                assert_int_equal(dpp_pq_col_skip(c, a, err, sizeof err), 0);
                rows_t one = ref;
                one.n = a + 1;
                check_rows_from(c, &one, a, what);
                if (dpp_pq_col_skip(c, rest, err, sizeof err) != 0)
                    fail_msg("%s, in two: %s", what, err);
                check_rows_from(c, &ref, n, what);
                dpp_pq_col_free(c);
            }
            dpp_pq_col_t *c;
            assert_int_equal(dpp_pq_col_open(&c, &f, g, field, &dctx), 0);
            int rc = dpp_pq_col_skip(c, ref.n + 1, err, sizeof err);
            assert_int_equal(rc, DPP_ECORRUPT);
            check_error(rc, err, name, field->name);
            dpp_pq_col_free(c);
            free(ref.data.p);
            free(ref.end);
        }
    }
    assert_true(checked > 0);
    dpp_pq_dctx_free(&dctx);
    dpp_pq_file_close(&f);
}

static void test_skip(void **state)
{
    (void)state;
    /* With offset indexes (one page each, or many), and without. */
    check_skips(PT_DIR "int32_with_null_pages.parquet", 1);
    check_skips(PT_DIR "repeated_primitive_no_list.parquet", 1);
    check_skips(PT_DIR "datapage_v1-snappy-compressed-checksum.parquet", 97);
    check_skips(PT_DIR "datapage_v2.snappy.parquet", 1);
    check_skips(PT_DIR "list_columns.parquet", 1);
    check_skips(DUCK_DIR "criteo_zstd_v2.parquet", 101);
}

static void test_made_files(void **state)
{
    (void)state;
    for (int kind = 0; kind < 8; kind++) {
        int v2 = kind & 1, index = kind >> 1 & 1, list = kind >> 2;
        char name[64];
        snprintf(name, sizeof name, "made-%s-v%d-%s.parquet", list ? "list" : "optional", v2 + 1,
                 index ? "index" : "noindex");
        made_t m = list ? make_list(v2, index, name) : make_optional(v2, index, name);
        stats_t st[1];
        outcome_t o = read_file(m.path, name, st, 1);
        if (o.open_rc || o.read_rc)
            fail_msg("%s: %s", name, o.err);
        assert_int_equal(st[0].nulls, m.want.nulls);
        assert_int_equal(st[0].values, m.want.values);
        assert_int_equal(st[0].empty, m.want.empty);
        assert_true(st[0].sum == m.want.sum);
        check_skips(m.path, kind == 0 ? 3 : 11);
        /* Flip every byte of the small ones too: pages made here use every
         * level layout. */
        if (kind == 0 || kind == 5)
            flip_each(m.path, 4, SIZE_MAX, 13);
    }
}

static void test_crc(void **state)
{
    (void)state;
    /* A dictionary page with a CRC read on the way to where an offset index
     * points: its damage is found there too. */
    bytes_t dict = {0}, idx = {0};
    plain_body(&dict, 100, 2);
    const uint32_t indices[] = {0, 1, 1, 0, 1, 0, 0, 1, 1, 1};
    b_byte(&idx, 1);
    hybrid(&idx, indices, 10, 1);
    syn_t s;
    syn_begin(&s, SYN_REQUIRED);
    syn_page(&s,
             &(page_hdr_t){.type = DPP_PQ_DICTIONARY_PAGE,
                           .uncompressed = -1,
                           .compressed = -1,
                           .num_values = 2,
                           .encoding = DPP_PQ_PLAIN,
                           .crc = 1},
             dict.p, dict.len, 0);
    size_t dict_body = s.file.len - dict.len;
    for (int i = 0; i < 4; i++)
        syn_page(&s,
                 &(page_hdr_t){.type = DPP_PQ_DATA_PAGE,
                               .uncompressed = -1,
                               .compressed = -1,
                               .num_values = 10,
                               .encoding = DPP_PQ_RLE_DICTIONARY,
                               .crc = 1},
                 idx.p, idx.len, 10 * i);
    const char *path = syn_finish(&s, &(syn_end_t){40, 40, 1}, "crc-dictionary.parquet");
    outcome_t o = read_file(path, "crc-dictionary.parquet", NULL, 0);
    assert_int_equal(o.read_rc, 0);
    check_skips(path, 1);
    uint8_t byte = 0xff;
    poke("crc-dictionary.parquet", dict_body + 3, &byte, 1);
    expect_failure(path, "crc-dictionary.parquet", "CRC", 1u << 20, 25);
    expect_failure(path, "crc-dictionary.parquet", "CRC", 1u << 20, 0);
    free(dict.p);
    free(idx.p);

    check_crc_flips(PT_DIR "datapage_v1-snappy-compressed-checksum.parquet", 1);
    check_crc_flips(PT_DIR "int32_with_null_pages.parquet", 3);
}

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(tmpdir, "pqcol");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_duckdb), cmocka_unit_test(test_made_files),
        cmocka_unit_test(test_skip),           cmocka_unit_test(test_lying_pages),
        cmocka_unit_test(test_magic),          cmocka_unit_test(test_footer_lies),
        cmocka_unit_test(test_truncated),      cmocka_unit_test(test_crc),
        cmocka_unit_test(test_bit_flips),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
