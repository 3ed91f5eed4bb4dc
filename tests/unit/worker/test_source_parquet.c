/* SPDX-License-Identifier: Apache-2.0 */
/* The Parquet source (src/worker/source_parquet.c): a split's rows come out
 * as the values the file was written with (computed here again from the
 * row number, not read back with dpp's reader), and what the split needs of
 * the file is read ahead through the thread's reader: all of it (no column
 * reads for itself), and for a split of part of a row group only the pages
 * that hold its rows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gen/parquet_writer.h"
#include "parquet/column.h"
#include "worker/source.h"
#include "test_tmpdir.h"

/* Pages hold at most 8192 rows, so chunks of 200,000 rows have ~25 pages,
 * each larger than the gap reads are coalesced over. */
#define ROWS 200000u

static char tmpdir[PATH_MAX];
static char path[PATH_MAX + 16];

static int is_null(uint64_t i, unsigned j)
{
    return (i + j) % 17 == 0;
}

static void row_of(uint64_t i, dpp_gen_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->row_id = (int64_t)i;
    r->label = (int64_t)(i % 2);
    for (unsigned j = 0; j < DPP_GEN_NDENSE; j++) {
        r->dense[j] = (float)(i * (j + 1) % 1000);
        if (is_null(i, j))
            r->dense_null |= 1u << j;
    }
    for (unsigned j = 0; j < DPP_GEN_NSPARSE; j++) {
        r->n_ids[j] = (uint8_t)(1 + (i + j) % 3);
        for (unsigned k = 0; k < r->n_ids[j]; k++)
            r->ids[j][k] = (int64_t)((i + k) % 1000) * (j + 1); /* small dictionaries */
    }
    r->s1_len = (uint8_t)snprintf(r->s1, sizeof r->s1, "v%u", (unsigned)(i % 50));
}

static int setup(void **state)
{
    (void)state;
    if (test_tmpdir_make(tmpdir, "source_parquet") != 0)
        return -1;
    snprintf(path, sizeof path, "%s/t.parquet", tmpdir);
    FILE *f = fopen(path, "wb");
    dpp_gen_pq_opts_t o = {.codec = DPP_GEN_CODEC_ZSTD, .row_group_rows = ROWS, .created_by = "t"};
    dpp_gen_pq_t *w = dpp_gen_pq_new(&o);
    int rc = f ? dpp_gen_pq_begin(w, f) : -1;
    for (uint64_t i = 0; i < ROWS && rc == 0; i++) {
        dpp_gen_row_t r;
        row_of(i, &r);
        rc = dpp_gen_pq_add(w, &r);
    }
    if (rc == 0)
        rc = dpp_gen_pq_end(w, NULL);
    dpp_gen_pq_free(w);
    if (f)
        fclose(f);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static const char *const names[] = {"row_id", "i2", "c3", "s1"};
#define NNAMES 4

/* Bytes of the chunks of the projected columns in the file's row group. */
static uint64_t projected_bytes(void)
{
    dpp_pq_file_t f;
    char err[256];
    assert_int_equal(dpp_pq_file_open(&f, path, "t.parquet", err, sizeof err), 0);
    uint64_t total = 0;
    for (size_t i = 0; i < NNAMES; i++) {
        const dpp_pq_field_t *field = dpp_pq_meta_field(&f.meta, names[i]);
        assert_non_null(field);
        total += (uint64_t)f.meta.row_groups[0].chunks[field->column].total_compressed_size;
    }
    dpp_pq_file_close(&f);
    return total;
}

/* Reads rows [start, start + n) as a split and checks every value; returns
 * the bytes the split read. */
static uint64_t read_split(const dpp_reader_config_t *rcfg, uint64_t start, uint64_t n)
{
    dpp_reader_t *reader;
    assert_int_equal(dpp_reader_new(&reader, rcfg), 0);
    void *proj;
    dpp_spec_t spec = {0};
    dpp_pipeline_config_t pcfg = {0};
    char perr[256];
    assert_int_equal(dpp_source_parquet.projection_new(&proj, names, NNAMES, &spec, "", &pcfg,
                                                       perr, sizeof perr),
                     0);
    dpp_task_t t = {.path = path,
                    .rel_path = "t.parquet",
                    .record_start = start,
                    .record_count = n,
                    .range_records = n,
                    .format = DPP_FORMAT_PARQUET};
    dpp_pipeline_config_t cfg = {.threads = 1};
    dpp_source_t s = {0};
    char err[512];
    int rc = dpp_source_parquet.open(&s, reader, &t, proj, &cfg, err, sizeof err);
    if (rc)
        print_error("open: %s\n", err);
    assert_int_equal(rc, 0);
    uint64_t i = start;
    dpp_source_row_t row;
    while ((rc = dpp_source_parquet.next(&s, &row)) == 1) {
        dpp_feat_ref_t refs[NNAMES];
        assert_int_equal(dpp_source_parquet.decode(proj, row.data, row.len, refs), 0);
        dpp_gen_row_t want;
        row_of(i, &want);
        int64_t id;
        size_t got;
        assert_int_equal(dpp_feat_int64s(&refs[0], &id, 1, &got), 0);
        assert_int_equal(got, 1);
        assert_int_equal(id, want.row_id);
        if (is_null(i, 1)) {
            assert_int_equal(refs[1].kind, DPP_FEAT_ABSENT);
        } else {
            float v;
            assert_int_equal(dpp_feat_floats(&refs[1], &v, 1, &got), 0);
            assert_true(got == 1 && v == want.dense[1]);
        }
        int64_t ids[DPP_GEN_MAX_IDS];
        assert_int_equal(dpp_feat_int64s(&refs[2], ids, DPP_GEN_MAX_IDS, &got), 0);
        assert_int_equal(got, want.n_ids[2]);
        assert_memory_equal(ids, want.ids[2], got * sizeof *ids);
        const uint8_t *str;
        size_t pos = 0, len;
        assert_int_equal(refs[3].kind, DPP_FEAT_BYTES);
        assert_int_equal(dpp_feat_bytes_next(&refs[3], &pos, &str, &len), 1);
        assert_true(len == want.s1_len && memcmp(str, want.s1, len) == 0);
        i++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(i, start + n);
    dpp_source_parquet.close(&s);
    dpp_reader_stats_t st;
    dpp_reader_get_stats(reader, &st);
    /* every byte came through the reader: no column read for itself */
    assert_int_equal(s.bytes_read, st.bytes_read);
    dpp_source_parquet.projection_free(proj);
    dpp_reader_free(reader);
    return s.bytes_read;
}

static void test_whole_row_group(void **state)
{
    (void)state;
    static const dpp_reader_config_t configs[] = {{0}, {.force_pread = 1}, {.chunk_bytes = 4096}};
    uint64_t chunks = projected_bytes();
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        /* the chunks, and the gaps between them the reads were coalesced over */
        uint64_t got = read_split(&configs[c], 0, ROWS);
        assert_true(got >= chunks && got <= chunks + 3 * (64u << 10));
    }
}

static void test_part_reads_its_pages(void **state)
{
    (void)state;
    uint64_t chunks = projected_bytes();
    /* rows 81920..90111: a 25th of the row group, in pages of 8192 rows
     * (fewer in the list columns) */
    uint64_t part = read_split(NULL, 81920, 8192);
    print_message("rows 81920..90111: %llu of %llu bytes\n", (unsigned long long)part,
                  (unsigned long long)chunks);
    assert_true(part < chunks / 5);
    /* the first and the last rows, and a range inside one page */
    assert_true(read_split(NULL, 0, 100) < chunks / 5);
    assert_true(read_split(NULL, ROWS - 100, 100) < chunks / 5);
    assert_true(read_split(NULL, 9000, 10) < chunks / 5);
}

/* An index task with split_rows 10,000 over the 200,000-row group: 20
 * ranges, cut k at the page start of the largest chunk (its offset index,
 * read here) nearest to row 10,000 k within 2,500 rows, or at 10,000 k
 * where none is that near; none longer than 15,000 rows. */
static void test_index_cuts_at_pages(void **state)
{
    (void)state;
    dpp_task_t t = {.kind = DPP_TASK_INDEX,
                    .path = path,
                    .rel_path = "t.parquet",
                    .split_rows = 10000,
                    .format = DPP_FORMAT_PARQUET};
    dpp_pipeline_config_t cfg = {.threads = 1};
    dpp_split_result_t res = {0};
    assert_int_equal(dpp_source_parquet.index(&cfg, &t, &res), 0);
    assert_int_equal(res.records, ROWS);
    assert_int_equal(res.nbounds, 21);
    assert_int_equal(res.bounds[0], 0);
    assert_int_equal(res.bounds[res.nbounds - 1], ROWS);

    dpp_pq_file_t f;
    char err[256];
    assert_int_equal(dpp_pq_file_open(&f, path, "t.parquet", err, sizeof err), 0);
    const dpp_pq_row_group_t *rg = &f.meta.row_groups[0];
    const dpp_pq_chunk_t *big = &rg->chunks[0];
    for (uint32_t c = 1; c < f.meta.ncolumns; c++)
        if (rg->chunks[c].total_compressed_size > big->total_compressed_size)
            big = &rg->chunks[c];
    uint8_t *buf = malloc((size_t)big->offset_index_length);
    assert_int_equal(
        pread(f.in->fd, buf, (size_t)big->offset_index_length, (off_t)big->offset_index_offset),
        big->offset_index_length);
    dpp_pq_page_loc_t *locs;
    size_t nlocs;
    assert_int_equal(dpp_pq_offset_index_parse(buf, (size_t)big->offset_index_length, &locs, &nlocs,
                                               err, sizeof err),
                     0);
    assert_true(nlocs > 20); /* pages of at most 8192 rows */
    size_t at_pages = 0;
    for (size_t i = 1; i + 1 < res.nbounds; i++) {
        /* the nearest page start within 2,500 rows of the target, or the target */
        uint64_t target = i * 10000, want = target, dist = 2501;
        for (size_t p = 0; p < nlocs; p++) {
            uint64_t r = (uint64_t)locs[p].first_row_index;
            uint64_t d = r > target ? r - target : target - r;
            if (d < dist) {
                want = r;
                dist = d;
            }
        }
        if (res.bounds[i] != want)
            print_error("cut %zu at row %llu, expected %llu\n", i,
                        (unsigned long long)res.bounds[i], (unsigned long long)want);
        assert_int_equal(res.bounds[i], want);
        at_pages += want != target;
    }
    assert_true(at_pages > 0);
    for (size_t i = 1; i < res.nbounds; i++)
        assert_true(res.bounds[i] > res.bounds[i - 1] &&
                    res.bounds[i] - res.bounds[i - 1] <= 15000);
    free(locs);
    free(buf);
    free(res.bounds);
    dpp_pq_file_close(&f);
}

/* Writes rows rows of row_of() to path in row groups of rg rows. */
static void write_table(const char *file, uint64_t rows, uint64_t rg)
{
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    dpp_gen_pq_opts_t o = {.codec = DPP_GEN_CODEC_SNAPPY, .row_group_rows = rg, .created_by = "t"};
    dpp_gen_pq_t *w = dpp_gen_pq_new(&o);
    assert_int_equal(dpp_gen_pq_begin(w, f), 0);
    for (uint64_t i = 0; i < rows; i++) {
        dpp_gen_row_t r;
        row_of(i, &r);
        assert_int_equal(dpp_gen_pq_add(w, &r), 0);
    }
    assert_int_equal(dpp_gen_pq_end(w, NULL), 0);
    dpp_gen_pq_free(w);
    fclose(f);
}

/* A batch of index tasks (dpp_pipeline_run_index_many: every file opened,
 * their tails read in flight together) gives each task what it alone gives
 * (dpp_pipeline_run_index): a file whose footer is longer than the tail
 * read with it, files that are not Parquet, empty or missing, a task of
 * another format in the middle; with io_uring and with pread. */
static void test_index_many(void **state)
{
    (void)state;
    enum { N = 7 };
    static char paths[N][PATH_MAX + 32];
    static const char *const names[N] = {"t.parquet",     "many-groups.parquet", "text.parquet",
                                         "empty.parquet", "missing.parquet",     "t.parquet",
                                         "t.parquet"};
    for (size_t i = 0; i < N; i++)
        snprintf(paths[i], sizeof paths[i], "%s/%s", tmpdir, names[i]);
    write_table(paths[1], 3000, 50); /* 60 row groups: a footer of ~150 KB */
    FILE *f = fopen(paths[2], "w");
    fputs("not parquet at all\n", f);
    fclose(f);
    fclose(fopen(paths[3], "w"));
    dpp_task_t t[N];
    const dpp_task_t *tp[N];
    for (size_t i = 0; i < N; i++) {
        t[i] = (dpp_task_t){.kind = DPP_TASK_INDEX,
                            .lease_id = 100 + i,
                            .split = (uint32_t)i,
                            .path = paths[i],
                            .rel_path = (char *)names[i],
                            .split_rows = 10000,
                            .format = DPP_FORMAT_PARQUET};
        tp[i] = &t[i];
    }
    t[5].format = -1; /* a format this worker does not know: refused by name */
    snprintf(t[5].format_name, sizeof t[5].format_name, "orc");
    dpp_pipeline_config_t cfg = {.threads = 1};
    static const dpp_reader_config_t configs[] = {{0}, {.force_pread = 1}};
    for (size_t c = 0; c < 2; c++) {
        dpp_reader_t *reader;
        assert_int_equal(dpp_reader_new(&reader, &configs[c]), 0);
        dpp_split_result_t many[N], one[N];
        dpp_split_result_t *mp[N];
        for (size_t i = 0; i < N; i++)
            mp[i] = &many[i];
        dpp_pipeline_run_index_many(&cfg, reader, tp, mp, N);
        for (size_t i = 0; i < N; i++) {
            dpp_pipeline_run_index(&cfg, &t[i], &one[i]);
            assert_int_equal(many[i].error, one[i].error);
            assert_string_equal(many[i].message, one[i].message);
            assert_int_equal(many[i].lease_id, 100 + i);
            assert_int_equal(many[i].records, one[i].records);
            assert_int_equal(many[i].nbounds, one[i].nbounds);
            if (one[i].nbounds)
                assert_memory_equal(many[i].bounds, one[i].bounds,
                                    one[i].nbounds * sizeof *one[i].bounds);
            assert_int_equal(dpp_rejects_total(&many[i].rejects),
                             dpp_rejects_total(&one[i].rejects));
            assert_string_equal(many[i].reject_detail, one[i].reject_detail);
            assert_int_equal(many[i].file_size, one[i].file_size);
            free(many[i].bounds);
            free(one[i].bounds);
        }
        assert_int_equal(many[0].records, ROWS);
        assert_int_equal(many[1].records, 3000);
        assert_int_equal(many[1].nbounds, 61);
        assert_int_equal(dpp_rejects_total(&many[2].rejects),
                         1); /* not Parquet: one corrupt record */
        assert_int_equal(dpp_rejects_total(&many[3].rejects), 1);
        assert_true(many[4].error != 0 && strstr(many[4].message, "missing.parquet") != NULL);
        assert_true(many[5].error != 0 && strstr(many[5].message, "\"orc\"") != NULL);
        assert_int_equal(many[6].records, ROWS);
        dpp_reader_free(reader);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_row_group),
        cmocka_unit_test(test_part_reads_its_pages),
        cmocka_unit_test(test_index_cuts_at_pages),
        cmocka_unit_test(test_index_many),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
