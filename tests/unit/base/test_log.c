// SPDX-License-Identifier: Apache-2.0
// Log values quoted so that peer-supplied text keeps a line one key=value line.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/log.h"
#include "dpp/error.h"

static void test_quote(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(dpp_log_quote("plain", buf, sizeof buf), "\"plain\"");
    assert_string_equal(dpp_log_quote("op \"logp\"", buf, sizeof buf), "\"op \\\"logp\\\"\"");
    assert_string_equal(dpp_log_quote("a\\b", buf, sizeof buf), "\"a\\\\b\"");
    assert_string_equal(dpp_log_quote("two\nlines\t", buf, sizeof buf), "\"two?lines?\"");
    assert_string_equal(dpp_log_quote("", buf, sizeof buf), "\"\"");
    /* cut to fit, still closed */
    char small[8];
    assert_string_equal(dpp_log_quote("abcdefghij", small, sizeof small), "\"abcd\"");
    assert_string_equal(dpp_log_quote("\"\"\"\"", small, sizeof small), "\"\\\"\\\"\"");
    char tiny[2];
    assert_string_equal(dpp_log_quote("x", tiny, sizeof tiny), "");
}

static void test_levels(void **state)
{
    (void)state;
    dpp_log_level_t lvl;
    assert_int_equal(dpp_log_parse_level("warn", &lvl), 0);
    assert_int_equal(lvl, DPP_LOG_WARN);
    assert_int_equal(dpp_log_parse_level("loud", &lvl), DPP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
