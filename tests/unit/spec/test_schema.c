/* SPDX-License-Identifier: Apache-2.0 */
/* What a spec reads from records (spec/schema.h): the names and their roles
 * in order, the absent-feature sentence, and the value rules against
 * hand-made feature references (native lists, as Parquet hands them over). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "spec/schema.h"
#include "spec/spec.h"

static const char spec_json[] =
    "{\"table\": \"t\", \"batch_size\": 8,"
    " \"features\": {\"dense\": [{\"name\": \"d1\"},"
    "   {\"name\": \"d2\", \"dim\": 2, \"transforms\": [{\"op\": \"fill_missing\", \"value\": 0}]}],"
    "  \"sparse\": [{\"name\": \"ids\", \"weights\": \"w\", \"optional\": true},"
    "   {\"name\": \"tag\", \"transforms\": [{\"op\": \"hash\", \"n\": 100}]},"
    "   {\"name\": \"word\", \"transforms\": [{\"op\": \"vocab\", \"file\": \"v.txt\"}]}]},"
    " \"filters\": [{\"op\": \"require\", \"feature\": \"d1\"}],"
    " \"label\": {\"name\": \"y\"}}";

static dpp_spec_t parse(void)
{
    dpp_spec_t sp;
    char err[DPP_SPEC_ERRLEN];
    int rc = dpp_spec_parse(spec_json, strlen(spec_json), &sp, err, sizeof err);
    if (rc)
        fail_msg("spec: %s", err);
    return sp;
}

static void test_names(void **state)
{
    (void)state;
    dpp_spec_t sp = parse();
    dpp_spec_name_t n[16];
    assert_true(dpp_spec_names_max(&sp) <= 16);
    size_t k = dpp_spec_names(&sp, n);
    static const char *const want[] = {"y", "d1", "d2", "ids", "w", "tag", "word", "d1"};
    static const dpp_role_t roles[] = {DPP_ROLE_LABEL,   DPP_ROLE_DENSE,  DPP_ROLE_DENSE,
                                       DPP_ROLE_SPARSE,  DPP_ROLE_WEIGHTS, DPP_ROLE_SPARSE,
                                       DPP_ROLE_SPARSE,  DPP_ROLE_REQUIRE};
    assert_int_equal(k, 8);
    for (size_t i = 0; i < k; i++) {
        assert_string_equal(n[i].name, want[i]);
        assert_int_equal(n[i].role, roles[i]);
    }
    assert_string_equal(n[4].feature->name, "ids"); /* weights know their ids */
    assert_true(n[3].optional && n[4].optional && !n[1].optional);
    /* a record without them: the label and d1 reject it, d2 is filled */
    assert_true(dpp_schema_absent_rejects(&n[0]));
    assert_true(dpp_schema_absent_rejects(&n[1]));
    assert_false(dpp_schema_absent_rejects(&n[2]));
    assert_false(dpp_schema_absent_rejects(&n[3]));
    assert_false(dpp_schema_absent_rejects(&n[7]));

    char text[1024];
    const char *names[] = {"label", "yy", "d1"};
    dpp_schema_absent_text(text, sizeof text, &n[0], "10 records read", names, 3);
    assert_string_equal(text, "feature \"y\" (the label) is in none of the 10 records read: fix "
                              "its name in the spec; did you mean \"yy\"?");
    const char *far[] = {"alpha", "beta"};
    dpp_schema_absent_text(text, sizeof text, &n[5], "10 records read", far, 2);
    assert_string_equal(text, "feature \"tag\" (a sparse feature) is in none of the 10 records "
                              "read: fix its name in the spec (or mark it \"optional\": true if it "
                              "may be missing from every record) (the records hold: alpha, beta)");
    dpp_spec_close(&sp);
}

static dpp_feat_ref_t native(dpp_feat_kind_t kind, const void *data, size_t len)
{
    return (dpp_feat_ref_t){.kind = kind, .list = data, .list_len = len, .native = 1};
}

static void test_values(void **state)
{
    (void)state;
    dpp_spec_t sp = parse();
    dpp_spec_name_t n[16];
    dpp_spec_names(&sp, n);
    char buf[512];
    const float one_f[1] = {1.5f}, two_f[2] = {1, 2};
    const int64_t one_i[1] = {7}, three_i[3] = {1, 2, 3};
    /* one string, "ab": a uint32 length then the bytes */
    uint8_t str[6];
    uint32_t two = 2;
    memcpy(str, &two, 4);
    memcpy(str + 4, "ab", 2);
    dpp_feat_ref_t f1 = native(DPP_FEAT_FLOAT, one_f, sizeof one_f);
    dpp_feat_ref_t f2 = native(DPP_FEAT_FLOAT, two_f, sizeof two_f);
    dpp_feat_ref_t i1 = native(DPP_FEAT_INT64, one_i, sizeof one_i);
    dpp_feat_ref_t i3 = native(DPP_FEAT_INT64, three_i, sizeof three_i);
    dpp_feat_ref_t s1 = native(DPP_FEAT_BYTES, str, sizeof str);
    dpp_feat_ref_t absent = {0};

    /* label and dense: dim numbers, floats or integers */
    assert_null(dpp_schema_value_problem(&n[0], &f1, 0, buf, sizeof buf));
    assert_null(dpp_schema_value_problem(&n[0], &i1, 0, buf, sizeof buf));
    assert_string_equal(dpp_schema_value_problem(&n[0], &f2, 0, buf, sizeof buf),
                        "holds 2 values where a label has 1");
    assert_string_equal(dpp_schema_value_problem(&n[2], &i3, 0, buf, sizeof buf),
                        "holds 3 values where the spec's dim is 2");
    assert_null(dpp_schema_value_problem(&n[2], &f2, 0, buf, sizeof buf));
    assert_non_null(strstr(dpp_schema_value_problem(&n[1], &s1, 0, buf, sizeof buf),
                           "holds strings, and a dense feature takes numbers"));
    assert_null(dpp_schema_value_problem(&n[1], &absent, 0, buf, sizeof buf));
    /* sparse: integers; strings only through hash or vocab; vocab no integers */
    assert_null(dpp_schema_value_problem(&n[3], &i3, 0, buf, sizeof buf));
    assert_non_null(strstr(dpp_schema_value_problem(&n[3], &s1, 0, buf, sizeof buf),
                           "start its transforms with a \"hash\" or \"vocab\" op"));
    assert_non_null(strstr(dpp_schema_value_problem(&n[3], &f1, 0, buf, sizeof buf),
                           "holds floats"));
    assert_null(dpp_schema_value_problem(&n[5], &s1, 0, buf, sizeof buf));
    assert_null(dpp_schema_value_problem(&n[5], &i1, 0, buf, sizeof buf)); /* hash of an id */
    assert_null(dpp_schema_value_problem(&n[6], &s1, 0, buf, sizeof buf));
    assert_non_null(strstr(dpp_schema_value_problem(&n[6], &i1, 0, buf, sizeof buf),
                           "a vocab op maps strings"));
    /* weights: one float per id, absent only with no ids */
    assert_int_equal(dpp_schema_ids(&i3), 3);
    assert_int_equal(dpp_schema_ids(&s1), 1);
    assert_int_equal(dpp_schema_ids(&absent), 0);
    assert_null(dpp_schema_value_problem(&n[4], &f2, 2, buf, sizeof buf));
    assert_null(dpp_schema_value_problem(&n[4], &absent, 0, buf, sizeof buf));
    assert_string_equal(dpp_schema_value_problem(&n[4], &absent, 3, buf, sizeof buf),
                        "holds 0 weights for the 3 ids of \"ids\"");
    assert_string_equal(dpp_schema_value_problem(&n[4], &i1, 1, buf, sizeof buf),
                        "holds integers, and weights are floats");
    /* a damaged list: a float list whose length is no multiple of 4 */
    dpp_feat_ref_t bad = native(DPP_FEAT_FLOAT, one_f, 3);
    assert_string_equal(dpp_schema_value_problem(&n[0], &bad, 0, buf, sizeof buf),
                        "holds a damaged list of floats");
    /* a require filter takes anything */
    assert_null(dpp_schema_value_problem(&n[7], &s1, 0, buf, sizeof buf));
    dpp_spec_close(&sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
