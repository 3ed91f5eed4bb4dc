// SPDX-License-Identifier: Apache-2.0
// bench_pipeline: the worker's per-split path in-process (no network, no
// threads): read + CRC, decode, filter + transform, encode, compress, on a
// generated Criteo table from page cache with the spec of examples/criteo.json.
// Prints rows/s, input MB/s and the share of time per stage. --format parquet
// runs the same over the table as Parquet (dpp-gen --format parquet: zstd,
// dictionary-encoded ids), split by the Parquet source's own index (a range
// per row group, or per --split-rows rows). The stage
// shares come from runs that stop after each stage (no clocks in the loop),
// the CRC share from the reader's own timing.
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "base/util.h"
#include "format/format.h"
#include "format/tfindex.h"
#include "worker/pipeline.h"
#include "worker/reader.h"

#define ROUNDS 3

/* A range of a file, as the master leases it (--split-rows). */
typedef struct range {
    size_t file;
    uint64_t byte_start, byte_end, record_start, record_count;
} range_t;

typedef struct table {
    char **paths, **rels;
    uint64_t *sizes;
    size_t n;
    uint64_t bytes;
    range_t *ranges; /* NULL: each file whole */
    size_t nranges;
} table_t;

static const char *format = "tfrecord"; /* --format */

/* Cuts every Parquet file into the ranges its index task gives. */
static void cut_parquet_ranges(table_t *t, unsigned long split_rows)
{
    dpp_pipeline_config_t cfg = {.threads = 1};
    for (size_t i = 0; i < t->n; i++) {
        dpp_task_t task = {.kind = DPP_TASK_INDEX,
                           .path = t->paths[i],
                           .rel_path = t->rels[i],
                           .format = DPP_FORMAT_PARQUET,
                           .split_rows = (uint32_t)split_rows};
        dpp_split_result_t res = {0};
        if (dpp_pipeline_run_index(&cfg, &task, &res) != 0 || res.rejects.corrupt) {
            fprintf(stderr, "bench_pipeline: index %s: %s%s\n", t->paths[i], res.message,
                    res.reject_detail);
            exit(1);
        }
        for (size_t b = 0; b + 1 < res.nbounds; b++) {
            t->ranges = realloc(t->ranges, (t->nranges + 1) * sizeof *t->ranges);
            t->ranges[t->nranges++] =
                (range_t){i, 0, 0, res.bounds[b], res.bounds[b + 1] - res.bounds[b]};
        }
        free(res.bounds);
    }
}

/* Cuts every file into ranges of split_rows records from a framing scan,
 * as index tasks and the master's plan do. */
static void cut_ranges(table_t *t, unsigned long split_rows)
{
    if (strcmp(format, "parquet") == 0) {
        cut_parquet_ranges(t, split_rows ? split_rows : 65536);
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        dpp_tfindex_t idx;
        dpp_tfindex_scan_result_t tail;
        char err[256];
        if (dpp_tfindex_scan(t->paths[i], 16u << 20, &idx, &tail, err, sizeof err) != 0) {
            fprintf(stderr, "bench_pipeline: index %s: %s\n", t->paths[i], err);
            exit(1);
        }
        for (size_t k = 0; k < idx.n; k += split_rows) {
            size_t last = k + split_rows < idx.n ? k + split_rows : idx.n;
            t->ranges = realloc(t->ranges, (t->nranges + 1) * sizeof *t->ranges);
            t->ranges[t->nranges++] = (range_t){
                i, idx.offsets[k], idx.offsets[last - 1] + idx.sizes[last - 1], k, last - k};
        }
        dpp_tfindex_close(&idx);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.tfrecord file one level below dir (the ds=... partitions). */
static void list_table(const char *dir, table_t *t)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        exit(1);
    }
    size_t cap = 64;
    t->paths = calloc(cap, sizeof *t->paths);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *p = opendir(sub);
        if (p == NULL)
            continue;
        struct dirent *f;
        while ((f = readdir(p)) != NULL) {
            size_t len = strlen(f->d_name), ext = strlen(format) + 1;
            if (len < ext || f->d_name[len - ext] != '.' ||
                strcmp(f->d_name + len - ext + 1, format) != 0)
                continue;
            if (t->n == cap)
                t->paths = realloc(t->paths, (cap *= 2) * sizeof *t->paths);
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            t->paths[t->n++] = strdup(path);
        }
        closedir(p);
    }
    closedir(d);
    qsort(t->paths, t->n, sizeof *t->paths, cmp_str);
    t->rels = calloc(t->n, sizeof *t->rels);
    t->sizes = calloc(t->n, sizeof *t->sizes);
    for (size_t i = 0; i < t->n; i++) {
        struct stat st;
        stat(t->paths[i], &st);
        t->sizes[i] = (uint64_t)st.st_size;
        t->bytes += t->sizes[i];
        t->rels[i] = t->paths[i] + strlen(dir) + 1;
    }
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Replaces the spec's compression with `mode` (the spec keeps its key order
 * when parsed and normalised, but plain text surgery is enough here). */
static char *with_compression(const char *spec, const char *mode)
{
    const char *brace = strchr(spec, '{');
    size_t n = strlen(spec) + 96;
    char *out = malloc(n);
    snprintf(out, n, "{\"compression\": \"%s\", \"format\": \"%s\",%s", mode, format, brace + 1);
    return out;
}

typedef struct sink {
    uint64_t blocks, bytes, raw_bytes;
} sink_t;

static int emit(void *arg, dpp_out_block_t *b)
{
    sink_t *s = arg;
    s->blocks++;
    s->bytes += b->len;
    s->raw_bytes += b->raw_size;
    dpp_out_block_free(b);
    return 0;
}

typedef struct run {
    double secs;
    uint64_t rows, crc_ns, out_bytes, raw_bytes;
} run_t;

static run_t run_once(const table_t *t, const char *spec, dpp_stage_t stop, int time_crc)
{
    dpp_reader_config_t rc = {.time_crc = time_crc};
    dpp_reader_t *reader;
    if (dpp_reader_new(&reader, &rc) != 0) {
        fprintf(stderr, "bench_pipeline: reader_new failed\n");
        exit(1);
    }
    ZSTD_CCtx *z = ZSTD_createCCtx();
    dpp_pipeline_config_t cfg = {.threads = 1, .reader = rc, .stop_after = stop};
    sink_t sink = {0};
    run_t r = {0};
    uint64_t t0 = dpp_now_ns();
    dpp_stage_times_t times = {0}; /* collected as the worker does */
    dpp_split_scratch_t scratch = {0};
    size_t ntasks = t->ranges ? t->nranges : t->n;
    for (size_t i = 0; i < ntasks; i++) {
        dpp_task_t task = {.kind = DPP_TASK_SPLIT,
                           .path = t->paths[i],
                           .rel_path = t->rels[i],
                           .spec_json = (char *)spec,
                           .byte_end = UINT64_MAX};
        if (t->ranges) {
            const range_t *rg = &t->ranges[i];
            task.path = t->paths[rg->file];
            task.rel_path = t->rels[rg->file];
            task.byte_start = rg->byte_start;
            task.byte_end = rg->byte_end;
            task.record_start = rg->record_start;
            task.record_count = task.record_take = task.range_records = rg->record_count;
        }
        dpp_split_result_t res;
        if (dpp_pipeline_run_split(&cfg, reader, z, &scratch, 0, &task, emit, &sink, &res,
                                   &times) != 0) {
            fprintf(stderr, "bench_pipeline: %s\n", res.message);
            exit(1);
        }
        r.rows += res.rows + res.filtered;
    }
    r.secs = (double)(dpp_now_ns() - t0) / 1e9;
    dpp_reader_stats_t st;
    dpp_reader_get_stats(reader, &st);
    r.crc_ns = st.crc_ns;
    r.out_bytes = sink.bytes;
    r.raw_bytes = sink.raw_bytes;
    ZSTD_freeCCtx(z);
    dpp_reader_free(reader);
    dpp_split_scratch_free(&scratch);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of ROUNDS runs; *last keeps the last run's counters. */
static double median_run(const table_t *t, const char *spec, dpp_stage_t stop, run_t *last)
{
    double secs[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        *last = run_once(t, spec, stop, 0);
        secs[i] = last->secs;
    }
    qsort(secs, ROUNDS, sizeof secs[0], cmp_double);
    return secs[ROUNDS / 2];
}

int main(int argc, char **argv)
{
    const char *table_dir = NULL;
    const char *spec_path = DPP_SOURCE_DIR "/examples/criteo.json";
    unsigned long rows = 1000000;
    int once = 0;
    unsigned long split_rows = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--table") == 0 && i + 1 < argc)
            table_dir = argv[++i];
        else if (strcmp(argv[i], "--spec") == 0 && i + 1 < argc)
            spec_path = argv[++i];
        else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
            rows = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--once") == 0)
            once = 1;
        else if (strcmp(argv[i], "--split-rows") == 0 && i + 1 < argc)
            split_rows = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "tfrecord") == 0 || strcmp(argv[i + 1], "parquet") == 0))
            format = argv[++i];
        else {
            fprintf(stderr,
                    "usage: bench_pipeline [--table DIR] [--spec SPEC.json] [--rows N] [--once]\n"
                    "                      [--split-rows N] [--format tfrecord|parquet]\n"
                    "Without --table, generates an N-row (default 1,000,000) table with\n"
                    "dpp-gen into a temporary directory first. --once runs the whole\n"
                    "path without compression once (for callgrind's instruction counts).\n"
                    "--split-rows N: run ranges of N records, as leased splits (the\n"
                    "files are scanned for record offsets first); default: whole files\n"
                    "(Parquet: always ranges, a row group each by default).\n");
            return 2;
        }
    }
    char tmp[] = "/tmp/dpp-bench-pipeline.XXXXXX";
    char gen_dir[4200];
    if (table_dir == NULL) {
        if (mkdtemp(tmp) == NULL) {
            perror("mkdtemp");
            return 1;
        }
        snprintf(gen_dir, sizeof gen_dir, "%s/criteo", tmp);
        char cmd[8192];
        snprintf(cmd, sizeof cmd,
                 "%s/dpp-gen --rows %lu --shards 4 --partitions 2 --seed 1 --format %s --out %s "
                 ">/dev/null",
                 DPP_BINARY_DIR, rows, format, gen_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench_pipeline: %s failed\n", cmd);
            return 1;
        }
        table_dir = gen_dir;
    }
    table_t t = {0};
    list_table(table_dir, &t);
    if (t.n == 0) {
        fprintf(stderr, "bench_pipeline: no .%s files under %s/*/\n", format, table_dir);
        return 1;
    }
    if (split_rows || strcmp(format, "parquet") == 0)
        cut_ranges(&t, split_rows);
    char *text = read_text(spec_path);
    char *spec_off = with_compression(text, "off");
    char *spec_zstd = with_compression(text, "zstd");

    if (once) {
        run_t r = run_once(&t, spec_off, DPP_STAGE_ALL, 0);
        printf("bench_pipeline --once: %" PRIu64 " rows in %.3f s\n", r.rows, r.secs);
        return 0;
    }
    run_once(&t, spec_off, DPP_STAGE_READ, 0); /* warm the page cache */
    run_t r_read, r_decode, r_transform, r_all, r_zstd;
    double s_read = median_run(&t, spec_off, DPP_STAGE_READ, &r_read);
    double s_decode = median_run(&t, spec_off, DPP_STAGE_DECODE, &r_decode);
    double s_transform = median_run(&t, spec_off, DPP_STAGE_TRANSFORM, &r_transform);
    double s_all = median_run(&t, spec_off, DPP_STAGE_ALL, &r_all);
    double s_zstd = median_run(&t, spec_zstd, DPP_STAGE_ALL, &r_zstd);
    run_t r_crc = run_once(&t, spec_off, DPP_STAGE_READ, 1);
    double crc = (double)r_crc.crc_ns / 1e9;
    if (crc > s_read)
        crc = s_read;

    double mb = (double)t.bytes / 1e6;
    printf("bench_pipeline: %" PRIu64
           " rows, %zu files, %.1f MB, spec %s, 1 thread, median of %d\n",
           r_all.rows, t.n, mb, spec_path, ROUNDS);
    printf("without compression: %10.0f rows/s  %8.1f MB/s input  (%.3f s)\n",
           (double)r_all.rows / s_all, mb / s_all, s_all);
    printf("with zstd (level 1): %10.0f rows/s  %8.1f MB/s input  (%.3f s), blocks %.1f MB -> "
           "%.1f MB\n",
           (double)r_zstd.rows / s_zstd, mb / s_zstd, s_zstd, (double)r_zstd.raw_bytes / 1e6,
           (double)r_zstd.out_bytes / 1e6);
    printf("share of time (of the run with zstd, %.3f s):\n", s_zstd);
    struct {
        const char *name;
        double secs;
    } stages[] = {
        {"read", s_read - crc},          {"crc", crc},
        {"decode", s_decode - s_read},   {"transform", s_transform - s_decode},
        {"encode", s_all - s_transform}, {"compress", s_zstd - s_all},
    };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        printf("  %-10s %6.1f%%  %.3f s\n", stages[i].name, 100.0 * stages[i].secs / s_zstd,
               stages[i].secs);
    if (table_dir == gen_dir) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_pipeline: could not remove %s\n", tmp);
    }
    return 0;
}
