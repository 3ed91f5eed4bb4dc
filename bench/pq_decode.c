/* SPDX-License-Identifier: Apache-2.0 */
/* bench_pq_decode: values/s of the Parquet page decoders a data loader spends
 * its time in (src/parquet/encoding.c): RLE_DICTIONARY indices at width 17,
 * PLAIN floats, DELTA_BINARY_PACKED int64 and RLE definition levels, on
 * pages built in memory. Prints figures; checks only that each page decodes
 * to the values it was built from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "parquet/encoding.h"

#define DEFAULT_VALUES (1u << 20)
#define ROUNDS 5

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void *xcalloc(size_t n)
{
    void *p = calloc(1, n);
    if (!p) {
        fprintf(stderr, "bench_pq_decode: out of memory\n");
        exit(1);
    }
    return p;
}

static void put_uleb(uint8_t *dst, size_t *pos, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        dst[(*pos)++] = b | (v ? 0x80 : 0);
    } while (v);
}

static void put_bits(uint8_t *dst, size_t *bit, uint64_t v, unsigned w)
{
    for (unsigned k = 0; k < w; k++, (*bit)++)
        if (v >> k & 1)
            dst[*bit / 8] |= (uint8_t)(1u << (*bit % 8));
}

/* The hybrid of v[0..n) as arrow-cpp writes it: repeats of 8 or more as RLE
 * runs, the rest in bit-packed runs of at most 63 groups. */
static size_t hybrid(uint8_t *dst, const uint32_t *v, size_t n, unsigned w)
{
    size_t pos = 0, i = 0;
    while (i < n) {
        size_t same = 1;
        while (i + same < n && v[i + same] == v[i])
            same++;
        if (same >= 8) {
            put_uleb(dst, &pos, same << 1);
            for (unsigned k = 0; k < (w + 7) / 8; k++)
                dst[pos++] = (uint8_t)(v[i] >> (8 * k));
            i += same;
            continue;
        }
        size_t end = i, groups = 0;
        while (end < n && groups < 63) {
            size_t s = 1;
            while (end + s < n && v[end + s] == v[end])
                s++;
            if (s >= 8)
                break;
            end = end + 8 < n ? end + 8 : n;
            groups++;
        }
        put_uleb(dst, &pos, groups << 1 | 1);
        size_t bit = pos * 8;
        for (size_t k = i; k < i + groups * 8; k++)
            put_bits(dst, &bit, k < n ? v[k] : 0, w);
        pos += groups * w;
        i = end;
    }
    return pos;
}

static double median(double *v)
{
    for (int i = 1; i < ROUNDS; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[ROUNDS / 2];
}

typedef int (*decode_fn)(const uint8_t *buf, size_t len, void *out, size_t n);

/* Median values/s of decoding the page, each round at least 0.2 s. */
static void run(const char *name, decode_fn fn, const uint8_t *buf, size_t len, void *out, size_t n)
{
    double rate[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        size_t reps = 0;
        double t0 = bench_now(), t;
        do {
            if (fn(buf, len, out, n) != 0) {
                fprintf(stderr, "bench_pq_decode: %s does not decode\n", name);
                exit(1);
            }
            reps++;
        } while ((t = bench_now() - t0) < 0.2);
        rate[r] = (double)(reps * n) / t;
    }
    double m = median(rate);
    printf("%-34s %8.0f M values/s  %7.0f MB/s of page\n", name, m / 1e6,
           m * (double)len / (double)n / 1e6);
}

static int indices(const uint8_t *buf, size_t len, void *out, size_t n)
{
    return dpp_pq_indices_decode(buf, len, out, n, 100000, NULL, 0);
}

static int plain_floats(const uint8_t *buf, size_t len, void *out, size_t n)
{
    return dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_FLOAT, 0, buf, len, out, n, NULL, NULL, NULL,
                                0);
}

static int delta_int64(const uint8_t *buf, size_t len, void *out, size_t n)
{
    return dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, buf, len, out, n, NULL,
                                NULL, NULL, 0);
}

static int def_levels(const uint8_t *buf, size_t len, void *out, size_t n)
{
    return dpp_pq_levels_decode(DPP_PQ_RLE, 1, buf, len, out, n, NULL, 0);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : DEFAULT_VALUES;
    if (n == 0 || n > (1u << 26)) {
        fprintf(stderr, "usage: bench_pq_decode [VALUES (default %u, at most 2^26)]\n",
                DEFAULT_VALUES);
        return 2;
    }
    uint64_t rng = 1;
    uint32_t *v = xcalloc(n * sizeof *v), *got = xcalloc(n * sizeof *got);
    uint8_t *page = xcalloc(n * 10 + 64);

    /* indices into 100,000 entries, a run of one now and then */
    for (size_t i = 0; i < n; i++)
        v[i] = i > 0 && rng_next(&rng) % 64 == 0 ? v[i - 1] : (uint32_t)(rng_next(&rng) % 100000);
    for (size_t i = 0; i + 20 < n; i += 5000)
        for (size_t k = 1; k < 20; k++)
            v[i + k] = v[i];
    page[0] = 17;
    size_t len = 1 + hybrid(page + 1, v, n, 17);
    run("RLE_DICTIONARY indices, width 17", indices, page, len, got, n);
    if (memcmp(got, v, n * sizeof *v) != 0) {
        fprintf(stderr, "bench_pq_decode: indices differ\n");
        return 1;
    }

    float *f = (float *)page;
    for (size_t i = 0; i < n; i++)
        f[i] = (float)(rng_next(&rng) % 1000000) / 7.0f;
    run("PLAIN FLOAT", plain_floats, page, n * sizeof(float), got, n);
    if (memcmp(got, f, n * sizeof *f) != 0) {
        fprintf(stderr, "bench_pq_decode: floats differ\n");
        return 1;
    }

    /* timestamps: one block of 128 in 4 miniblocks, deltas of ~10 bits */
    int64_t *ts = xcalloc(n * sizeof *ts), *ts_got = xcalloc(n * sizeof *ts_got);
    for (size_t i = 0; i < n; i++)
        ts[i] = i ? ts[i - 1] + (int64_t)(rng_next(&rng) % 1000) : 1700000000000;
    memset(page, 0, n * 10 + 64);
    size_t pos = 0;
    put_uleb(page, &pos, 128);
    put_uleb(page, &pos, 4);
    put_uleb(page, &pos, n);
    put_uleb(page, &pos, (uint64_t)ts[0] << 1);
    for (size_t i = 1; i < n; i += 128) {
        size_t cnt = n - i < 128 ? n - i : 128;
        int64_t min = INT64_MAX;
        for (size_t j = 0; j < cnt; j++)
            min = ts[i + j] - ts[i + j - 1] < min ? ts[i + j] - ts[i + j - 1] : min;
        put_uleb(page, &pos, (uint64_t)min << 1);
        size_t widths = pos;
        pos += 4;
        for (size_t m = 0; m < 4 && m * 32 < cnt; m++) {
            unsigned w = 0;
            for (size_t j = m * 32; j < m * 32 + 32 && j < cnt; j++)
                while ((uint64_t)(ts[i + j] - ts[i + j - 1] - min) >> w)
                    w++;
            page[widths + m] = (uint8_t)w;
            size_t bit = pos * 8;
            for (size_t j = m * 32; j < m * 32 + 32; j++)
                put_bits(page, &bit, j < cnt ? (uint64_t)(ts[i + j] - ts[i + j - 1] - min) : 0, w);
            pos += 4 * w;
        }
    }
    run("DELTA_BINARY_PACKED INT64", delta_int64, page, pos, ts_got, n);
    if (memcmp(ts_got, ts, n * sizeof *ts) != 0) {
        fprintf(stderr, "bench_pq_decode: timestamps differ\n");
        return 1;
    }

    /* definition levels of a column with 10% nulls */
    for (size_t i = 0; i < n; i++)
        v[i] = rng_next(&rng) % 10 != 0;
    memset(page, 0, n * 10 + 64);
    len = hybrid(page, v, n, 1);
    int16_t *lv = (int16_t *)got;
    run("RLE definition levels, 10% null", def_levels, page, len, lv, n);
    for (size_t i = 0; i < n; i++)
        if (lv[i] != (int16_t)v[i]) {
            fprintf(stderr, "bench_pq_decode: levels differ\n");
            return 1;
        }
    free(v);
    free(got);
    free(page);
    free(ts);
    free(ts_got);
    return 0;
}
