/* SPDX-License-Identifier: Apache-2.0 */
/* bench_transform: values/s of the dense ops the worker runs column by
 * column (clamp, log1p) against libm's log1p, on three value distributions:
 * small integer counts, lognormal reals with a few huge values and
 * negatives (what other writers' Criteo-like tables hold), and uniform
 * bit patterns. --exhaustive also runs log1p on all 2^32 floats and counts
 * where it differs from (float)log1p((double)x) (docs/spec.md's bound:
 * never more than 1 ulp). Prints figures; checks only that bound. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "spec/transform.h"

#define COLUMN 4096
#define VALUES (1u << 24)

static double unit(uint64_t r) /* (0, 1) */
{
    return ((double)(r >> 11) + 0.5) * 0x1p-53;
}

static void fill(const char *shape, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = dpp_mix64(i + 1), q = dpp_mix64(r);
        if (strcmp(shape, "counts") == 0) {
            v[i] = (float)(r % 64 < 40 ? r % 8 : r % 2000);
        } else if (strcmp(shape, "lognormal") == 0) {
            /* Box-Muller normal, exp'd; 2% negative, 0.3% 10^3..10^7 larger */
            double g = sqrt(-2.0 * log(unit(r))) * cos(6.283185307179586 * unit(q));
            double x = exp(1.5 + 2.0 * g);
            if (q % 1000 < 3)
                x *= pow(10.0, 3.0 + 4.0 * unit(dpp_mix64(q)));
            v[i] = (float)(q % 100 < 2 ? -x : x);
        } else {
            uint32_t bits = (uint32_t)r;
            memcpy(&v[i], &bits, sizeof bits);
        }
    }
}

/* Median of 5 runs over the whole array, a column at a time. */
static double rate(const dpp_transform_t *ops, unsigned nops, int use_libm, const float *src,
                   float *v, size_t n)
{
    double t[5];
    for (int run = 0; run < 5; run++) {
        memcpy(v, src, n * sizeof *v);
        double t0 = bench_now();
        for (size_t off = 0; off < n; off += COLUMN) {
            if (use_libm)
                for (size_t k = off; k < off + COLUMN; k++)
                    v[k] = (float)log1p((double)v[k]);
            else
                dpp_transform_dense_column(ops, nops, v + off, COLUMN);
        }
        t[run] = bench_now() - t0;
    }
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return (double)n / t[2];
}

static int64_t float_rank(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

static int exhaustive(const dpp_transform_t *log1p_op)
{
    float v[COLUMN], in[COLUMN];
    uint64_t differ = 0, worse = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += COLUMN) {
        for (uint32_t k = 0; k < COLUMN; k++) {
            uint32_t bits = (uint32_t)(base + k);
            memcpy(&in[k], &bits, sizeof bits);
        }
        memcpy(v, in, sizeof v);
        dpp_transform_dense_column(log1p_op, 1, v, COLUMN);
        for (uint32_t k = 0; k < COLUMN; k++) {
            float want = (float)log1p((double)in[k]);
            if (isnan(want) && isnan(v[k]))
                continue;
            if (!isfinite(want) || !isfinite(v[k])) {
                if (memcmp(&want, &v[k], sizeof want) != 0) {
                    worse++;
                    printf("log1p(%a) = %a, libm %a\n", (double)in[k], (double)v[k], (double)want);
                }
                continue;
            }
            int64_t d = float_rank(v[k]) - float_rank(want);
            if (d != 0 && differ < 20)
                printf("log1p(%a) = %a, libm %a (%+" PRId64 " ulp)\n", (double)in[k],
                       (double)v[k], (double)want, d);
            differ += d != 0;
            worse += d < -1 || d > 1;
        }
    }
    printf("all 2^32 floats: %" PRIu64 " differ from (float)log1p((double)x) by 1 ulp, %" PRIu64
           " by more\n",
           differ - worse, worse);
    return worse != 0;
}

int main(int argc, char **argv)
{
    int full = argc > 1 && strcmp(argv[1], "--exhaustive") == 0;
    if (argc > 1 && !full) {
        fprintf(stderr, "usage: bench_transform [--exhaustive]\n");
        return 2;
    }
    dpp_transform_t ops[3] = {
        {.op = DPP_OP_CLAMP, .min = 0.0, .max = INFINITY},
        {.op = DPP_OP_LOG1P},
        {.op = DPP_OP_CLAMP, .min = 0.0, .max = 20.0},
    };
    float *src = malloc(VALUES * sizeof *src), *v = malloc(VALUES * sizeof *v);
    if (!src || !v)
        return 1;
    printf("bench_transform: %u values a run, columns of %u, median of 5 (M values/s)\n", VALUES,
           COLUMN);
    printf("%-10s %12s %12s %26s\n", "values", "log1p", "libm log1p", "clamp,log1p,clamp (criteo)");
    const char *shapes[] = {"counts", "lognormal", "bits"};
    for (int i = 0; i < 3; i++) {
        fill(shapes[i], src, VALUES);
        printf("%-10s %12.1f %12.1f %26.1f\n", shapes[i], rate(&ops[1], 1, 0, src, v, VALUES) / 1e6,
               rate(NULL, 0, 1, src, v, VALUES) / 1e6, rate(ops, 3, 0, src, v, VALUES) / 1e6);
    }
    free(src);
    free(v);
    return full ? exhaustive(&ops[1]) : 0;
}
