/* SPDX-License-Identifier: Apache-2.0 */
/* bench_reader: MB/s of the streaming TFRecord reader (src/worker/reader.c)
 * over a grid of chunk sizes and depths, io_uring and pread, buffered and
 * O_DIRECT, with the file evicted from the page cache before every run
 * (cold) or kept in it (warm). Prints figures; checks only that every run
 * sees the same records. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/log.h"
#include "base/util.h"
#include "dpp/error.h"
#include "worker/reader.h"

#define DEFAULT_MB 1024
#define DEFAULT_RECORD 700 /* about a dpp-gen Criteo row */

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes about mb MiB of records of 1..2*rec-1 bytes (mean rec). */
static int make_file(const char *path, uint64_t mb, size_t rec)
{
    uint64_t total = mb << 20, done = 0, state = 42;
    size_t cap = 1u << 20, used = 0;
    uint8_t *buf = malloc(cap + 2 * rec + 16);
    FILE *f = fopen(path, "wb");
    if (!buf || !f) {
        fprintf(stderr, "bench_reader: %s: %s\n", path, strerror(errno));
        free(buf);
        if (f)
            fclose(f);
        return -1;
    }
    while (done < total) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = 1 + (size_t)((state >> 33) % (2 * rec - 1));
        uint8_t *p = buf + used;
        put_le(p, len, 8);
        put_le(p + 8, dpp_crc32c_mask(dpp_crc32c(0, p, 8)), 4);
        for (size_t i = 0; i < len; i++)
            p[12 + i] = (uint8_t)(state >> (i % 56));
        put_le(p + 12 + len, dpp_crc32c_mask(dpp_crc32c(0, p + 12, len)), 4);
        used += len + 16;
        done += len + 16;
        if (used >= cap) {
            if (fwrite(buf, 1, used, f) != used)
                break;
            used = 0;
        }
    }
    int bad = fwrite(buf, 1, used, f) != used;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    free(buf);
    if (bad)
        fprintf(stderr, "bench_reader: write %s: %s\n", path, strerror(errno));
    return bad ? -1 : 0;
}

static void evict(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

typedef struct run {
    double sec;
    uint64_t records, sum;
    dpp_reader_stats_t st;
    int uring;
} run_t;

static int run_once(const char *path, const dpp_reader_config_t *cfg, int cold, run_t *out)
{
    dpp_reader_t *r;
    int rc = dpp_reader_new(&r, cfg);
    if (rc)
        return rc;
    if (cold)
        evict(path);
    uint64_t t0 = dpp_now_ns();
    rc = dpp_reader_open(r, path, 0, UINT64_MAX);
    memset(out, 0, sizeof *out);
    while (rc == 0) {
        const uint8_t *p;
        size_t len;
        uint64_t off;
        int n = dpp_reader_next(r, &p, &len, &off);
        if (n == 0)
            break;
        if (n < 0) {
            fprintf(stderr, "bench_reader: %s at %" PRIu64 "\n", dpp_strerror(n), off);
            rc = n;
            break;
        }
        out->records++;
        out->sum += len + (len ? p[len - 1] : 0);
    }
    out->sec = (double)(dpp_now_ns() - t0) * 1e-9;
    dpp_reader_get_stats(r, &out->st);
    out->uring = dpp_reader_uses_uring(r);
    dpp_reader_free(r);
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_reader [--file PATH] [--make-mb N] [--record BYTES] [--rounds N]\n"
            "                    [--chunks K,K,...] [--depths D,D,...] [--warm] [--time-crc]\n"
            "Without --file, writes a file of N MiB (default %d) of records of mean size\n"
            "BYTES (default %d) to ./bench_reader.tfrecord and removes it afterwards.\n"
            "Chunks are in KiB. Every run reads the whole file; cold runs (default) evict\n"
            "it from the page cache first. Prints the median of the rounds (default 3).\n",
            DEFAULT_MB, DEFAULT_RECORD);
}

static size_t parse_list(const char *s, unsigned long *out, size_t max)
{
    size_t n = 0;
    char *end;
    while (*s && n < max) {
        out[n++] = strtoul(s, &end, 10);
        if (*end != ',' && *end != '\0')
            return 0;
        s = *end ? end + 1 : end;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *file = NULL;
    uint64_t make_mb = DEFAULT_MB;
    size_t rec = DEFAULT_RECORD;
    unsigned rounds = 3;
    int warm = 0, time_crc = 0;
    unsigned long chunks[16] = {64, 256, 1024, 4096}, depths[16] = {1, 2, 4, 8, 16};
    size_t nchunks = 4, ndepths = 5;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--warm") == 0) {
            warm = 1;
        } else if (strcmp(a, "--time-crc") == 0) {
            time_crc = 1;
        } else if (v && strcmp(a, "--file") == 0) {
            file = v, i++;
        } else if (v && strcmp(a, "--make-mb") == 0) {
            make_mb = strtoull(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--record") == 0) {
            rec = strtoul(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--rounds") == 0) {
            rounds = (unsigned)strtoul(v, NULL, 10), i++;
        } else if (v && strcmp(a, "--chunks") == 0) {
            nchunks = parse_list(v, chunks, 16), i++;
        } else if (v && strcmp(a, "--depths") == 0) {
            ndepths = parse_list(v, depths, 16), i++;
        } else {
            usage();
            return 2;
        }
    }
    if (!nchunks || !ndepths || !rec || !make_mb || rounds == 0 || rounds > 15) {
        usage();
        return 2;
    }
    dpp_log_set_level(DPP_LOG_ERROR);
    const char *path = file ? file : "bench_reader.tfrecord";
    if (!file && make_file(path, make_mb, rec) != 0)
        return 1;
    int fd = open(path, O_RDONLY);
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (fd >= 0)
        close(fd);
    if (size < 0) {
        fprintf(stderr, "bench_reader: %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("file %s: %.1f MiB, %s page cache, median of %u\n", path, (double)size / (1 << 20),
           warm ? "warm" : "cold", rounds);
    printf("%-6s %-6s %9s %6s %8s %10s %9s %8s %8s\n", "mode", "direct", "chunk_KiB", "depth",
           "MB/s", "records", "io_wait%", "crc%", "copied%");

    uint64_t want_records = 0, want_sum = 0;
    int bad = 0;
    for (int mode = 0; mode < 2; mode++)           /* uring, pread */
        for (int direct = 0; direct < 2; direct++) /* buffered, O_DIRECT */
            for (size_t c = 0; c < nchunks; c++)
                for (size_t d = 0; d < ndepths; d++) {
                    if (mode == 1 && d > 0)
                        break; /* pread has no reads in flight: depth does not matter */
                    if (warm && direct)
                        break;
                    dpp_reader_config_t cfg = {.chunk_bytes = (size_t)chunks[c] << 10,
                                               .depth = (unsigned)depths[d],
                                               .direct = direct,
                                               .force_pread = mode == 1,
                                               .time_crc = time_crc};
                    double secs[16];
                    run_t r;
                    if (warm && run_once(path, &cfg, 0, &r) != 0) /* fill the cache */
                        return 1;
                    for (unsigned k = 0; k < rounds; k++) {
                        if (run_once(path, &cfg, !warm, &r) != 0)
                            return 1;
                        secs[k] = r.sec;
                    }
                    qsort(secs, rounds, sizeof secs[0], cmp_double);
                    double sec = secs[rounds / 2];
                    if (want_records == 0)
                        want_records = r.records, want_sum = r.sum;
                    bad |= r.records != want_records || r.sum != want_sum;
                    printf("%-6s %-6s %9lu %6lu %8.0f %10" PRIu64 " %8.1f%% %7.1f%% %7.2f%%\n",
                           r.uring ? "uring" : "pread", direct ? "yes" : "no", chunks[c],
                           mode == 1 ? 1ul : depths[d], (double)size / sec / 1e6, r.records,
                           100.0 * (double)r.st.io_wait_ns / (r.sec * 1e9),
                           100.0 * (double)r.st.crc_ns / (r.sec * 1e9),
                           100.0 * (double)r.st.copied / (double)size);
                    fflush(stdout);
                }
    if (!file)
        unlink(path);
    if (bad) {
        fprintf(stderr, "bench_reader: runs disagree on the records\n");
        return 1;
    }
    return 0;
}
