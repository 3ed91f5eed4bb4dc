// SPDX-License-Identifier: Apache-2.0
// Transform chains and row filters at edge values. Expected numbers are
// literals (bit patterns worked out by hand or with Python's struct module),
// plain C arithmetic or libm calls, or a second, simpler formulation of the
// documented rule; never the code under test.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spec/transform.h"
#include "dpp/error.h"

static dpp_transform_t fill(double value)
{
    return (dpp_transform_t){.op = DPP_OP_FILL_MISSING, .value = value};
}

static dpp_transform_t clamp(double min, double max)
{
    return (dpp_transform_t){.op = DPP_OP_CLAMP, .min = min, .max = max};
}

static dpp_transform_t log1p_op(void)
{
    return (dpp_transform_t){.op = DPP_OP_LOG1P};
}

static dpp_transform_t modulo(int64_t n)
{
    dpp_transform_t t = {.op = DPP_OP_MODULO, .n = n};
    dpp_transform_prepare(&t);
    return t;
}

static dpp_transform_t hash_op(int64_t n, int64_t salt)
{
    dpp_transform_t t = {.op = DPP_OP_HASH, .n = n, .salt = salt};
    dpp_transform_prepare(&t);
    return t;
}

static dpp_transform_t truncate_op(uint32_t max_len)
{
    return (dpp_transform_t){.op = DPP_OP_TRUNCATE, .max_len = max_len};
}

static dpp_transform_t truncate_last(uint32_t max_len)
{
    return (dpp_transform_t){.op = DPP_OP_TRUNCATE, .max_len = max_len, .keep_last = 1};
}

static dpp_transform_t standardize(double mean, double std)
{
    return (dpp_transform_t){.op = DPP_OP_STANDARDIZE, .mean = mean, .std = std};
}

static dpp_transform_t bucketize_op(double *boundaries, uint32_t n)
{
    return (dpp_transform_t){.op = DPP_OP_BUCKETIZE, .boundaries = boundaries, .nboundaries = n};
}

static dpp_transform_t cast(dpp_cast_type_t to)
{
    return (dpp_transform_t){.op = DPP_OP_CAST, .cast_to = to};
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t to_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* xorshift64*: the tests' own generator, unrelated to the hashes under test */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Du;
}

/* Runs a present value through ops; the result must be bit-identical to want
 * (NaN compares as NaN, and -0 differs from +0). */
static void check_dense(const dpp_transform_t *ops, unsigned nops, float in, float want)
{
    float out = 12345.0f;
    assert_int_equal(dpp_transform_dense(ops, nops, 1, 1, &in, &out), 0);
    if (isnan(want)) {
        assert_true(isnan(out));
        return;
    }
    if (memcmp(&out, &want, sizeof(out)) != 0)
        print_error("in %a: got %a, want %a\n", (double)in, (double)out, (double)want);
    assert_memory_equal(&out, &want, sizeof(out));
}

static void test_clamp(void **state)
{
    (void)state;
    dpp_transform_t lo = clamp(0.0, INFINITY);
    check_dense(&lo, 1, -1.0f, 0.0f);
    check_dense(&lo, 1, 5.5f, 5.5f);
    check_dense(&lo, 1, 0.0f, 0.0f);
    check_dense(&lo, 1, -0.0f, -0.0f); /* -0 < 0 is false: kept */
    check_dense(&lo, 1, -INFINITY, 0.0f);
    check_dense(&lo, 1, INFINITY, INFINITY);
    check_dense(&lo, 1, NAN, NAN);
    check_dense(&lo, 1, -FLT_MAX, 0.0f);
    check_dense(&lo, 1, FLT_MAX, FLT_MAX);
    check_dense(&lo, 1, -FLT_TRUE_MIN, 0.0f);

    dpp_transform_t hi = clamp(-INFINITY, 20.0);
    check_dense(&hi, 1, INFINITY, 20.0f);
    check_dense(&hi, 1, 25.0f, 20.0f);
    check_dense(&hi, 1, 20.0f, 20.0f);
    check_dense(&hi, 1, -5.0f, -5.0f);
    check_dense(&hi, 1, -INFINITY, -INFINITY);
    check_dense(&hi, 1, NAN, NAN);

    dpp_transform_t both = clamp(-1.0, 1.0);
    check_dense(&both, 1, 1e30f, 1.0f);
    check_dense(&both, 1, -FLT_MAX, -1.0f);
    check_dense(&both, 1, 0.5f, 0.5f);
    check_dense(&both, 1, -NAN, -NAN);

    dpp_transform_t point = clamp(7.0, 7.0);
    check_dense(&point, 1, -3.0f, 7.0f);
    check_dense(&point, 1, 1e9f, 7.0f);

    /* Comparisons happen in double: 0.1f is 0.100000001490116..., above the
     * double 0.1, so it stays; 0.099999994f is below and becomes (float)0.1. */
    dpp_transform_t tenth = clamp(0.1, INFINITY);
    check_dense(&tenth, 1, 0.1f, 0.1f);
    check_dense(&tenth, 1, 0.099999994f, 0.1f);

    /* 2^24 + 1 is no float: 2^24 is below it and stays; 2^24 + 2 is above it
     * and becomes (float)(2^24 + 1), which rounds to even: 2^24. */
    dpp_transform_t odd = clamp(-INFINITY, 16777217.0);
    check_dense(&odd, 1, 16777216.0f, 16777216.0f);
    check_dense(&odd, 1, 16777218.0f, 16777216.0f);
}

static void test_log1p(void **state)
{
    (void)state;
    dpp_transform_t op = log1p_op();
    check_dense(&op, 1, 0.0f, 0.0f);
    check_dense(&op, 1, -0.0f, -0.0f);
    check_dense(&op, 1, -1.0f, -INFINITY);
    check_dense(&op, 1, -2.0f, NAN);
    check_dense(&op, 1, -1.0000001f, NAN);
    check_dense(&op, 1, INFINITY, INFINITY);
    check_dense(&op, 1, -INFINITY, NAN);
    check_dense(&op, 1, NAN, NAN);
    check_dense(&op, 1, 1.0f, (float)log1p(1.0));
    check_dense(&op, 1, 1e-10f, (float)log1p((double)1e-10f));
    check_dense(&op, 1, -0.5f, (float)log1p(-0.5));
    check_dense(&op, 1, FLT_MAX, (float)log1p((double)FLT_MAX));
    check_dense(&op, 1, 1e30f, (float)log1p((double)1e30f));
    check_dense(&op, 1, FLT_TRUE_MIN, FLT_TRUE_MIN); /* log1p(x) == x for tiny x */
}

/* Floats as a line: the distance in ulps between two finite floats of any
 * signs is the difference of these. */
static int64_t float_rank(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

/* The bound docs/spec.md states for log1p: within 1 ulp of libm's
 * (float)log1p((double)x), here on every 256th float bit pattern (2^24
 * inputs across all exponents, both signs), the columns of 4096 at a time
 * the worker transforms. Non-finite results must match exactly. */
static void test_log1p_bound(void **state)
{
    (void)state;
    dpp_transform_t op = log1p_op();
    enum { COLUMN = 4096 };
    float *x = malloc(COLUMN * sizeof *x);
    assert_non_null(x);
    uint64_t differ = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += COLUMN * 256ull) {
        for (uint32_t k = 0; k < COLUMN; k++) {
            uint32_t bits = (uint32_t)(base + k * 256ull + (k * 37u & 255u));
            memcpy(&x[k], &bits, sizeof bits);
        }
        float in[COLUMN];
        memcpy(in, x, sizeof in);
        dpp_transform_dense_column(&op, 1, x, COLUMN);
        for (uint32_t k = 0; k < COLUMN; k++) {
            float want = (float)log1p((double)in[k]);
            if (!isfinite(want) || !isfinite(x[k])) {
                uint32_t a, b;
                memcpy(&a, &want, sizeof a);
                memcpy(&b, &x[k], sizeof b);
                if (isnan(want) && isnan(x[k]))
                    continue;
                if (a != b)
                    fail_msg("log1p(%a) = %a, libm %a", (double)in[k], (double)x[k], (double)want);
                continue;
            }
            int64_t d = float_rank(x[k]) - float_rank(want);
            if (d < -1 || d > 1)
                fail_msg("log1p(%a) = %a, libm %a: %lld ulps", (double)in[k], (double)x[k],
                         (double)want, (long long)d);
            differ += d != 0;
        }
    }
    /* ~2.1e9 of the inputs are in log1p's domain; 1-ulp differences come
     * only from results within 2^-50 of a halfway point (a few in 2^26). */
    assert_true(differ < 16);
    free(x);
}

static void test_fill_missing(void **state)
{
    (void)state;
    float out = 0.0f;
    dpp_transform_t ops[] = {fill(2.5), log1p_op()};

    /* absent: the value, cast to float, then the rest of the chain */
    assert_int_equal(dpp_transform_dense(ops, 1, 1, 0, NULL, &out), 0);
    assert_true(out == 2.5f);
    assert_int_equal(dpp_transform_dense(ops, 2, 1, 0, NULL, &out), 0);
    assert_true(out == (float)log1p((double)2.5f));

    dpp_transform_t tenth = fill(0.1);
    assert_int_equal(dpp_transform_dense(&tenth, 1, 1, 0, NULL, &out), 0);
    assert_true(out == 0.1f);
    dpp_transform_t neg = fill(-FLT_MAX);
    assert_int_equal(dpp_transform_dense(&neg, 1, 1, 0, NULL, &out), 0);
    assert_true(out == -FLT_MAX);

    /* present: fill_missing leaves the value alone, NaN included */
    check_dense(ops, 1, 7.0f, 7.0f);
    check_dense(ops, 1, NAN, NAN);
    check_dense(ops, 2, 3.0f, (float)log1p(3.0));
}

static void test_missing(void **state)
{
    (void)state;
    float out = 42.0f;
    dpp_transform_t ops[] = {clamp(0.0, INFINITY), fill(1.0)};

    assert_int_equal(dpp_transform_dense(NULL, 0, 1, 0, NULL, &out), DPP_EMISSING);
    assert_int_equal(dpp_transform_dense(ops, 1, 1, 0, NULL, &out), DPP_EMISSING);
    /* fill_missing anywhere but first does not count (the parser forbids it) */
    assert_int_equal(dpp_transform_dense(ops, 2, 1, 0, NULL, &out), DPP_EMISSING);

    /* present with no ops: the value as it came */
    check_dense(NULL, 0, -3.25f, -3.25f);
    check_dense(NULL, 0, -INFINITY, -INFINITY);
}

static void test_dense_chains(void **state)
{
    (void)state;
    /* examples/criteo.json: clamp(min 0) -> log1p -> clamp(0, 20) */
    dpp_transform_t criteo[] = {clamp(0.0, INFINITY), log1p_op(), clamp(0.0, 20.0)};
    check_dense(criteo, 3, -5.0f, 0.0f);
    check_dense(criteo, 3, 0.0f, 0.0f);
    check_dense(criteo, 3, 10.0f, (float)log1p(10.0));
    check_dense(criteo, 3, 1e6f, (float)log1p(1e6)); /* 13.8 */
    check_dense(criteo, 3, 1e30f, 20.0f);            /* log1p gives 69.1 */
    check_dense(criteo, 3, INFINITY, 20.0f);
    check_dense(criteo, 3, FLT_MAX, 20.0f);
    check_dense(criteo, 3, NAN, NAN);

    float out = 0.0f;
    assert_int_equal(dpp_transform_dense(criteo, 3, 1, 0, NULL, &out), DPP_EMISSING);

    dpp_transform_t filled[] = {fill(-3.0), clamp(0.0, INFINITY), log1p_op(), clamp(0.0, 20.0)};
    assert_int_equal(dpp_transform_dense(filled, 4, 1, 0, NULL, &out), 0);
    assert_true(out == 0.0f && !signbit(out));
    check_dense(filled, 4, 1.0f, (float)log1p(1.0));

    /* log1p twice, then a clamp whose minimum is above every result */
    dpp_transform_t twice[] = {log1p_op(), log1p_op(), clamp(5.0, 6.0)};
    check_dense(twice, 2, 1.0f, (float)log1p((double)(float)log1p(1.0)));
    check_dense(twice, 3, 1.0f, 5.0f);
    /* log1p(-1) = -inf, log1p(-inf) = NaN, and NaN passes the clamp */
    check_dense(twice, 3, -1.0f, NAN);
}

static void check_ids(const int64_t *got, const int64_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i])
            print_error("ids[%zu]: got %lld, want %lld\n", i, (long long)got[i],
                        (long long)want[i]);
        assert_true(got[i] == want[i]);
    }
}

static void test_modulo(void **state)
{
    (void)state;
    dpp_transform_t ten = modulo(10);
    int64_t ids[] = {-1, -10, -11, 0, 9, 10, 23, INT64_MIN, INT64_MAX, -9};
    /* INT64_MIN = -922337203685477581 * 10 + 2; INT64_MAX ends in 7 */
    const int64_t want[] = {9, 0, 9, 0, 9, 0, 3, 2, 7, 1};
    assert_int_equal(dpp_transform_sparse(&ten, 1, ids, NULL, 10), 10);
    check_ids(ids, want, 10);

    dpp_transform_t one = modulo(1);
    int64_t ones[] = {INT64_MIN, -1, 0, 1, INT64_MAX};
    const int64_t zeros[] = {0, 0, 0, 0, 0};
    assert_int_equal(dpp_transform_sparse(&one, 1, ones, NULL, 5), 5);
    check_ids(ones, zeros, 5);

    /* INT64_MIN = -1 * INT64_MAX - 1, so its floor modulo is INT64_MAX - 1 */
    dpp_transform_t big = modulo(INT64_MAX);
    int64_t wide[] = {INT64_MIN, INT64_MAX, -1, INT64_MAX - 1, 0};
    const int64_t wide_want[] = {INT64_MAX - 1, 0, INT64_MAX - 1, INT64_MAX - 1, 0};
    assert_int_equal(dpp_transform_sparse(&big, 1, wide, NULL, 5), 5);
    check_ids(wide, wide_want, 5);

    dpp_transform_t hashing = modulo(100000);
    int64_t h[] = {123456789, -123456789, 99999, 100000};
    const int64_t h_want[] = {56789, 43211, 99999, 0};
    assert_int_equal(dpp_transform_sparse(&hashing, 1, h, NULL, 4), 4);
    check_ids(h, h_want, 4);

    /* an empty list stays empty; no ids are touched */
    assert_int_equal(dpp_transform_sparse(&ten, 1, NULL, NULL, 0), 0);
}

static void test_truncate(void **state)
{
    (void)state;
    int64_t ids[] = {5, -6, 7, 8, 9};
    const int64_t want[] = {5, -6, 7, 8, 9};

    dpp_transform_t three = truncate_op(3);
    assert_int_equal(dpp_transform_sparse(&three, 1, ids, NULL, 5), 3);
    check_ids(ids, want, 3);

    dpp_transform_t longer = truncate_op(10);
    assert_int_equal(dpp_transform_sparse(&longer, 1, ids, NULL, 5), 5);
    check_ids(ids, want, 5);

    dpp_transform_t exact = truncate_op(5);
    assert_int_equal(dpp_transform_sparse(&exact, 1, ids, NULL, 5), 5);

    dpp_transform_t one = truncate_op(1);
    assert_int_equal(dpp_transform_sparse(&one, 1, ids, NULL, 5), 1);
    assert_true(ids[0] == 5);

    dpp_transform_t max = truncate_op(UINT32_MAX);
    assert_int_equal(dpp_transform_sparse(&max, 1, ids, NULL, 5), 5);

    assert_int_equal(dpp_transform_sparse(&three, 1, NULL, NULL, 0), 0);
    assert_int_equal(dpp_transform_sparse(NULL, 0, ids, NULL, 5), 5);
    check_ids(ids, want, 5);
}

static void test_sparse_chains(void **state)
{
    (void)state;
    /* examples/criteo.json: modulo 100000 -> truncate 5 */
    dpp_transform_t criteo[] = {modulo(100000), truncate_op(5)};
    int64_t ids[] = {-1, 100001, 7, 200000, 123456, 999999, 3};
    const int64_t want[] = {99999, 1, 7, 0, 23456};
    assert_int_equal(dpp_transform_sparse(criteo, 2, ids, NULL, 7), 5);
    check_ids(ids, want, 5);

    dpp_transform_t chain[] = {truncate_op(4), modulo(7), truncate_op(2), modulo(3)};
    int64_t c[] = {-8, 15, 100, 4, 5};
    /* -8 mod 7 = 6, then mod 3 = 0; 15 mod 7 = 1, then 1 */
    const int64_t c_want[] = {0, 1};
    assert_int_equal(dpp_transform_sparse(chain, 4, c, NULL, 5), 2);
    check_ids(c, c_want, 2);

    int64_t none[1];
    assert_int_equal(dpp_transform_sparse(criteo, 2, none, NULL, 0), 0);
}

/* Runs a present value through ops and compares bit patterns (NaN included:
 * the NaNs the ops make are documented). */
static void check_dense_bits(const dpp_transform_t *ops, unsigned nops, uint32_t in, uint32_t want)
{
    float x = from_bits(in), out = 12345.0f;
    assert_int_equal(dpp_transform_dense(ops, nops, 1, 1, &x, &out), 0);
    if (to_bits(out) != want)
        print_error("in 0x%08x: got 0x%08x, want 0x%08x\n", in, to_bits(out), want);
    assert_int_equal(to_bits(out), want);
}

static void test_standardize(void **state)
{
    (void)state;
    dpp_transform_t op = standardize(1.0, 2.0);
    check_dense(&op, 1, 5.0f, 2.0f);
    check_dense(&op, 1, 1.0f, 0.0f);
    check_dense(&op, 1, -3.0f, -2.0f);
    check_dense(&op, 1, INFINITY, INFINITY);
    check_dense(&op, 1, -INFINITY, -INFINITY);
    check_dense(&op, 1, NAN, NAN);

    /* in double: 0.1f - 0.1 is the float's representation error, not 0 */
    dpp_transform_t tenth = standardize(0.1, 1.0);
    check_dense(&tenth, 1, 0.1f, (float)((double)0.1f - 0.1));
    check_dense(&tenth, 1, 0.1f, 1.4901161e-09f);

    /* -0 - +0 = -0; x - x = +0 */
    dpp_transform_t zero = standardize(0.0, 1.0);
    check_dense(&zero, 1, -0.0f, -0.0f);
    check_dense(&zero, 1, 0.0f, 0.0f);
    dpp_transform_t negzero = standardize(-0.0, 1.0);
    check_dense(&negzero, 1, -0.0f, 0.0f);

    /* denormals are exact through the double intermediate */
    dpp_transform_t half = standardize(0.0, 0.5);
    check_dense(&half, 1, FLT_TRUE_MIN, 2 * FLT_TRUE_MIN);
    check_dense(&half, 1, -FLT_TRUE_MIN, -2 * FLT_TRUE_MIN);
    dpp_transform_t twice = standardize(0.0, 2.0);
    check_dense(&twice, 1, FLT_TRUE_MIN, 0.0f); /* 2^-150 ties to even: 0 */
    check_dense(&twice, 1, -FLT_TRUE_MIN, -0.0f);

    /* beyond the float range after the division: infinity */
    dpp_transform_t tiny = standardize(-FLT_MAX, FLT_TRUE_MIN);
    check_dense(&tiny, 1, FLT_MAX, INFINITY);
    check_dense(&tiny, 1, -FLT_MAX, 0.0f);
    dpp_transform_t wide = standardize(0.0, 1e-30);
    check_dense(&wide, 1, -1e10f, -INFINITY);
}

static void test_bucketize(void **state)
{
    (void)state;
    double b[] = {0.0, 1.0, 2.5};
    dpp_transform_t op = bucketize_op(b, 3);
    check_dense(&op, 1, -1.0f, 0.0f);
    check_dense(&op, 1, 0.0f, 1.0f);  /* equal to a boundary: counted */
    check_dense(&op, 1, -0.0f, 1.0f); /* -0.0 >= 0 */
    check_dense(&op, 1, 0.5f, 1.0f);
    check_dense(&op, 1, 1.0f, 2.0f);
    check_dense(&op, 1, 2.4999998f, 2.0f);
    check_dense(&op, 1, 2.5f, 3.0f);
    check_dense(&op, 1, 1e30f, 3.0f);
    check_dense(&op, 1, FLT_MAX, 3.0f);
    check_dense(&op, 1, INFINITY, 3.0f);
    check_dense(&op, 1, -INFINITY, 0.0f);
    check_dense(&op, 1, FLT_TRUE_MIN, 1.0f);
    check_dense(&op, 1, -FLT_TRUE_MIN, 0.0f);
    check_dense(&op, 1, NAN, NAN);
    check_dense(&op, 1, -NAN, -NAN);

    /* compared in double, as written: 0.1f is above 0.1 */
    double tenth[] = {0.1};
    dpp_transform_t one = bucketize_op(tenth, 1);
    check_dense(&one, 1, 0.1f, 1.0f);
    check_dense(&one, 1, 0.099999994f, 0.0f);

    /* the extreme boundaries */
    double edges[] = {-FLT_MAX, -FLT_TRUE_MIN, FLT_TRUE_MIN, FLT_MAX};
    dpp_transform_t e = bucketize_op(edges, 4);
    check_dense(&e, 1, -INFINITY, 0.0f);
    check_dense(&e, 1, -FLT_MAX, 1.0f);
    check_dense(&e, 1, -0.0f, 2.0f);
    check_dense(&e, 1, 0.0f, 2.0f);
    check_dense(&e, 1, FLT_TRUE_MIN, 3.0f);
    check_dense(&e, 1, FLT_MAX, 4.0f);
    check_dense(&e, 1, INFINITY, 4.0f);

    /* binary search against counting, over many sizes and values, with
     * values right on, below and above each boundary */
    enum { MAXB = 300 };
    double *many = malloc(MAXB * sizeof(double));
    assert_non_null(many);
    uint64_t rng = 0x1234567;
    for (uint32_t nb = 1; nb <= MAXB; nb += 37) {
        double v = -1000.0;
        for (uint32_t i = 0; i < nb; i++) {
            v += (double)(rng_next(&rng) % 1000 + 1) / 8.0;
            many[i] = v;
        }
        dpp_transform_t t = bucketize_op(many, nb);
        for (uint32_t i = 0; i < nb; i++) {
            float probes[] = {(float)many[i], nextafterf((float)many[i], -INFINITY),
                              nextafterf((float)many[i], INFINITY)};
            for (int k = 0; k < 3; k++) {
                uint32_t count = 0;
                for (uint32_t j = 0; j < nb; j++)
                    count += many[j] <= (double)probes[k];
                check_dense(&t, 1, probes[k], (float)count);
            }
        }
    }
    free(many);
}

static void test_cast_int(void **state)
{
    (void)state;
    dpp_transform_t op = cast(DPP_CAST_INT);
    check_dense(&op, 1, 2.7f, 2.0f);
    check_dense(&op, 1, -2.7f, -2.0f);
    check_dense(&op, 1, 3.0f, 3.0f);
    check_dense(&op, 1, 8388608.5f, 8388608.0f);
    check_dense(&op, 1, -0.5f, 0.0f); /* +0: an integer has no sign of zero */
    check_dense(&op, 1, -0.0f, 0.0f);
    check_dense(&op, 1, FLT_TRUE_MIN, 0.0f);
    check_dense(&op, 1, -FLT_TRUE_MIN, 0.0f);
    check_dense_bits(&op, 1, 0xffc00000u, 0x00000000u); /* NaN -> +0 */
    check_dense_bits(&op, 1, 0x7f800001u, 0x00000000u);
    check_dense(&op, 1, INFINITY, 0x1p63f);
    check_dense(&op, 1, -INFINITY, -0x1p63f);
    check_dense(&op, 1, FLT_MAX, 0x1p63f);
    check_dense(&op, 1, -FLT_MAX, -0x1p63f);
    check_dense(&op, 1, 1e19f, 0x1p63f);
    check_dense(&op, 1, 0x1p63f, 0x1p63f);
    check_dense(&op, 1, -0x1p63f, -0x1p63f);            /* INT64_MIN itself */
    check_dense_bits(&op, 1, 0x5effffffu, 0x5effffffu); /* largest float below 2^63 */
    check_dense_bits(&op, 1, 0xdeffffffu, 0xdeffffffu);

    /* random floats against truncf, with the three documented exceptions */
    uint64_t rng = 42;
    for (int i = 0; i < 200000; i++) {
        uint32_t bits = (uint32_t)rng_next(&rng);
        float x = from_bits(bits), want;
        if (isnan(x))
            want = 0.0f;
        else if (fabsf(x) >= 0x1p63f)
            want = copysignf(0x1p63f, x);
        else
            want = truncf(x) + 0.0f; /* -0 + +0 = +0 */
        check_dense_bits(&op, 1, bits, to_bits(want));
    }
}

static void test_cast_bfloat16(void **state)
{
    (void)state;
    dpp_transform_t op = cast(DPP_CAST_BFLOAT16);
    static const uint32_t cases[][2] = {
        {0x3f800000u, 0x3f800000u},                             /* 1.0 */
        {0x3f807fffu, 0x3f800000u},                             /* below the midpoint */
        {0x3f808000u, 0x3f800000u},                             /* tie, kept part even: down */
        {0x3f818000u, 0x3f820000u},                             /* tie, kept part odd: up */
        {0x3f808001u, 0x3f810000u},                             /* above the midpoint */
        {0xbf808001u, 0xbf810000u},                             /* the same negative */
        {0xbf818000u, 0xbf820000u}, {0x3fffffffu, 0x40000000u}, /* carry into the exponent */
        {0x7f7f7fffu, 0x7f7f0000u},                             /* largest bfloat16 */
        {0x7f7f8000u, 0x7f800000u}, /* tie above it, odd: overflow to inf */
        {0x7f7fffffu, 0x7f800000u}, /* FLT_MAX */
        {0xff7fffffu, 0xff800000u}, {0x7f800000u, 0x7f800000u}, /* inf */
        {0xff800000u, 0xff800000u}, {0x00000000u, 0x00000000u}, {0x80000000u, 0x80000000u}, /* -0 */
        {0x00000001u, 0x00000000u},                             /* denormal, rounds to +0 */
        {0x80000001u, 0x80000000u}, {0x00008000u, 0x00000000u}, /* denormal tie, even */
        {0x00018000u, 0x00020000u},                             /* denormal tie, odd */
        {0x007fffffu, 0x00800000u}, /* largest denormal to the smallest normal */
        {0x3dcccccdu, 0x3dcd0000u}, /* 0.1 */
        {0x7fc00000u, 0x7fc00000u}, /* NaN: quiet, sign kept */
        {0x7f800001u, 0x7fc00000u}, /* signalling NaN with a low payload */
        {0xffc12345u, 0xffc00000u},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_dense_bits(&op, 1, cases[i][0], cases[i][1]);

    /* every pair of adjacent positive and negative bfloat16 values: both
     * exact, the midpoint goes to the even one, a float either side of the
     * midpoint goes to the nearer */
    for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
        for (uint32_t h = 0; h < 0x7f80u; h++) {
            uint32_t lo = (sign | h) << 16, hi = (sign | (h + 1)) << 16;
            uint32_t mid = lo | 0x8000u;
            check_dense_bits(&op, 1, lo, lo);
            check_dense_bits(&op, 1, mid, (h & 1) ? hi : lo);
            check_dense_bits(&op, 1, mid - 1, lo);
            check_dense_bits(&op, 1, mid + 1, hi);
        }
    }
}

/* IEEE binary16 bits to double, written from the format's definition. */
static double half_value(uint32_t h)
{
    int e = (int)((h >> 10) & 0x1f);
    double m = (double)(h & 0x3ff);
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024.0 + m, e - 25);
    return (h & 0x8000u) ? -v : v;
}

static void test_cast_float16(void **state)
{
    (void)state;
    dpp_transform_t op = cast(DPP_CAST_FLOAT16);
    static const uint32_t cases[][2] = {
        {0x3f800000u, 0x3f800000u}, /* 1.0 */
        {0x3f801000u, 0x3f800000u}, /* 1 + 2^-11: tie, even: down */
        {0x3f803000u, 0x3f804000u}, /* 1 + 3 * 2^-11: tie, odd: up */
        {0x3f801001u, 0x3f802000u}, /* just above the tie */
        {0x3dcccccdu, 0x3dccc000u}, /* 0.1 -> 0.0999755859375 */
        {0x477fe000u, 0x477fe000u}, /* 65504, the largest half */
        {0x477fef00u, 0x477fe000u}, /* 65519 */
        {0x477fefffu, 0x477fe000u}, /* 65519.996 */
        {0x477ff000u, 0x7f800000u}, /* 65520: tie, odd: up to 65536, overflow */
        {0xc77ff000u, 0xff800000u}, /* -65520 */
        {0x501502f9u, 0x7f800000u}, /* 1e10 */
        {0x7f7fffffu, 0x7f800000u}, /* FLT_MAX */
        {0x7f800000u, 0x7f800000u}, /* inf */
        {0xff800000u, 0xff800000u}, {0x38800000u, 0x38800000u}, /* 2^-14, the smallest normal half
                                                                 */
        {0x387ff000u, 0x38800000u},                             /* 1023.75 * 2^-24 */
        {0x387fe000u, 0x38800000u}, /* 1023.5 * 2^-24: tie, odd: up to normal */
        {0x387fd000u, 0x387fc000u}, /* 1022.5 * 2^-24: tie, even: down */
        {0x38000000u, 0x38000000u}, /* 2^-15, subnormal half */
        {0x38001000u, 0x38000000u}, /* 512.125 quanta */
        {0x38002000u, 0x38000000u}, /* 512.25 */
        {0x38003000u, 0x38004000u}, /* 512.375 */
        {0x33800000u, 0x33800000u}, /* 2^-24, the smallest half */
        {0x33000000u, 0x00000000u}, /* 2^-25: tie between 0 and 2^-24, even */
        {0xb3000000u, 0x80000000u}, /* -2^-25 -> -0 */
        {0x33000100u, 0x33800000u}, /* just above 2^-25 */
        {0x33c00000u, 0x34000000u}, /* 1.5 * 2^-24: tie, odd: up */
        {0x32800000u, 0x00000000u}, /* 2^-26 */
        {0x00000001u, 0x00000000u}, /* float denormals */
        {0x807fffffu, 0x80000000u}, {0x00000000u, 0x00000000u}, {0x80000000u, 0x80000000u},
        {0x7fc00000u, 0x7fc00000u}, /* NaN: quiet, sign kept */
        {0x7f800001u, 0x7fc00000u}, {0xff812345u, 0xffc00000u},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_dense_bits(&op, 1, cases[i][0], cases[i][1]);

    /* every pair of adjacent halves of either sign, subnormals included: both
     * exact, the midpoint (exact in float: 12 significant bits) to the even
     * one, a float either side of it to the nearer; past 65504 the upper
     * neighbour is infinity, reached from the midpoint 65520 up. */
    for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
        for (uint32_t h = 0; h < 0x7c00u; h++) {
            float lo = (float)half_value(sign | h);
            double next = h + 1 == 0x7c00u ? 65536.0 : fabs(half_value(h + 1));
            float mid = (float)((fabs(half_value(h)) + next) / 2);
            float hi = h + 1 == 0x7c00u ? INFINITY : (float)next;
            if (sign) {
                mid = -mid;
                hi = -hi;
            }
            assert_true((double)mid * 2 == half_value(sign | h) + (sign ? -next : next));
            check_dense_bits(&op, 1, to_bits(lo), to_bits(lo));
            check_dense_bits(&op, 1, to_bits(mid), to_bits((h & 1) ? hi : lo));
            check_dense_bits(&op, 1, to_bits(nextafterf(mid, 0.0f)), to_bits(lo));
            check_dense_bits(&op, 1, to_bits(nextafterf(mid, sign ? -INFINITY : INFINITY)),
                             to_bits(hi));
        }
    }
}

static void test_dense_dim(void **state)
{
    (void)state;
    float in[4] = {-1.0f, 0.5f, NAN, 100.0f};
    float out[4] = {7, 7, 7, 7};
    dpp_transform_t chain[] = {fill(2.0), clamp(0.0, INFINITY), log1p_op()};

    /* present: elementwise, in left alone when out differs */
    assert_int_equal(dpp_transform_dense(chain, 3, 4, 1, in, out), 0);
    assert_true(out[0] == 0.0f);
    assert_true(out[1] == (float)log1p((double)0.5f));
    assert_true(isnan(out[2]));
    assert_true(out[3] == (float)log1p(100.0));
    assert_true(in[0] == -1.0f && in[3] == 100.0f);

    /* in place */
    float row[3] = {1.0f, -5.0f, 3.0f};
    dpp_transform_t lo = clamp(0.0, 2.0);
    assert_int_equal(dpp_transform_dense(&lo, 1, 3, 1, row, row), 0);
    assert_true(row[0] == 1.0f && row[1] == 0.0f && row[2] == 2.0f);

    /* absent: fill_missing sets every value, then the chain runs on each */
    float filled[4] = {0};
    assert_int_equal(dpp_transform_dense(chain, 3, 4, 0, NULL, filled), 0);
    for (int k = 0; k < 4; k++)
        assert_true(filled[k] == (float)log1p(2.0));

    /* absent without fill_missing: DPP_EMISSING, out untouched */
    float untouched[2] = {9.0f, 9.0f};
    assert_int_equal(dpp_transform_dense(&lo, 1, 2, 0, NULL, untouched), DPP_EMISSING);
    assert_true(untouched[0] == 9.0f && untouched[1] == 9.0f);

    /* no ops: a copy */
    float copy[4];
    assert_int_equal(dpp_transform_dense(NULL, 0, 4, 1, in, copy), 0);
    assert_memory_equal(copy, in, sizeof copy);

    /* every new op over a row: each value as if alone */
    double b[] = {0.0, 10.0};
    dpp_transform_t mixed[] = {standardize(1.0, 0.5), bucketize_op(b, 2), cast(DPP_CAST_INT)};
    float v[5] = {1.0f, 0.5f, 6.0f, -INFINITY, NAN}, w[5];
    assert_int_equal(dpp_transform_dense(mixed, 3, 5, 1, v, w), 0);
    /* (x - 1) / 0.5 = 0, -1, 10, -inf, NaN; buckets 1, 0, 2, 0, NaN; int: NaN -> 0 */
    const float want[5] = {1.0f, 0.0f, 2.0f, 0.0f, 0.0f};
    assert_memory_equal(w, want, sizeof want);
}

/* The hash test vectors of docs/spec.md, worked out with Python integers. */
static void test_hash_vectors(void **state)
{
    (void)state;
    static const struct {
        int64_t id, salt;
        uint64_t h;
        int64_t mod1000;
    } vectors[] = {
        {0, 0, 0x0000000000000000u, 0},           {1, 0, 0x5692161d100b05e5u, 789},
        {-1, 0, 0xb4d055fcf2cbbd7bu, 67},         {42, 0, 0xa759ea27d4727622u, 962},
        {42, 7, 0x53ad348af3ddaf4bu, 195},        {INT64_MIN, 0, 0x25c26ea579cea98au, 50},
        {INT64_MAX, 0, 0x5a682afe7965debdu, 533}, {123456789, -1, 0x8e63119d5785ee6au, 634},
        {0, 1, 0xe220a8397b1dcdafu, 535},
    };
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        assert_true(dpp_hash_id(vectors[i].id, vectors[i].salt) == vectors[i].h);
        dpp_transform_t op = hash_op(1000, vectors[i].salt);
        int64_t id = vectors[i].id;
        assert_int_equal(dpp_transform_sparse(&op, 1, &id, NULL, 1), 1);
        assert_true(id == vectors[i].mod1000);
    }
    assert_true(dpp_mix64(1) == 0x5692161d100b05e5u);
    assert_true(dpp_mix64(7) == 0x12ae30237b17df14u);

    /* h mod (2^63 - 1) for a few, from Python too */
    dpp_transform_t big = hash_op(INT64_MAX, 0);
    int64_t ids[] = {1, -1, 42, INT64_MIN, INT64_MAX};
    const int64_t want[] = {6238072747940578789, 3805636230021627260, 2835554897195333155,
                            2720858781877447050, 6514504133438201533};
    assert_int_equal(dpp_transform_sparse(&big, 1, ids, NULL, 5), 5);
    check_ids(ids, want, 5);

    /* n = 1 maps everything to 0 */
    dpp_transform_t one = hash_op(1, 99);
    int64_t any[] = {5, INT64_MIN, -7};
    const int64_t zeros[] = {0, 0, 0};
    assert_int_equal(dpp_transform_sparse(&one, 1, any, NULL, 3), 3);
    check_ids(any, zeros, 3);
}

/* Random (id, n) pairs with the ids and divisors where reductions go wrong:
 * n = 1, 2, powers of two and their neighbours, n near 2^63, ids at the int64
 * edges and next to multiples of n. */
static int64_t pick_n(uint64_t *rng)
{
    uint64_t r = rng_next(rng);
    switch (r % 8) {
    case 0:
        return 1 + (int64_t)(rng_next(rng) % 3); /* 1, 2, 3 */
    case 1: {
        int k = (int)(rng_next(rng) % 63);
        return (int64_t)(1ull << k) + (int64_t)(rng_next(rng) % 3) - 1 + (k == 0);
    }
    case 2:
        return INT64_MAX - (int64_t)(rng_next(rng) % 1000);
    case 3:
        return (int64_t)(rng_next(rng) % 1000) + 1;
    case 4:
        return (int64_t)(rng_next(rng) >> 33) + 1; /* up to 2^31 */
    default:
        return (int64_t)(rng_next(rng) >> 1) | 1; /* anything in [1, 2^63) */
    }
}

static int64_t pick_id(uint64_t *rng, int64_t n)
{
    uint64_t r = rng_next(rng);
    switch (r % 8) {
    case 0: {
        static const int64_t edges[] = {INT64_MIN, INT64_MIN + 1, -1,       0,
                                        1,         INT64_MAX - 1, INT64_MAX};
        return edges[rng_next(rng) % 7];
    }
    case 1: { /* k * n + {-1, 0, 1}, all kept in range */
        int64_t k = (int64_t)(rng_next(rng) % 2001) - 1000;
        if (k > INT64_MAX / n)
            k = INT64_MAX / n;
        if (k < INT64_MIN / n)
            k = INT64_MIN / n;
        int64_t base = k * n, delta = (int64_t)(rng_next(rng) % 3) - 1;
        if ((base == INT64_MIN && delta < 0) || (base > INT64_MAX - 1 && delta > 0))
            delta = 0;
        return base + delta;
    }
    case 2:
        return (int64_t)(rng_next(rng) % 2000) - 1000;
    default:
        return (int64_t)rng_next(rng);
    }
}

static void test_modulo_exact(void **state)
{
    (void)state;
    enum { BATCH = 4096, ROUNDS = 1024 }; /* 4,194,304 pairs */
    int64_t *ids = malloc(BATCH * sizeof(int64_t));
    int64_t *want = malloc(BATCH * sizeof(int64_t));
    assert_non_null(ids);
    assert_non_null(want);
    uint64_t rng = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < ROUNDS; round++) {
        /* a few ids per divisor, many divisors per round */
        for (int start = 0; start < BATCH; start += 16) {
            int64_t n = pick_n(&rng);
            dpp_transform_t op = modulo(n);
            for (int k = start; k < start + 16; k++) {
                ids[k] = pick_id(&rng, n);
                int64_t r = ids[k] % n;
                want[k] = r < 0 ? r + n : r;
            }
            assert_int_equal(dpp_transform_sparse(&op, 1, ids + start, NULL, 16), 16);
        }
        for (int k = 0; k < BATCH; k++) {
            if (ids[k] != want[k]) {
                print_error("round %d, ids[%d]: got %lld, want %lld\n", round, k, (long long)ids[k],
                            (long long)want[k]);
                fail();
            }
        }
    }

    /* hash: its 64-bit value (any of 2^64, unlike an id) reduced with % */
    for (int round = 0; round < ROUNDS / 4; round++) {
        for (int start = 0; start < BATCH; start += 16) {
            int64_t n = pick_n(&rng), salt = (int64_t)rng_next(&rng);
            dpp_transform_t op = hash_op(n, salt);
            for (int k = start; k < start + 16; k++) {
                ids[k] = pick_id(&rng, n);
                want[k] = (int64_t)(dpp_hash_id(ids[k], salt) % (uint64_t)n);
            }
            assert_int_equal(dpp_transform_sparse(&op, 1, ids + start, NULL, 16), 16);
        }
        for (int k = 0; k < BATCH; k++)
            assert_true(ids[k] == want[k]);
    }
    free(ids);
    free(want);
}

static void test_weights(void **state)
{
    (void)state;
    int64_t ids[] = {11, 12, 13, 14, 15};
    float w[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};

    /* keep last: the weights move with their ids */
    dpp_transform_t last = truncate_last(3);
    assert_int_equal(dpp_transform_sparse(&last, 1, ids, w, 5), 3);
    const int64_t want_ids[] = {13, 14, 15};
    check_ids(ids, want_ids, 3);
    assert_true(w[0] == 0.3f && w[1] == 0.4f && w[2] == 0.5f);

    /* keep last without weights, and when nothing is dropped */
    int64_t plain[] = {1, 2, 3, 4};
    assert_int_equal(dpp_transform_sparse(&last, 1, plain, NULL, 4), 3);
    const int64_t plain_want[] = {2, 3, 4};
    check_ids(plain, plain_want, 3);
    assert_int_equal(dpp_transform_sparse(&last, 1, plain, NULL, 3), 3);
    check_ids(plain, plain_want, 3);
    dpp_transform_t last1 = truncate_last(1);
    assert_int_equal(dpp_transform_sparse(&last1, 1, plain, NULL, 3), 1);
    assert_true(plain[0] == 4);

    /* keep first: weights stay where they are */
    int64_t ids2[] = {21, 22, 23};
    float w2[] = {1.0f, 2.0f, 3.0f};
    dpp_transform_t first = truncate_op(2);
    assert_int_equal(dpp_transform_sparse(&first, 1, ids2, w2, 3), 2);
    assert_true(ids2[0] == 21 && ids2[1] == 22 && w2[0] == 1.0f && w2[1] == 2.0f);

    /* modulo and hash rewrite ids only */
    int64_t ids3[] = {-1, 17, 1000};
    float w3[] = {-0.0f, NAN, 3.5f};
    dpp_transform_t chain[] = {modulo(10), hash_op(7, 3), truncate_last(2)};
    assert_int_equal(dpp_transform_sparse(chain, 3, ids3, w3, 3), 2);
    assert_true(isnan(w3[0]) && w3[1] == 3.5f);
    for (int k = 0; k < 2; k++)
        assert_true(ids3[k] >= 0 && ids3[k] < 7);
    /* 17 mod 10 = 7, 1000 mod 10 = 0 */
    assert_true(ids3[0] == (int64_t)(dpp_hash_id(7, 3) % 7));
    assert_true(ids3[1] == (int64_t)(dpp_hash_id(0, 3) % 7));
}

static void test_row_identity(void **state)
{
    (void)state;
    /* FNV-1a 64 reference values */
    assert_true(dpp_path_hash("") == 0xcbf29ce484222325u);
    assert_true(dpp_path_hash("a") == 0xaf63dc4c8601ec8cu);
    assert_true(dpp_path_hash("foobar") == 0x85944171f73967e8u);
    uint64_t ph = dpp_path_hash("ds=2026-01-01/part-00000.tfrecord");
    assert_true(ph == 0x054328f735f04373u);
    assert_true(dpp_row_key(ph, 0) == 0x9c314e78ee4bdaf9u);
    assert_true(dpp_row_key(ph, 1) == 0x23b869b5a26cc163u);
    assert_true(dpp_row_key(ph, 1000) == 0x4e258b0e7010cb71u);
    /* the index is added, wrapping */
    assert_true(dpp_row_key(UINT64_MAX, 1) == dpp_row_key(0, 0));
}

static dpp_filter_t sample(double p, int64_t seed)
{
    dpp_filter_t f = {.kind = DPP_FILTER_SAMPLE, .p = p, .seed = seed};
    dpp_filter_prepare(&f);
    return f;
}

static void test_sample(void **state)
{
    (void)state;
    uint64_t ph = dpp_path_hash("ds=2026-01-01/part-00000.tfrecord");

    /* thresholds: ceil(p * 2^64), p = 1 keeps all */
    assert_true(sample(0.5, 0).threshold == 1ull << 63);
    assert_true(sample(0.25, 0).threshold == 1ull << 62);
    assert_true(sample(0x1p-70, 0).threshold == 1);
    assert_true(sample(1.0 - 0x1p-53, 0).threshold == UINT64_MAX - 2047);
    assert_true(sample(0.0, 0).threshold == 0);
    assert_true(sample(0.0, 5).seed_mix == dpp_mix64(5));

    dpp_filter_t none = sample(0.0, 0), all = sample(1.0, 0), some = sample(0.3, 0);
    dpp_filter_t other_seed = sample(0.3, 12345);
    unsigned kept = 0, kept_other = 0, same = 0;
    const unsigned n = 100000;
    for (unsigned i = 0; i < n; i++) {
        uint64_t key = dpp_row_key(ph, i);
        assert_int_equal(dpp_filter_sample_keep(&none, key, 0.0f), 0);
        assert_int_equal(dpp_filter_sample_keep(&all, key, 0.0f), 1);
        int k = dpp_filter_sample_keep(&some, key, 1.0f);
        int k2 = dpp_filter_sample_keep(&other_seed, key, 1.0f);
        /* the documented rule, spelt out */
        assert_int_equal(k, dpp_mix64(key ^ dpp_mix64(0)) < some.threshold);
        assert_int_equal(k2, dpp_mix64(key ^ dpp_mix64(12345)) < other_seed.threshold);
        kept += (unsigned)k;
        kept_other += (unsigned)k2;
        same += (unsigned)(k == k2);
    }
    double frac = (double)kept / n, frac_other = (double)kept_other / n;
    print_message("sample p=0.3: kept %.5f (seed 0), %.5f (seed 12345)\n", frac, frac_other);
    assert_true(fabs(frac - 0.3) <= 0.003); /* within 1% of 0.3 */
    assert_true(fabs(frac_other - 0.3) <= 0.003);
    /* another seed draws independently: agreement near 0.3^2 + 0.7^2 = 0.58 */
    assert_true(fabs((double)same / n - 0.58) < 0.01);

    /* label: only rows with that label are sampled (negative downsampling) */
    dpp_filter_t neg = {.kind = DPP_FILTER_SAMPLE, .p = 0.0, .has_label = 1, .label = 0.0};
    dpp_filter_prepare(&neg);
    assert_int_equal(dpp_filter_sample_keep(&neg, 1, 0.0f), 0);
    assert_int_equal(dpp_filter_sample_keep(&neg, 1, -0.0f), 0); /* -0 == 0 */
    assert_int_equal(dpp_filter_sample_keep(&neg, 1, 1.0f), 1);
    assert_int_equal(dpp_filter_sample_keep(&neg, 1, NAN), 1);
    assert_int_equal(dpp_filter_sample_keep(&neg, 1, FLT_TRUE_MIN), 1);
    /* compared as float32: 0.1 in the spec matches a 0.1f label */
    dpp_filter_t tenth = {.kind = DPP_FILTER_SAMPLE, .p = 0.0, .has_label = 1, .label = 0.1};
    dpp_filter_prepare(&tenth);
    assert_int_equal(dpp_filter_sample_keep(&tenth, 1, 0.1f), 0);
    assert_int_equal(dpp_filter_sample_keep(&tenth, 1, 0.2f), 1);
    /* with p = 0.3 and a label, label-0 rows sample like the plain filter */
    dpp_filter_t neg30 = {.kind = DPP_FILTER_SAMPLE, .p = 0.3, .has_label = 1, .label = 0.0};
    dpp_filter_prepare(&neg30);
    for (unsigned i = 0; i < 1000; i++) {
        uint64_t key = dpp_row_key(ph, i);
        assert_int_equal(dpp_filter_sample_keep(&neg30, key, 0.0f),
                         dpp_filter_sample_keep(&some, key, 0.0f));
        assert_int_equal(dpp_filter_sample_keep(&neg30, key, 1.0f), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clamp),        cmocka_unit_test(test_log1p),
        cmocka_unit_test(test_log1p_bound),
        cmocka_unit_test(test_fill_missing), cmocka_unit_test(test_missing),
        cmocka_unit_test(test_dense_chains), cmocka_unit_test(test_modulo),
        cmocka_unit_test(test_truncate),     cmocka_unit_test(test_sparse_chains),
        cmocka_unit_test(test_standardize),  cmocka_unit_test(test_bucketize),
        cmocka_unit_test(test_cast_int),     cmocka_unit_test(test_cast_bfloat16),
        cmocka_unit_test(test_cast_float16), cmocka_unit_test(test_dense_dim),
        cmocka_unit_test(test_hash_vectors), cmocka_unit_test(test_modulo_exact),
        cmocka_unit_test(test_weights),      cmocka_unit_test(test_row_identity),
        cmocka_unit_test(test_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
