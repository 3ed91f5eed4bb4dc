// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: a text file through the text source a worker runs
// (src/worker/source_text.c over text/docs.c, format/jsonl.c, text/bpe.c,
// text/pack.c), as the master would use it: the index task first, then
// every range it returns as a split task. The first input byte picks the
// packing (concat or best_fit, with or without bos), the sequence length (1
// to 32) and whether the file is a .zst (the rest of the input is then the
// compressed stream as it is), the second split_rows (1 to 8, bits 0-2) and
// the format (bits 3-4: JSON Lines twice as often as plain text a document
// a line, or a file read whole). The rest is the file. Checked: no crash; the
// index result is one the master's planner accepts; each split makes exactly
// as many sequences as the index counted for its range (the count pass and
// the real one agree), or fails with a sentence naming the file; blocks
// hold exactly the rows the split reports.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "dpp/error.h"
#include "format/format.h"
#include "fuzz_util.h"
#include "master/planner.h"
#include "worker/pipeline.h"

static char root[PATH_MAX];

static void remove_dir(void)
{
    static const char *const files[] = {"t/f.jsonl", "t/f.jsonl.zst", "t/f.txt", "t/f.txt.zst",
                                        "t/_tok.tiktoken"};
    char p[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, files[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/t", root);
    rmdir(p);
    rmdir(root);
}

static void write_file(const char *name, const uint8_t *data, size_t size)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", root, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0, "open %s: %s", p, strerror(errno));
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        FUZZ_CHECK(n > 0, "write %s: %s", p, strerror(errno));
        data += n;
        size -= (size_t)n;
    }
    FUZZ_CHECK(close(fd) == 0, "close %s", p);
}

/* The data root, its table folder and a small tokenizer: the 256 bytes and
 * a few merges ("th", "the", " t", " th", " the", "in", "ing"). */
static void setup(void)
{
    static const char *const bases[] = {"/dev/shm", "/tmp"};
    const char *env = getenv("TMPDIR");
    for (int i = -1; i < 2 && !root[0]; i++) {
        const char *base = i < 0 ? env : bases[i];
        if (base == NULL)
            continue;
        snprintf(root, sizeof root, "%s/dpp-fuzz-text-XXXXXX", base);
        if (mkdtemp(root) == NULL)
            root[0] = '\0';
    }
    FUZZ_CHECK(root[0], "no directory for the input file");
    char p[PATH_MAX + 8];
    snprintf(p, sizeof p, "%s/t", root);
    FUZZ_CHECK(mkdir(p, 0700) == 0, "mkdir %s", p);
    static const char *const merges[] = {"dGg=", "dGhl", "IHQ=", "IHRo", "IHRoZQ==", "aW4=",
                                         "aW5n"};
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char ranks[8192];
    size_t n = 0;
    for (int b = 0; b < 256; b++) {
        unsigned v = (unsigned)b << 16;
        n += (size_t)snprintf(ranks + n, sizeof ranks - n, "%c%c== %d\n", b64[v >> 18],
                              b64[(v >> 12) & 63], b);
    }
    for (int m = 0; m < 7; m++)
        n += (size_t)snprintf(ranks + n, sizeof ranks - n, "%s %d\n", merges[m], 256 + m);
    write_file("t/_tok.tiktoken", (const uint8_t *)ranks, n);
    atexit(remove_dir);
}

typedef struct sink {
    uint64_t rows;
} sink_t;

static int emit(void *arg, dpp_out_block_t *b)
{
    ((sink_t *)arg)->rows += b->rows;
    dpp_out_block_free(b);
    return 0;
}

static void check_error(const dpp_split_result_t *res, const char *name)
{
    FUZZ_CHECK(strstr(res->message, name) != NULL, "the error does not name the file: %s",
               res->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!root[0])
        setup();
    if (size < 2)
        return 0;
    uint8_t mode = data[0];
    int best_fit = mode & 1, bos = (mode >> 1) & 1, zst = (mode >> 7) & 1;
    unsigned length = 1 + ((mode >> 2) & 31);
    unsigned split_rows = 1 + (data[1] & 7), kind = (data[1] >> 3) & 3;
    int plain = kind >= 2, whole = kind == 3;
    data += 1;
    size -= 1;
    const char *name = plain ? (zst ? "f.txt.zst" : "f.txt") : zst ? "f.jsonl.zst" : "f.jsonl";
    char rel[32], path[PATH_MAX + 32];
    snprintf(rel, sizeof rel, "t/%s", name);
    write_file(rel, data + 1, size - 1);
    snprintf(path, sizeof path, "%s/t/%s", root, name);
    char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"table\": \"t\", \"format\": \"%s\", \"batch_size\": 3, \"split_rows\": %u,"
             " \"max_reject_ratio\": 1, \"text\": %s,"
             " \"tokenizer\": {\"file\": \"t/_tok.tiktoken\", \"pattern\": \"cl100k_base\","
             " \"specials\": {\"<|endoftext|>\": 263, \"<s>\": 264}},"
             " \"sequence\": {\"length\": %u, \"pack\": \"%s\"%s}}",
             plain ? "text" : "jsonl", split_rows,
             plain ? (whole ? "{\"unit\": \"file\"}" : "{\"min_bytes\": 2}")
                   : "{\"where\": {\"lang\": \"en\"}}",
             length, best_fit ? "best_fit\", \"window\": 3" : "concat",
             bos ? ", \"bos\": \"<s>\"" : "");
    dpp_pipeline_config_t cfg = {.threads = 1};
    dpp_task_t it = {.kind = DPP_TASK_INDEX,
                     .path = path,
                     .rel_path = (char *)name,
                     .spec_json = spec,
                     .split_rows = split_rows,
                     .format = plain ? DPP_FORMAT_TEXT : DPP_FORMAT_JSONL,
                     .text = 1};
    dpp_split_result_t ires;
    if (dpp_pipeline_run_index(&cfg, &it, &ires) != 0) {
        check_error(&ires, name);
        free(ires.bounds);
        return 0;
    }
    char why[256];
    FUZZ_CHECK(dpp_planner_text.check(ires.records, ires.bounds, ires.nbounds, split_rows, why,
                                       sizeof why),
               "the planner refuses the index: %s", why);
    size_t nr = dpp_planner_text.nranges(ires.records, ires.bounds, ires.nbounds);
    dpp_reader_config_t rcfg = {0};
    dpp_reader_t *reader;
    FUZZ_CHECK(dpp_reader_new(&reader, &rcfg) == 0, "reader");
    ZSTD_CCtx *z = ZSTD_createCCtx();
    dpp_split_scratch_t scratch = {0};
    for (size_t b = 0; b < nr; b++) {
        dpp_range_t r;
        dpp_planner_text.range(ires.records, ires.bounds, ires.nbounds, split_rows, b, &r);
        dpp_task_t t = {.kind = DPP_TASK_SPLIT,
                        .path = path,
                        .rel_path = (char *)name,
                        .spec_json = spec,
                        .byte_start = r.byte_start,
                        .byte_end = r.byte_end,
                        .record_start = r.record_start,
                        .record_count = r.record_count,
                        .record_take = r.record_count,
                        .range_records = r.record_count,
                        .format = plain ? DPP_FORMAT_TEXT : DPP_FORMAT_JSONL,
                        .text = 1};
        sink_t sink = {0};
        dpp_split_result_t res;
        int rc = dpp_pipeline_run_split(&cfg, reader, z, &scratch, 0, &t, emit, &sink, &res, NULL);
        if (rc != 0) {
            check_error(&res, name);
            continue;
        }
        FUZZ_CHECK(res.rows == r.record_count, "range %zu: the index counted %llu sequences, the "
                   "split made %llu", b, (unsigned long long)r.record_count,
                   (unsigned long long)res.rows);
        FUZZ_CHECK(sink.rows == res.rows, "blocks hold %llu rows, the split says %llu",
                   (unsigned long long)sink.rows, (unsigned long long)res.rows);
    }
    free(ires.bounds);
    dpp_split_scratch_free(&scratch);
    ZSTD_freeCCtx(z);
    dpp_reader_free(reader);
    return 0;
}
