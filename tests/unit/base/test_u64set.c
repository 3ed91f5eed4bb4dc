// SPDX-License-Identifier: Apache-2.0
// The 64-bit key set against a plain sorted array: random adds and removes
// (keys drawn from a small space so that probe runs collide and wrap), and
// after each step every key of the space answers as the array does.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/u64set.h"

static uint64_t next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void test_against_array(void **state)
{
    (void)state;
    enum { SPACE = 3000, STEPS = 40000 };
    /* keys that share their home slots: multiples of a power of two, and
     * some that are plain small numbers */
    uint64_t keys[SPACE];
    for (size_t i = 0; i < SPACE; i++)
        keys[i] = i % 3 ? (uint64_t)(i + 1) << 40 : (uint64_t)(i + 1);
    uint8_t in[SPACE] = {0};
    size_t n = 0;
    dpp_u64set_t s = {0};
    uint64_t x = 88172645463325252ull;
    for (int step = 0; step < STEPS; step++) {
        size_t i = (size_t)(next(&x) % SPACE);
        if (next(&x) % 3) {
            assert_int_equal(dpp_u64set_add(&s, keys[i]), !in[i]);
            n += !in[i];
            in[i] = 1;
        } else {
            assert_int_equal(dpp_u64set_remove(&s, keys[i]), in[i]);
            n -= in[i];
            in[i] = 0;
        }
        assert_int_equal(s.n, n);
        if (step % 997 == 0)
            for (size_t k = 0; k < SPACE; k++)
                assert_int_equal(dpp_u64set_has(&s, keys[k]), in[k]);
    }
    for (size_t k = 0; k < SPACE; k++)
        assert_int_equal(dpp_u64set_has(&s, keys[k]), in[k]);
    /* 0 is never a member */
    assert_int_equal(dpp_u64set_add(&s, 0), 0);
    assert_int_equal(dpp_u64set_has(&s, 0), 0);
    dpp_u64set_clear(&s);
    assert_int_equal(s.n, 0);
    assert_int_equal(dpp_u64set_has(&s, keys[1]), 0);
}

/* As a multiset (insert): copies counted per key against an array of
 * counts; a key stays a member until its last copy is removed. */
static void test_multiset_against_counts(void **state)
{
    (void)state;
    enum { SPACE = 500, STEPS = 30000 };
    uint64_t keys[SPACE];
    for (size_t i = 0; i < SPACE; i++)
        keys[i] = (uint64_t)(i + 1) << (i % 2 ? 44 : 3);
    unsigned count[SPACE] = {0};
    size_t n = 0;
    dpp_u64set_t s = {0};
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int step = 0; step < STEPS; step++) {
        size_t i = (size_t)(next(&x) % SPACE);
        if (next(&x) % 2) {
            assert_int_equal(dpp_u64set_insert(&s, keys[i]), 1);
            count[i]++;
            n++;
        } else {
            assert_int_equal(dpp_u64set_remove(&s, keys[i]), count[i] > 0);
            n -= count[i] > 0;
            count[i] -= count[i] > 0;
        }
        assert_int_equal(s.n, n);
        if (step % 499 == 0)
            for (size_t k = 0; k < SPACE; k++)
                assert_int_equal(dpp_u64set_has(&s, keys[k]), count[k] > 0);
    }
    /* removing every copy empties the set */
    for (size_t k = 0; k < SPACE; k++)
        while (count[k]--)
            assert_int_equal(dpp_u64set_remove(&s, keys[k]), 1);
    assert_int_equal(s.n, 0);
    for (size_t k = 0; k < SPACE; k++)
        assert_int_equal(dpp_u64set_has(&s, keys[k]), 0);
    assert_int_equal(dpp_u64set_insert(&s, 0), 0);
    dpp_u64set_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_against_array),
                                       cmocka_unit_test(test_multiset_against_counts)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
