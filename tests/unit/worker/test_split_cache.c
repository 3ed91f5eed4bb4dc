/* SPDX-License-Identifier: Apache-2.0 */
/* The split cache in the pipeline (src/worker/split_cache.c, pipeline.c):
 * a split served from the cache gives exactly the blocks a worker without
 * a cache makes (the same bytes, rows and numbering), for every epoch's
 * shuffle, with and without a shuffle, for windows of a range, with rows
 * filtered out, from the RAM tier, from the disk tier after the store is
 * opened again, and after the file changed (the entry is stale: made anew);
 * for specs without a label and of one kind of feature too.
 * The reference is the same pipeline with no cache. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "format/block.h"
#include "format/format.h"
#include "gen/parquet_writer.h"
#include "worker/cache_store.h"
#include "worker/pipeline.h"
#include "worker/reader.h"
#include "test_tmpdir.h"

#define ROWS 20000u
#define SPLIT_ROWS 6000u

static char tmpdir[PATH_MAX];
static char path[PATH_MAX + 32], cache_dir[PATH_MAX + 32];

static void row_of(uint64_t i, dpp_gen_row_t *r)
{
    memset(r, 0, sizeof *r);
    r->row_id = (int64_t)i;
    r->label = (int64_t)(i % 2);
    for (unsigned j = 0; j < DPP_GEN_NDENSE; j++) {
        r->dense[j] = (float)(i * (j + 1) % 1000);
        if ((i + j) % 13 == 0)
            r->dense_null |= 1u << j;
    }
    for (unsigned j = 0; j < DPP_GEN_NSPARSE; j++) {
        r->n_ids[j] = (uint8_t)(1 + (i + j) % 4);
        for (unsigned k = 0; k < r->n_ids[j]; k++)
            r->ids[j][k] = (int64_t)((i * 7 + k) % 5000) * (j + 1);
    }
}

static int write_table(void)
{
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

static int setup(void **state)
{
    (void)state;
    if (test_tmpdir_make(tmpdir, "split_cache") != 0)
        return -1;
    snprintf(path, sizeof path, "%s/t/p.parquet", tmpdir);
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", tmpdir);
    char dir[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s/t", tmpdir);
    if (mkdir(dir, 0700) != 0)
        return -1;
    return write_table();
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

/* What a split emitted: every block's bytes and numbering. */
typedef struct got {
    struct {
        uint8_t *data;
        size_t len;
        uint32_t rows, index;
        int last;
    } b[64];
    size_t n;
} got_t;

static int collect(void *arg, dpp_out_block_t *b)
{
    got_t *g = arg;
    assert_true(g->n < 64);
    assert_int_equal(b->codec, 0); /* compression "off": raw bytes to compare */
    g->b[g->n].data = b->data;
    g->b[g->n].len = b->len;
    g->b[g->n].rows = b->rows;
    g->b[g->n].index = b->index;
    g->b[g->n].last = b->last;
    g->n++;
    b->data = NULL;
    dpp_out_block_free(b);
    return 0;
}

static void got_free(got_t *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->b[i].data);
    g->n = 0;
}

static void assert_same(const got_t *a, const got_t *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->b[i].rows, b->b[i].rows);
        assert_int_equal(a->b[i].index, b->b[i].index);
        assert_int_equal(a->b[i].last, b->b[i].last);
        assert_int_equal(a->b[i].len, b->b[i].len);
        assert_memory_equal(a->b[i].data, b->b[i].data, a->b[i].len);
    }
}

/* The specs' features and label, and the shape of their blocks: dense and
 * sparse with a label; without a label, only dense or only sparse. */
#define DENSE_FEATURES                                                                             \
    "\"dense\": [{\"name\": \"i1\", \"transforms\": [{\"op\": \"fill_missing\", \"value\": 0}, "   \
    "{\"op\": \"log1p\"}]}, {\"name\": \"i5\", \"transforms\": [{\"op\": \"fill_missing\", "       \
    "\"value\": -1}]}]"
#define SPARSE_FEATURES                                                                            \
    "\"sparse\": [{\"name\": \"c3\", \"transforms\": [{\"op\": \"modulo\", \"n\": 977}]}, "        \
    "{\"name\": \"c9\"}]"
typedef enum { WITH_LABEL, DENSE_NO_LABEL, SPARSE_NO_LABEL } kind_t;
static const char *const features_of[] = {
    "\"features\": {" DENSE_FEATURES ", " SPARSE_FEATURES "}, \"label\": {\"name\": \"label\"}",
    "\"features\": {" DENSE_FEATURES "}",
    "\"features\": {" SPARSE_FEATURES "}",
};
static const unsigned dims[2] = {1, 1};
static const dpp_block_shape_t shapes[] = {
    {.ndense = 2, .nsparse = 2, .dims = dims},
    {.ndense = 2, .dims = dims, .no_label = 1},
    {.nsparse = 2, .no_label = 1},
};

static const char *spec_of(kind_t kind, int shuffle, int cache_off)
{
    static char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"table\": \"t\", \"format\": \"parquet\", \"batch_size\": 512, "
             "\"compression\": \"off\", \"split_rows\": %u%s%s, %s,"
             " \"filters\": [{\"op\": \"sample\", \"p\": 0.7, \"seed\": 4}]}",
             SPLIT_ROWS, shuffle ? ", \"shuffle\": {\"seed\": 11}" : "",
             cache_off ? ", \"cache\": \"off\"" : "", features_of[kind]);
    return spec;
}

/* Every block of g has the kind's shape: a label column of its rows, or an
 * empty one. */
static void assert_shape(const got_t *g, kind_t kind)
{
    for (size_t i = 0; i < g->n; i++) {
        dpp_block_info_t info;
        assert_int_equal(dpp_block_parse(g->b[i].data, g->b[i].len, &shapes[kind], &info), 0);
        assert_int_equal(info.rows, g->b[i].rows);
        assert_true((dpp_block_labels(g->b[i].data, &shapes[kind]) == NULL) ==
                    (kind != WITH_LABEL));
    }
}

/* Runs task t (epoch) with cfg; returns the result, the blocks into g. */
static dpp_split_result_t run(const dpp_pipeline_config_t *cfg, dpp_task_t *t, unsigned epoch,
                              got_t *g)
{
    static dpp_reader_t *reader;
    static ZSTD_CCtx *z;
    if (reader == NULL) {
        dpp_reader_config_t rc = {0};
        assert_int_equal(dpp_reader_new(&reader, &rc), 0);
        z = ZSTD_createCCtx();
    }
    dpp_split_scratch_t scratch = {0};
    dpp_split_result_t res;
    t->epoch = epoch;
    assert_int_equal(dpp_pipeline_run_split(cfg, reader, z, &scratch, 0, t, collect, g, &res, NULL),
                     0);
    dpp_split_scratch_free(&scratch);
    return res;
}

/* The ranges of the file, as the master cuts them from its index. */
static size_t ranges(dpp_task_t *out, size_t max, const char *spec)
{
    dpp_pipeline_config_t cfg = {.threads = 1};
    dpp_task_t it = {.kind = DPP_TASK_INDEX,
                     .path = path,
                     .rel_path = "p.parquet",
                     .spec_json = (char *)spec,
                     .format = DPP_FORMAT_PARQUET,
                     .split_rows = SPLIT_ROWS};
    dpp_split_result_t ires;
    assert_int_equal(dpp_pipeline_run_index(&cfg, &it, &ires), 0);
    size_t n = 0;
    for (size_t k = 0; k + 1 < ires.nbounds && n < max; k++) {
        uint64_t count = ires.bounds[k + 1] - ires.bounds[k];
        out[n++] = (dpp_task_t){.kind = DPP_TASK_SPLIT,
                                .path = path,
                                .rel_path = "p.parquet",
                                .spec_json = (char *)spec,
                                .format = DPP_FORMAT_PARQUET,
                                .split = (uint32_t)n,
                                .record_start = ires.bounds[k],
                                .record_count = count,
                                .range_records = count,
                                .record_take = count};
    }
    free(ires.bounds);
    /* a window of the first range, as a rank boundary cuts one */
    out[n] = out[0];
    out[n].record_skip = 1000;
    out[n].record_count = out[n].record_take = 2500;
    return n + 1;
}

/* made: the store does not hold the splits yet (the first run of epoch 0
 * makes each) */
static void check_spec(kind_t kind, int shuffle, dpp_cache_store_t *store, int expect_tier,
                       int made)
{
    dpp_task_t t[8];
    const char *spec = spec_of(kind, shuffle, 0);
    size_t nt = ranges(t, 7, spec);
    assert_true(nt >= 4);
    dpp_pipeline_config_t fresh = {.threads = 1};
    dpp_pipeline_config_t cached = {.threads = 1, .cache = store};
    for (unsigned epoch = 0; epoch < 3; epoch++) {
        for (size_t k = 0; k < nt; k++) {
            got_t want = {0}, first = {0}, again = {0};
            dpp_split_result_t r0 = run(&fresh, &t[k], epoch, &want);
            dpp_split_result_t r1 = run(&cached, &t[k], epoch, &first);
            dpp_split_result_t r2 = run(&cached, &t[k], epoch, &again);
            assert_int_equal(r0.cache_tier, -1);
            /* made by the first run of epoch 0, served by every other */
            assert_int_equal(r1.cache_tier, made && epoch == 0 ? 0 : expect_tier);
            assert_int_equal(r2.cache_tier, expect_tier);
            assert_true(r0.filtered > 0 && r0.rows > 0);
            assert_int_equal(r1.rows, r0.rows);
            assert_int_equal(r2.rows, r0.rows);
            assert_int_equal(r1.filtered, r0.filtered);
            assert_int_equal(r2.filtered, r0.filtered);
            assert_int_equal(r2.blocks, r0.blocks);
            assert_same(&want, &first);
            assert_same(&want, &again);
            assert_shape(&want, kind);
            got_free(&want);
            got_free(&first);
            got_free(&again);
        }
    }
    /* "cache": "off": the store is not asked */
    dpp_task_t off = t[0];
    off.spec_json = (char *)spec_of(kind, shuffle, 1);
    got_t g = {0};
    assert_int_equal(run(&cached, &off, 0, &g).cache_tier, -1);
    got_free(&g);
}

static void test_ram(void **state)
{
    (void)state;
    dpp_cache_store_config_t cc = {.ram_bytes = 256u << 20};
    dpp_cache_store_t *store;
    char err[256];
    assert_int_equal(dpp_cache_store_open(&store, &cc, err, sizeof err), 0);
    check_spec(WITH_LABEL, 1, store, 1, 1);
    /* the same spec without a shuffle: the same entries serve it (the
     * shuffle is applied when serving) */
    check_spec(WITH_LABEL, 0, store, 1, 0);
    /* specs without a label, of only dense or only sparse features: blocks
     * of their shape, entries of their own, made and served alike */
    check_spec(DENSE_NO_LABEL, 1, store, 1, 1);
    check_spec(SPARSE_NO_LABEL, 1, store, 1, 1);
    dpp_cache_store_close(store);
}

static void test_disk_restart_and_stale(void **state)
{
    (void)state;
    dpp_cache_store_config_t cc = {.dir = cache_dir, .disk_bytes = 1ull << 30};
    dpp_cache_store_t *store;
    char err[256];
    assert_int_equal(dpp_cache_store_open(&store, &cc, err, sizeof err), 0);
    check_spec(WITH_LABEL, 1, store, 2, 1);
    dpp_cache_store_close(store);

    /* a restart: the entries are found on disk */
    assert_int_equal(dpp_cache_store_open(&store, &cc, err, sizeof err), 0);
    dpp_task_t t[8];
    const char *spec = spec_of(WITH_LABEL, 1, 0);
    ranges(t, 7, spec);
    dpp_pipeline_config_t fresh = {.threads = 1}, cached = {.threads = 1, .cache = store};
    got_t want = {0}, got = {0};
    run(&fresh, &t[1], 5, &want);
    assert_int_equal(run(&cached, &t[1], 5, &got).cache_tier, 2);
    assert_same(&want, &got);
    got_free(&got);

    /* the file is written again (same bytes, new ctime): stale, made anew */
    sleep(1); /* a ctime the entry cannot have */
    assert_int_equal(write_table(), 0);
    assert_int_equal(run(&cached, &t[1], 5, &got).cache_tier, 0);
    assert_same(&want, &got);
    got_free(&got);
    assert_int_equal(run(&cached, &t[1], 5, &got).cache_tier, 2);
    assert_same(&want, &got);
    got_free(&got);
    got_free(&want);
    dpp_cache_store_close(store);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ram),
        cmocka_unit_test(test_disk_restart_and_stale),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
