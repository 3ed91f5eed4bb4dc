// SPDX-License-Identifier: Apache-2.0
// The text source (src/worker/source_text.c) within the worker's bounds: a
// document whose SentencePiece normalization would grow it past what the
// worker takes (--max-record-mb) is rejected, named by file and position,
// in the index task and the split task alike, and the documents around it
// make their sequences; under on_corrupt "fail" the split fails naming it.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "dpp/error.h"
#include "format/format.h"
#include "test_tmpdir.h"
#include "text/spm_model.h"
#include "worker/pipeline.h"

static char tmpdir[PATH_MAX];

static void write_file(const char *rel, const void *data, size_t n)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    (void)state;
    if (test_tmpdir_make(tmpdir, "source_text") != 0)
        return -1;
    char t[PATH_MAX + 8];
    snprintf(t, sizeof t, "%s/t", tmpdir);
    if (mkdir(t, 0700) != 0)
        return -1;
    /* "x" normalizes to 16,000 "a"s: a line of 200 "x"s to 3.2 MB */
    static char rep[16000];
    memset(rep, 'a', sizeof rep);
    static uint8_t map[17000];
    size_t maplen = spm_charsmap_one(map, sizeof map, 'x', rep, sizeof rep);
    static spm_w_t w;
    spm_model(&w, &(spm_opts_t){.model_type = 1, .byte_fallback = 1, .normalizer = "grow",
                                .charsmap = map, .charsmap_len = maplen});
    write_file("t/_tok.model", w.b, w.n);
    char x200[201], lines[512];
    memset(x200, 'x', 200);
    x200[200] = '\0';
    int n = snprintf(lines, sizeof lines, "{\"text\": \"the ab\"}\n{\"text\": \"%s\"}\n"
                                          "{\"text\": \"ab the\"}\n",
                     x200);
    write_file("t/f.jsonl", lines, (size_t)n);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static int emit(void *arg, dpp_out_block_t *b)
{
    *(uint64_t *)arg += b->rows;
    dpp_out_block_free(b);
    return 0;
}

static void run(const char *on_corrupt)
{
    char path[PATH_MAX + 32], spec[1024];
    snprintf(path, sizeof path, "%s/t/f.jsonl", tmpdir);
    snprintf(spec, sizeof spec,
             "{\"table\": \"t\", \"format\": \"jsonl\", \"batch_size\": 2, \"split_rows\": 100,"
             " \"max_reject_ratio\": 1, \"on_corrupt\": \"%s\","
             " \"tokenizer\": {\"file\": \"t/_tok.model\"}, \"sequence\": {\"length\": 4, \"eos\": null}}",
             on_corrupt);
    /* the worker's --max-record-mb 1 */
    dpp_pipeline_config_t cfg = {.threads = 1, .reader = {.max_record = 1u << 20}};
    dpp_task_t it = {.kind = DPP_TASK_INDEX,
                     .path = path,
                     .rel_path = "f.jsonl",
                     .spec_json = spec,
                     .split_rows = 100,
                     .format = DPP_FORMAT_JSONL,
                     .text = 1};
    dpp_split_result_t ires;
    int fail = strcmp(on_corrupt, "fail") == 0;
    static const char why[] =
        "file f.jsonl, line at offset 19: its 200 bytes of text normalize to more than 2097152 "
        "bytes (the model's normalization grows it past what the tokenizer takes: twice the "
        "worker's --max-record-mb)";
    int rc = dpp_pipeline_run_index(&cfg, &it, &ires);
    if (fail) {
        assert_int_equal(rc, DPP_ETOOBIG);
        if (strstr(ires.message, why) == NULL)
            fail_msg("the index's error does not name the document: %s", ires.message);
        free(ires.bounds);
        return;
    }
    if (rc != 0)
        fail_msg("index: %s", ires.message);
    /* "▁the ▁ab" and "▁ab ▁the": 2 ids each and an eos-less 4-token pack */
    assert_int_equal(ires.records, 1);
    /* one range: (its first line's offset, 0 sequences before), (the end, 1) */
    assert_int_equal(ires.nbounds, 4);
    dpp_task_t t = {.kind = DPP_TASK_SPLIT,
                    .path = path,
                    .rel_path = "f.jsonl",
                    .spec_json = spec,
                    .byte_start = ires.bounds[0],
                    .byte_end = ires.bounds[2],
                    .record_start = 0,
                    .record_count = 1,
                    .record_take = 1,
                    .range_records = 1,
                    .format = DPP_FORMAT_JSONL,
                    .text = 1};
    dpp_reader_t *reader;
    assert_int_equal(dpp_reader_new(&reader, &cfg.reader), 0);
    ZSTD_CCtx *z = ZSTD_createCCtx();
    dpp_split_scratch_t scratch = {0};
    uint64_t rows = 0;
    dpp_split_result_t res;
    rc = dpp_pipeline_run_split(&cfg, reader, z, &scratch, 0, &t, emit, &rows, &res, NULL);
    if (rc != 0)
        fail_msg("split: %s", res.message);
    assert_int_equal(res.rows, 1);
    assert_int_equal(rows, 1);
    assert_int_equal(res.rejects.too_big, 1);
    assert_string_equal(res.reject_detail, why);
    free(ires.bounds);
    dpp_split_scratch_free(&scratch);
    ZSTD_freeCCtx(z);
    dpp_reader_free(reader);
}

static void test_normalization_growth(void **state)
{
    (void)state;
    run("skip");
    run("fail");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalization_growth),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
