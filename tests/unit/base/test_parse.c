/* SPDX-License-Identifier: Apache-2.0 */
/* Strict whole-number parsing of option values: what is a number, what is
 * out of range, and the one-line message an option gets for either. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/parse.h"

static void test_numbers(void **state)
{
    (void)state;
    unsigned long long v = 7;
    assert_int_equal(dpp_parse_uint("0", 10, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(dpp_parse_uint("10", 10, &v), 0);
    assert_int_equal(v, 10);
    assert_int_equal(dpp_parse_uint("0042", 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(dpp_parse_uint("18446744073709551615", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {"",    "abc", "12abc",       "abc12", " 5",  "5 ",
                                      "+5",  "-5",  "-0",          "0x10",  "1e3", "1.",
                                      "1.5", "5ms", "\t1",         "1\n",   "5,0", "--5",
                                      "+",   "-",   "\xef\xbc\x91" /* fullwidth 1 */};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        unsigned long long v = 7;
        if (dpp_parse_uint(bad[i], 1000, &v) != -EINVAL)
            fail_msg("\"%s\" was not refused as malformed", bad[i]);
        assert_int_equal(v, 7); /* untouched */
    }
    unsigned long long v = 7;
    assert_int_equal(dpp_parse_uint(NULL, 1000, &v), -EINVAL);
    /* malformed wins over too big: every character is checked */
    assert_int_equal(dpp_parse_uint("99999999999999999999999x", 1000, &v), -EINVAL);
}

static void test_range(void **state)
{
    (void)state;
    unsigned long long v = 7;
    assert_int_equal(dpp_parse_uint("11", 10, &v), -ERANGE);
    assert_int_equal(dpp_parse_uint("1", 0, &v), -ERANGE);
    assert_int_equal(dpp_parse_uint("18446744073709551616", UINT64_MAX, &v), -ERANGE);
    assert_int_equal(dpp_parse_uint("99999999999999999999999", UINT64_MAX, &v), -ERANGE);
    assert_int_equal(v, 7);
}

/* Runs dpp_parse_option_uint() with stderr captured into msg. */
static int option(const char *arg, unsigned long long min, unsigned long long max, const char *unit,
                  unsigned long long *v, char *msg, size_t len)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    int rc = dpp_parse_option_uint("prog", "wait-ms", arg, min, max, unit, v);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(msg, 1, len - 1, tmp);
    msg[n] = '\0';
    fclose(tmp);
    return rc;
}

static void test_option_messages(void **state)
{
    (void)state;
    char msg[256];
    unsigned long long v = 7;
    assert_int_equal(option("250", 1, 1000, "milliseconds", &v, msg, sizeof msg), 0);
    assert_int_equal(v, 250);
    assert_string_equal(msg, "");

    assert_int_equal(option("abc", 1, 1000, "milliseconds", &v, msg, sizeof msg), -EINVAL);
    assert_string_equal(msg, "prog: --wait-ms: \"abc\" is not a whole number of milliseconds\n");
    assert_int_equal(option("", 1, 1000, NULL, &v, msg, sizeof msg), -EINVAL);
    assert_string_equal(msg, "prog: --wait-ms: \"\" is not a whole number\n");

    assert_int_equal(option("0", 1, 1000, "milliseconds", &v, msg, sizeof msg), -ERANGE);
    assert_string_equal(msg, "prog: --wait-ms: \"0\" is out of range: 1 to 1000 milliseconds\n");
    assert_int_equal(option("1001", 1, 1000, NULL, &v, msg, sizeof msg), -ERANGE);
    assert_string_equal(msg, "prog: --wait-ms: \"1001\" is out of range: 1 to 1000\n");
    assert_int_equal(v, 250); /* untouched by every refusal */

    assert_int_equal(option("0", 0, 1000, NULL, &v, msg, sizeof msg), 0);
    assert_int_equal(v, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_option_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
