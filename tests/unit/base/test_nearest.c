/* SPDX-License-Identifier: Apache-2.0 */
/* "Did you mean" (base/nearest.c): slips are found, far words are not,
 * and the list of what exists is given when it is short. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/nearest.h"

static const char *const keys[] = {"table", "partitions", "batch_size", "epochs", "consumers",
                                   "label", "features",   "n",          "op",     NULL};

static void test_nearest(void **state)
{
    (void)state;
    assert_string_equal(dpp_nearest("epoch", keys, SIZE_MAX), "epochs");         /* insertion */
    assert_string_equal(dpp_nearest("tabel", keys, SIZE_MAX), "table");          /* swap */
    assert_string_equal(dpp_nearest("batchsize", keys, SIZE_MAX), "batch_size"); /* deletion */
    assert_string_equal(dpp_nearest("Consumers", keys, SIZE_MAX), "consumers");  /* case */
    assert_string_equal(dpp_nearest("N", keys, SIZE_MAX), "n");
    assert_string_equal(dpp_nearest("labels_v2", keys, SIZE_MAX), "label"); /* prefix */
    assert_string_equal(dpp_nearest("feat", keys, SIZE_MAX), "features");   /* cut short */
    assert_null(dpp_nearest("table", keys, SIZE_MAX));                      /* it is one */
    assert_null(dpp_nearest("shuffle", keys, SIZE_MAX));                    /* far */
    assert_null(dpp_nearest("xyz", keys, SIZE_MAX));
    assert_null(dpp_nearest("anything", keys, 0));
    /* n bounds the list */
    assert_null(dpp_nearest("epoch", keys, 3));
}

static void test_suggest(void **state)
{
    (void)state;
    char buf[256];
    static const char *const ops[] = {"fill_missing", "clamp", "log1p", NULL};
    assert_string_equal(dpp_suggest(buf, sizeof buf, "log", ops, SIZE_MAX, "ops", 8),
                        "; did you mean \"log1p\"? (ops: fill_missing, clamp, log1p)");
    assert_string_equal(dpp_suggest(buf, sizeof buf, "zzz", ops, SIZE_MAX, "ops", 8),
                        " (ops: fill_missing, clamp, log1p)");
    /* too many to list: only the nearest */
    assert_string_equal(dpp_suggest(buf, sizeof buf, "clmap", ops, SIZE_MAX, "ops", 2),
                        "; did you mean \"clamp\"?");
    assert_string_equal(dpp_suggest(buf, sizeof buf, "zzz", ops, SIZE_MAX, "ops", 2), "");
    /* a short buffer is cut, never overrun */
    char small[12];
    dpp_suggest(small, sizeof small, "log", ops, SIZE_MAX, "ops", 8);
    assert_int_equal(strlen(small), sizeof small - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest),
        cmocka_unit_test(test_suggest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
