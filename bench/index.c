// SPDX-License-Identifier: Apache-2.0
// bench_index: the worker's index tasks in-process, one thread: what planning
// a table of many files costs per file on a worker (the footer of a Parquet
// file, the .idx sidecar of a TFRecord file). Beside it, in the same run, the floor any reader pays: open, fstat,
// one read of the file's tail (16 KiB) and close. Files come from the page
// cache (a warm-up round first). Prints the median of 3 rounds.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "format/format.h"
#include "worker/pipeline.h"
#include "worker/reader.h"

#define ROUNDS 3

typedef struct table {
    char **paths;
    size_t n, cap;
} table_t;

static int ends_with(const char *s, const char *ext)
{
    size_t n = strlen(s), k = strlen(ext);
    return n > k && s[n - k - 1] == '.' && strcmp(s + n - k, ext) == 0;
}

static void list_files(const char *dir, const char *ext, table_t *t)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || e->d_name[0] == '_')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            list_files(path, ext, t);
        } else if (S_ISREG(st.st_mode) && ends_with(e->d_name, ext)) {
            if (t->n == t->cap)
                t->paths = realloc(t->paths, (t->cap = t->cap ? 2 * t->cap : 1024) * sizeof(char *));
            t->paths[t->n++] = strdup(path);
        }
    }
    closedir(d);
}

/* Every file's index tasks, in batches as a pipeline thread takes them.
 * Returns seconds; *records the records counted. */
static double run_index(const table_t *t, dpp_format_t format, unsigned split_rows,
                        dpp_reader_t *reader, uint64_t *records)
{
    dpp_pipeline_config_t cfg = {.threads = 1};
    dpp_task_t task[DPP_PIPELINE_INDEX_BATCH];
    dpp_split_result_t res[DPP_PIPELINE_INDEX_BATCH];
    const dpp_task_t *tp[DPP_PIPELINE_INDEX_BATCH];
    dpp_split_result_t *rp[DPP_PIPELINE_INDEX_BATCH];
    *records = 0;
    double t0 = bench_now();
    for (size_t i = 0; i < t->n; i += DPP_PIPELINE_INDEX_BATCH) {
        size_t nb = t->n - i < DPP_PIPELINE_INDEX_BATCH ? t->n - i : DPP_PIPELINE_INDEX_BATCH;
        for (size_t k = 0; k < nb; k++) {
            task[k] = (dpp_task_t){.kind = DPP_TASK_INDEX,
                                   .path = t->paths[i + k],
                                   .rel_path = t->paths[i + k],
                                   .format = format,
                                   .split_rows = split_rows};
            memset(&res[k], 0, sizeof res[k]);
            tp[k] = &task[k];
            rp[k] = &res[k];
        }
        dpp_pipeline_run_index_many(&cfg, reader, tp, rp, nb);
        for (size_t k = 0; k < nb; k++) {
            if (res[k].error) {
                fprintf(stderr, "bench_index: %s: %s\n", t->paths[i + k], res[k].message);
                exit(1);
            }
            *records += res[k].records;
            free(res[k].bounds);
        }
    }
    return bench_now() - t0;
}

/* open, fstat, pread of the last 16 KiB, close: the floor of any footer read. */
static double run_floor(const table_t *t)
{
    static char buf[16 << 10];
    double t0 = bench_now();
    for (size_t i = 0; i < t->n; i++) {
        int fd = open(t->paths[i], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            perror(t->paths[i]);
            exit(1);
        }
        off_t len = st.st_size < (off_t)sizeof buf ? st.st_size : (off_t)sizeof buf;
        if (pread(fd, buf, (size_t)len, st.st_size - len) != len) {
            perror(t->paths[i]);
            exit(1);
        }
        close(fd);
    }
    return bench_now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *format_name = "parquet";
    unsigned split_rows = 100000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--table") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format_name = argv[++i];
        else if (strcmp(argv[i], "--split-rows") == 0 && i + 1 < argc)
            split_rows = (unsigned)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: bench_index --table DIR [--format parquet|tfrecord] "
                    "[--split-rows N (default 100000)]\n");
            return 2;
        }
    }
    /* a text session's index task tokenizes: bench/text.sh measures that */
    dpp_format_t format = strcmp(format_name, "tfrecord") == 0  ? DPP_FORMAT_TFRECORD
                          : strcmp(format_name, "parquet") == 0 ? DPP_FORMAT_PARQUET
                                                                : (dpp_format_t)-1;
    if (dir == NULL || format == (dpp_format_t)-1 || split_rows == 0) {
        fprintf(stderr, "bench_index: --table DIR is required; formats: parquet, tfrecord\n");
        return 2;
    }
    table_t t = {0};
    list_files(dir, format_name, &t);
    if (t.n == 0) {
        fprintf(stderr, "bench_index: no *.%s file under %s\n", format_name, dir);
        return 1;
    }
    dpp_reader_config_t rcfg = {0};
    dpp_reader_t *reader = NULL;
    if (dpp_reader_new(&reader, &rcfg) != 0) {
        fprintf(stderr, "bench_index: no reader\n");
        return 1;
    }
    uint64_t records = 0;
    run_index(&t, format, split_rows, reader, &records); /* warm-up: the page cache */
    double idx[ROUNDS], flo[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        idx[r] = run_index(&t, format, split_rows, reader, &records);
        flo[r] = run_floor(&t);
    }
    qsort(idx, ROUNDS, sizeof *idx, cmp_double);
    qsort(flo, ROUNDS, sizeof *flo, cmp_double);
    double ix = idx[ROUNDS / 2], fl = flo[ROUNDS / 2];
    printf("bench_index: %zu %s files, %llu records, one thread (%s), median of %d\n", t.n,
           format_name, (unsigned long long)records,
           dpp_reader_uses_uring(reader) ? "io_uring" : "pread", ROUNDS);
    printf("  index tasks:                 %8.1f us/file  %9.0f files/s\n", ix * 1e6 / (double)t.n,
           (double)t.n / ix);
    printf("  open+fstat+pread tail+close: %8.1f us/file  %9.0f files/s  (index = %.2fx this)\n",
           fl * 1e6 / (double)t.n, (double)t.n / fl, ix / fl);
    dpp_reader_free(reader);
    for (size_t i = 0; i < t.n; i++)
        free(t.paths[i]);
    free(t.paths);
    return 0;
}
