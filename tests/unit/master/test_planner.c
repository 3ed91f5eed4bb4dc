// SPDX-License-Identifier: Apache-2.0
// The TFRecord planner: which index results it accepts and the record
// ranges it cuts from them (src/master/planner_tfrecord.c).
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "master/planner.h"

static void test_ranges(void **state)
{
    (void)state;
    const dpp_planner_t *p = dpp_planner_for(DPP_FORMAT_TFRECORD, 0);
    assert_ptr_equal(p, &dpp_planner_tfrecord);
    /* a text session's planner, whatever its table's format */
    assert_ptr_equal(dpp_planner_for(DPP_FORMAT_PARQUET, 1), &dpp_planner_text);
    assert_ptr_equal(dpp_planner_for(DPP_FORMAT_TEXT, 0), &dpp_planner_text);
    assert_ptr_equal(dpp_planner_for(DPP_FORMAT_PARQUET, 0), &dpp_planner_parquet);
    /* 10 records cut every 4: ranges of 4, 4 and 2 */
    const uint64_t bounds[] = {0, 400, 800, 1000};
    char err[128];
    assert_int_equal(p->check(10, bounds, 4, 4, err, sizeof err), 1);
    assert_int_equal(p->nranges(10, bounds, 4), 3);
    dpp_range_t r;
    p->range(10, bounds, 4, 4, 0, &r);
    assert_int_equal(r.record_start, 0);
    assert_int_equal(r.record_count, 4);
    assert_int_equal(r.byte_start, 0);
    assert_int_equal(r.byte_end, 400);
    p->range(10, bounds, 4, 4, 2, &r);
    assert_int_equal(r.record_start, 8);
    assert_int_equal(r.record_count, 2);
    assert_int_equal(r.byte_start, 800);
    assert_int_equal(r.byte_end, 1000);
    /* an empty file: one boundary, no range */
    const uint64_t empty[] = {0};
    assert_int_equal(p->check(0, empty, 1, 4, err, sizeof err), 1);
    assert_int_equal(p->nranges(0, empty, 1), 0);
}

static void test_check_refuses(void **state)
{
    (void)state;
    const dpp_planner_t *p = dpp_planner_for(DPP_FORMAT_TFRECORD, 0);
    const uint64_t bounds[] = {0, 400, 800, 1000};
    const uint64_t back[] = {0, 400, 300, 1000};
    char err[128];
    assert_int_equal(p->check(10, bounds, 0, 4, err, sizeof err), 0);
    assert_string_equal(err, "0 boundaries for 10 records cut every 4");
    assert_int_equal(p->check(10, bounds, 3, 4, err, sizeof err), 0); /* a range short */
    assert_int_equal(p->check(12, bounds, 4, 4, err, sizeof err), 1);
    assert_int_equal(p->check(13, bounds, 4, 4, err, sizeof err), 0); /* a range missing */
    assert_int_equal(p->check(2, bounds, 4, 4, err, sizeof err), 0);  /* more ranges than records */
    assert_int_equal(p->check(10, back, 4, 4, err, sizeof err), 0);
    assert_string_equal(err, "boundary 2 (300) is not after boundary 1 (400)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_check_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
