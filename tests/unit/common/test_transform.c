// SPDX-License-Identifier: Apache-2.0
// Transform chains at edge values. Expected numbers are literals or plain
// libm calls, never the code under test.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "common/transform.h"
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
    return (dpp_transform_t){.op = DPP_OP_MODULO, .n = n};
}

static dpp_transform_t truncate_op(uint32_t max_len)
{
    return (dpp_transform_t){.op = DPP_OP_TRUNCATE, .max_len = max_len};
}

/* Runs a present value through ops; the result must be bit-identical to want
 * (NaN compares as NaN, and -0 differs from +0). */
static void check_dense(const dpp_transform_t *ops, unsigned nops, float in, float want)
{
    float out = 12345.0f;
    assert_int_equal(dpp_transform_dense(ops, nops, 1, in, &out), 0);
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

static void test_fill_missing(void **state)
{
    (void)state;
    float out = 0.0f;
    dpp_transform_t ops[] = {fill(2.5), log1p_op()};

    /* absent: the value, cast to float, then the rest of the chain */
    assert_int_equal(dpp_transform_dense(ops, 1, 0, 99.0f, &out), 0);
    assert_true(out == 2.5f);
    assert_int_equal(dpp_transform_dense(ops, 2, 0, 99.0f, &out), 0);
    assert_true(out == (float)log1p((double)2.5f));

    dpp_transform_t tenth = fill(0.1);
    assert_int_equal(dpp_transform_dense(&tenth, 1, 0, 0.0f, &out), 0);
    assert_true(out == 0.1f);
    dpp_transform_t neg = fill(-FLT_MAX);
    assert_int_equal(dpp_transform_dense(&neg, 1, 0, 0.0f, &out), 0);
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

    assert_int_equal(dpp_transform_dense(NULL, 0, 0, 0.0f, &out), DPP_EMISSING);
    assert_int_equal(dpp_transform_dense(ops, 1, 0, 0.0f, &out), DPP_EMISSING);
    /* fill_missing anywhere but first does not count (the parser forbids it) */
    assert_int_equal(dpp_transform_dense(ops, 2, 0, 0.0f, &out), DPP_EMISSING);

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
    assert_int_equal(dpp_transform_dense(criteo, 3, 0, 0.0f, &out), DPP_EMISSING);

    dpp_transform_t filled[] = {fill(-3.0), clamp(0.0, INFINITY), log1p_op(), clamp(0.0, 20.0)};
    assert_int_equal(dpp_transform_dense(filled, 4, 0, 123.0f, &out), 0);
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
    assert_int_equal(dpp_transform_sparse(&ten, 1, ids, 10), 10);
    check_ids(ids, want, 10);

    dpp_transform_t one = modulo(1);
    int64_t ones[] = {INT64_MIN, -1, 0, 1, INT64_MAX};
    const int64_t zeros[] = {0, 0, 0, 0, 0};
    assert_int_equal(dpp_transform_sparse(&one, 1, ones, 5), 5);
    check_ids(ones, zeros, 5);

    /* INT64_MIN = -1 * INT64_MAX - 1, so its floor modulo is INT64_MAX - 1 */
    dpp_transform_t big = modulo(INT64_MAX);
    int64_t wide[] = {INT64_MIN, INT64_MAX, -1, INT64_MAX - 1, 0};
    const int64_t wide_want[] = {INT64_MAX - 1, 0, INT64_MAX - 1, INT64_MAX - 1, 0};
    assert_int_equal(dpp_transform_sparse(&big, 1, wide, 5), 5);
    check_ids(wide, wide_want, 5);

    dpp_transform_t hashing = modulo(100000);
    int64_t h[] = {123456789, -123456789, 99999, 100000};
    const int64_t h_want[] = {56789, 43211, 99999, 0};
    assert_int_equal(dpp_transform_sparse(&hashing, 1, h, 4), 4);
    check_ids(h, h_want, 4);

    /* an empty list stays empty; no ids are touched */
    assert_int_equal(dpp_transform_sparse(&ten, 1, NULL, 0), 0);
}

static void test_truncate(void **state)
{
    (void)state;
    int64_t ids[] = {5, -6, 7, 8, 9};
    const int64_t want[] = {5, -6, 7, 8, 9};

    dpp_transform_t three = truncate_op(3);
    assert_int_equal(dpp_transform_sparse(&three, 1, ids, 5), 3);
    check_ids(ids, want, 3);

    dpp_transform_t longer = truncate_op(10);
    assert_int_equal(dpp_transform_sparse(&longer, 1, ids, 5), 5);
    check_ids(ids, want, 5);

    dpp_transform_t exact = truncate_op(5);
    assert_int_equal(dpp_transform_sparse(&exact, 1, ids, 5), 5);

    dpp_transform_t one = truncate_op(1);
    assert_int_equal(dpp_transform_sparse(&one, 1, ids, 5), 1);
    assert_true(ids[0] == 5);

    dpp_transform_t max = truncate_op(UINT32_MAX);
    assert_int_equal(dpp_transform_sparse(&max, 1, ids, 5), 5);

    assert_int_equal(dpp_transform_sparse(&three, 1, NULL, 0), 0);
    assert_int_equal(dpp_transform_sparse(NULL, 0, ids, 5), 5);
    check_ids(ids, want, 5);
}

static void test_sparse_chains(void **state)
{
    (void)state;
    /* examples/criteo.json: modulo 100000 -> truncate 5 */
    dpp_transform_t criteo[] = {modulo(100000), truncate_op(5)};
    int64_t ids[] = {-1, 100001, 7, 200000, 123456, 999999, 3};
    const int64_t want[] = {99999, 1, 7, 0, 23456};
    assert_int_equal(dpp_transform_sparse(criteo, 2, ids, 7), 5);
    check_ids(ids, want, 5);

    dpp_transform_t chain[] = {truncate_op(4), modulo(7), truncate_op(2), modulo(3)};
    int64_t c[] = {-8, 15, 100, 4, 5};
    /* -8 mod 7 = 6, then mod 3 = 0; 15 mod 7 = 1, then 1 */
    const int64_t c_want[] = {0, 1};
    assert_int_equal(dpp_transform_sparse(chain, 4, c, 5), 2);
    check_ids(c, c_want, 2);

    int64_t none[1];
    assert_int_equal(dpp_transform_sparse(criteo, 2, none, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clamp),        cmocka_unit_test(test_log1p),
        cmocka_unit_test(test_fill_missing), cmocka_unit_test(test_missing),
        cmocka_unit_test(test_dense_chains), cmocka_unit_test(test_modulo),
        cmocka_unit_test(test_truncate),     cmocka_unit_test(test_sparse_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
