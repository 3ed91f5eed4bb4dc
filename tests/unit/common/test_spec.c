// SPDX-License-Identifier: Apache-2.0
// Session spec v1: valid specs and their normalised JSON round trip, and each
// class of invalid spec with the exact error text it must produce.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec.h"
#include "dpp/error.h"

/* A valid spec around which the invalid cases vary one part. */
#define FEATURES_OK "\"features\":{\"dense\":[{\"name\":\"a\"}]}"
#define LABEL_OK "\"label\":{\"name\":\"y\"}"
#define BASE_OK "\"table\":\"t\",\"batch_size\":8"
#define WITH_FEATURES(f) "{" BASE_OK ",\"features\":" f "," LABEL_OK "}"
#define WITH_DENSE_OPS(ops) WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"transforms\":" ops "}]}")
#define WITH_SPARSE_OPS(ops) WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"transforms\":" ops "}]}")

static int parse(const char *json, dpp_spec_t *spec, char *err)
{
    return dpp_spec_parse(json, strlen(json), spec, err, DPP_SPEC_ERRLEN);
}

static int transforms_equal(const dpp_transform_t *a, const dpp_transform_t *b)
{
    return a->op == b->op && a->value == b->value && a->min == b->min && a->max == b->max &&
           a->n == b->n && a->max_len == b->max_len;
}

static int features_equal(const dpp_feature_spec_t *a, const dpp_feature_spec_t *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].dim != b[i].dim || a[i].nops != b[i].nops)
            return 0;
        for (unsigned j = 0; j < a[i].nops; j++)
            if (!transforms_equal(&a[i].ops[j], &b[i].ops[j]))
                return 0;
    }
    return 1;
}

static int specs_equal(const dpp_spec_t *a, const dpp_spec_t *b)
{
    if (strcmp(a->table, b->table) != 0 || a->npartitions != b->npartitions ||
        a->batch_size != b->batch_size || a->epochs != b->epochs || a->consumers != b->consumers ||
        a->ndense != b->ndense || a->nsparse != b->nsparse || strcmp(a->label, b->label) != 0)
        return 0;
    for (unsigned i = 0; i < a->npartitions; i++)
        if (strcmp(a->partitions[i], b->partitions[i]) != 0)
            return 0;
    return features_equal(a->dense, b->dense, a->ndense) &&
           features_equal(a->sparse, b->sparse, a->nsparse);
}

/* Parses json, checks that its normalised form is `normal` (when given) and
 * that the normalised form parses to an equal spec and normalises to itself. */
static void check_round_trip(const char *json, const char *normal)
{
    dpp_spec_t a, b;
    char err[DPP_SPEC_ERRLEN];

    assert_int_equal(parse(json, &a, err), 0);
    char *text = dpp_spec_to_json(&a);
    assert_non_null(text);
    if (normal)
        assert_string_equal(text, normal);
    assert_int_equal(parse(text, &b, err), 0);
    assert_true(specs_equal(&a, &b));
    char *again = dpp_spec_to_json(&b);
    assert_non_null(again);
    assert_string_equal(text, again);
    free(again);
    free(text);
    dpp_spec_close(&a);
    dpp_spec_close(&b);
}

static void test_minimal(void **state)
{
    (void)state;
    const char *json = "{" BASE_OK "," FEATURES_OK "," LABEL_OK "}";
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];

    assert_int_equal(parse(json, &s, err), 0);
    assert_string_equal(s.table, "t");
    assert_int_equal(s.npartitions, 0);
    assert_null(s.partitions);
    assert_int_equal(s.batch_size, 8);
    assert_int_equal(s.epochs, 1);
    assert_int_equal(s.consumers, 1);
    assert_int_equal(s.ndense, 1);
    assert_string_equal(s.dense[0].name, "a");
    assert_int_equal(s.dense[0].dim, 1);
    assert_int_equal(s.dense[0].nops, 0);
    assert_int_equal(s.nsparse, 0);
    assert_string_equal(s.label, "y");
    dpp_spec_close(&s);
    assert_null(s.table);
    dpp_spec_close(&s); /* zeroed: safe again */

    check_round_trip(json, "{\"table\":\"t\",\"batch_size\":8,\"epochs\":1,\"consumers\":1,"
                           "\"features\":{\"dense\":[{\"name\":\"a\",\"transforms\":[]}]},"
                           "\"label\":{\"name\":\"y\"}}");
}

static const char full_spec[] = "{\n"
                                "  \"label\": {\"name\": \"click\"},\n"
                                "  \"consumers\": 4,\n"
                                "  \"epochs\": 3,\n"
                                "  \"features\": {\n"
                                "    \"sparse\": [\n"
                                "      {\"name\": \"c1\", \"transforms\": [\n"
                                "        {\"op\": \"modulo\", \"n\": 100000},\n"
                                "        {\"max_len\": 5, \"op\": \"truncate\"}]},\n"
                                "      {\"name\": \"c2\"}\n"
                                "    ],\n"
                                "    \"dense\": [\n"
                                "      {\"name\": \"i1\", \"transforms\": [\n"
                                "        {\"op\": \"fill_missing\", \"value\": 0},\n"
                                "        {\"op\": \"clamp\", \"min\": 0},\n"
                                "        {\"op\": \"log1p\"},\n"
                                "        {\"op\": \"clamp\", \"max\": 20.5},\n"
                                "        {\"op\": \"clamp\", \"max\": 2.5e1, \"min\": -1}]},\n"
                                "      {\"name\": \"i2\", \"transforms\": []}\n"
                                "    ]\n"
                                "  },\n"
                                "  \"batch_size\": 4096,\n"
                                "  \"partitions\": [\"ds=2026-01-01\", \"ds=2026-01-02\"],\n"
                                "  \"table\": \"logs/criteo\"\n"
                                "}\n";

static void test_full(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];

    assert_int_equal(parse(full_spec, &s, err), 0);
    assert_string_equal(s.table, "logs/criteo");
    assert_int_equal(s.npartitions, 2);
    assert_string_equal(s.partitions[0], "ds=2026-01-01");
    assert_string_equal(s.partitions[1], "ds=2026-01-02");
    assert_int_equal(s.batch_size, 4096);
    assert_int_equal(s.epochs, 3);
    assert_int_equal(s.consumers, 4);

    assert_int_equal(s.ndense, 2);
    const dpp_feature_spec_t *i1 = &s.dense[0];
    assert_string_equal(i1->name, "i1");
    assert_int_equal(i1->dim, 1);
    assert_int_equal(i1->nops, 5);
    assert_int_equal(i1->ops[0].op, DPP_OP_FILL_MISSING);
    assert_true(i1->ops[0].value == 0.0);
    assert_int_equal(i1->ops[1].op, DPP_OP_CLAMP);
    assert_true(i1->ops[1].min == 0.0);
    assert_true(isinf(i1->ops[1].max) && i1->ops[1].max > 0);
    assert_int_equal(i1->ops[2].op, DPP_OP_LOG1P);
    assert_int_equal(i1->ops[3].op, DPP_OP_CLAMP);
    assert_true(isinf(i1->ops[3].min) && i1->ops[3].min < 0);
    assert_true(i1->ops[3].max == 20.5);
    assert_true(i1->ops[4].min == -1.0);
    assert_true(i1->ops[4].max == 25.0);
    assert_string_equal(s.dense[1].name, "i2");
    assert_int_equal(s.dense[1].nops, 0);

    assert_int_equal(s.nsparse, 2);
    const dpp_feature_spec_t *c1 = &s.sparse[0];
    assert_string_equal(c1->name, "c1");
    assert_int_equal(c1->dim, 0);
    assert_int_equal(c1->nops, 2);
    assert_int_equal(c1->ops[0].op, DPP_OP_MODULO);
    assert_int_equal(c1->ops[0].n, 100000);
    assert_int_equal(c1->ops[1].op, DPP_OP_TRUNCATE);
    assert_int_equal(c1->ops[1].max_len, 5);
    assert_string_equal(s.sparse[1].name, "c2");
    assert_int_equal(s.sparse[1].nops, 0);
    assert_string_equal(s.label, "click");
    dpp_spec_close(&s);

    /* Fixed key order, every default written, a clamp bound left out when
     * it was not given, numbers as reals. */
    check_round_trip(
        full_spec,
        "{\"table\":\"logs/criteo\",\"partitions\":[\"ds=2026-01-01\",\"ds=2026-01-02\"],"
        "\"batch_size\":4096,\"epochs\":3,\"consumers\":4,\"features\":{\"dense\":["
        "{\"name\":\"i1\",\"transforms\":[{\"op\":\"fill_missing\",\"value\":0.0},"
        "{\"op\":\"clamp\",\"min\":0.0},{\"op\":\"log1p\"},{\"op\":\"clamp\",\"max\":20.5},"
        "{\"op\":\"clamp\",\"min\":-1.0,\"max\":25.0}]},{\"name\":\"i2\",\"transforms\":[]}],"
        "\"sparse\":[{\"name\":\"c1\",\"transforms\":[{\"op\":\"modulo\",\"n\":100000},"
        "{\"op\":\"truncate\",\"max_len\":5}]},{\"name\":\"c2\",\"transforms\":[]}]},"
        "\"label\":{\"name\":\"click\"}}");
}

static void test_sparse_only_and_limits(void **state)
{
    (void)state;
    check_round_trip("{\"table\":\"t\",\"batch_size\":1048576,\"epochs\":1000000,"
                     "\"consumers\":65536,\"features\":{\"sparse\":[{\"name\":\"s\","
                     "\"transforms\":[{\"op\":\"modulo\",\"n\":9223372036854775807},"
                     "{\"op\":\"truncate\",\"max_len\":2147483647},{\"op\":\"modulo\",\"n\":1}]}]},"
                     "\"label\":{\"name\":\"y\"}}",
                     "{\"table\":\"t\",\"batch_size\":1048576,\"epochs\":1000000,"
                     "\"consumers\":65536,\"features\":{\"sparse\":[{\"name\":\"s\","
                     "\"transforms\":[{\"op\":\"modulo\",\"n\":9223372036854775807},"
                     "{\"op\":\"truncate\",\"max_len\":2147483647},{\"op\":\"modulo\",\"n\":1}]}]},"
                     "\"label\":{\"name\":\"y\"}}");
}

static void test_numbers_round_trip_exactly(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];

    /* Values with no short binary form, the float range's edges, -0 and a
     * clamp with min == max survive the normalised form bit for bit. */
    const char *json = WITH_DENSE_OPS(
        "[{\"op\":\"fill_missing\",\"value\":0.1},{\"op\":\"clamp\",\"min\":-3.4028234663852886e38,"
        "\"max\":3.4028234663852886e38},{\"op\":\"clamp\",\"min\":-0.0,\"max\":1e-45},"
        "{\"op\":\"clamp\",\"min\":7,\"max\":7},{\"op\":\"clamp\",\"min\":1.5e-7}]");
    assert_int_equal(parse(json, &s, err), 0);
    assert_true(s.dense[0].ops[0].value == 0.1);
    assert_true(s.dense[0].ops[1].max == (double)3.40282346638528859811704183484516925440e+38);
    assert_true(s.dense[0].ops[2].min == 0.0 && signbit(s.dense[0].ops[2].min));
    assert_true(s.dense[0].ops[3].min == 7.0 && s.dense[0].ops[3].max == 7.0);
    dpp_spec_close(&s);
    check_round_trip(json, NULL);

    /* Paths that stay inside a root lexically, and odd but valid names. */
    check_round_trip(
        "{\"table\":\"./a//b/..c/\",\"batch_size\":1,\"features\":{\"dense\":"
        "[{\"name\":\"\\u00e9t\\u00e9\"}]},\"label\":{\"name\":\"a b\"}}",
        "{\"table\":\"./a//b/..c/\",\"batch_size\":1,\"epochs\":1,\"consumers\":1,"
        "\"features\":{\"dense\":[{\"name\":\"\xc3\xa9t\xc3\xa9\",\"transforms\":[]}]},"
        "\"label\":{\"name\":\"a b\"}}");
}

typedef struct bad_case {
    const char *json;
    const char *err;
} bad_case_t;

static const bad_case_t bad_cases[] = {
    /* JSON syntax, reported with jansson's position and text */
    {"{\n  \"table\": \"t\",\n    x\n}", "line 3, column 5: string or '}' expected near 'x'"},
    {"", "line 1, column 0: '[' or '{' expected near end of file"},
    {"{\"table\":\"t\",\"table\":\"u\"}",
     "line 1, column 20: duplicate object key near '\"table\"'"},
    {"{\"batch_size\":1e400}", "line 1, column 19: real number overflow near '1e400'"},
    {"{\"batch_size\":99999999999999999999}",
     "line 1, column 34: too big integer near '99999999999999999999'"},
    {"{\"a\":NaN}", "line 1, column 8: invalid token near 'NaN'"},
    {"[1]", "(root): expected an object"},

    /* unknown keys at every level, the first in document order */
    {"{\"zz\":1,\"aa\":2," BASE_OK "," FEATURES_OK "," LABEL_OK "}", "zz: unknown key"},
    {"{" BASE_OK ",\"features\":{\"dense\":[{\"name\":\"a\",\"foo\":1}]}," LABEL_OK "}",
     "features.dense[0].foo: unknown key"},
    {"{" BASE_OK ",\"features\":{\"dense\":[{\"name\":\"a\"}],\"bytes\":[]}," LABEL_OK "}",
     "features.bytes: unknown key"},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":{\"name\":\"y\",\"weight\":1}}",
     "label.weight: unknown key"},
    {WITH_DENSE_OPS("[{\"op\":\"log1p\",\"base\":2}]"),
     "features.dense[0].transforms[0].base: unknown key"},
    {WITH_DENSE_OPS("[{\"op\":\"fill_missing\",\"value\":1,\"min\":0}]"),
     "features.dense[0].transforms[0].min: unknown key"},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\",\"n\":3,\"max_len\":2}]"),
     "features.sparse[0].transforms[0].max_len: unknown key"},
    {"{\"a\\nb\":1}", "a?b: unknown key"},

    /* required keys */
    {"{\"batch_size\":8," FEATURES_OK "," LABEL_OK "}", "table: required"},
    {"{\"table\":\"t\"," FEATURES_OK "," LABEL_OK "}", "batch_size: required"},
    {"{" BASE_OK "," LABEL_OK "}", "features: required"},
    {"{" BASE_OK "," FEATURES_OK "}", "label: required"},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":{}}", "label.name: required"},
    {WITH_FEATURES("{\"dense\":[{\"transforms\":[]}]}"), "features.dense[0].name: required"},
    {WITH_DENSE_OPS("[{\"value\":1}]"), "features.dense[0].transforms[0].op: required"},
    {WITH_DENSE_OPS("[{\"op\":\"fill_missing\"}]"),
     "features.dense[0].transforms[0].value: required"},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\"}]"), "features.sparse[0].transforms[0].n: required"},
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\"}]"),
     "features.sparse[0].transforms[0].max_len: required"},
    {WITH_DENSE_OPS("[{\"op\":\"clamp\"}]"),
     "features.dense[0].transforms[0]: clamp needs \"min\" or \"max\""},

    /* wrong types */
    {"{\"table\":7,\"batch_size\":8," FEATURES_OK "," LABEL_OK "}", "table: expected a string"},
    {"{\"table\":\"t\",\"batch_size\":\"8\"," FEATURES_OK "," LABEL_OK "}",
     "batch_size: expected an integer"},
    {"{\"table\":\"t\",\"batch_size\":8.0," FEATURES_OK "," LABEL_OK "}",
     "batch_size: expected an integer"},
    {"{\"table\":\"t\",\"batch_size\":true," FEATURES_OK "," LABEL_OK "}",
     "batch_size: expected an integer"},
    {"{" BASE_OK ",\"epochs\":1.5," FEATURES_OK "," LABEL_OK "}", "epochs: expected an integer"},
    {"{" BASE_OK ",\"consumers\":null," FEATURES_OK "," LABEL_OK "}",
     "consumers: expected an integer"},
    {"{" BASE_OK ",\"partitions\":\"ds=1\"," FEATURES_OK "," LABEL_OK "}",
     "partitions: expected an array"},
    {"{" BASE_OK ",\"features\":[]," LABEL_OK "}", "features: expected an object"},
    {WITH_FEATURES("{\"dense\":{\"name\":\"a\"}}"), "features.dense: expected an array"},
    {WITH_FEATURES("{\"sparse\":[\"s\"]}"), "features.sparse[0]: expected an object"},
    {WITH_FEATURES("{\"dense\":[{\"name\":1}]}"), "features.dense[0].name: expected a string"},
    {WITH_DENSE_OPS("{}"), "features.dense[0].transforms: expected an array"},
    {WITH_DENSE_OPS("[\"log1p\"]"), "features.dense[0].transforms[0]: expected an object"},
    {WITH_DENSE_OPS("[{\"op\":[\"log1p\"]}]"),
     "features.dense[0].transforms[0].op: expected a string"},
    {WITH_DENSE_OPS("[{\"op\":\"fill_missing\",\"value\":\"0\"}]"),
     "features.dense[0].transforms[0].value: expected a number"},
    {WITH_DENSE_OPS("[{\"op\":\"clamp\",\"min\":null}]"),
     "features.dense[0].transforms[0].min: expected a number"},
    {WITH_DENSE_OPS("[{\"op\":\"clamp\",\"min\":0,\"max\":false}]"),
     "features.dense[0].transforms[0].max: expected a number"},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\",\"n\":10.0}]"),
     "features.sparse[0].transforms[0].n: expected an integer"},
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\",\"max_len\":\"5\"}]"),
     "features.sparse[0].transforms[0].max_len: expected an integer"},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":\"y\"}", "label: expected an object"},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":{\"name\":[]}}", "label.name: expected a string"},

    /* empty lists and strings */
    {WITH_FEATURES("{\"dense\":[]}"), "features.dense: must not be empty"},
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\"}],\"sparse\":[]}"),
     "features.sparse: must not be empty"},
    {WITH_FEATURES("{}"), "features: no features"},
    {"{" BASE_OK ",\"partitions\":[]," FEATURES_OK "," LABEL_OK "}",
     "partitions: must not be empty (leave it out to select every partition)"},
    {"{\"table\":\"\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}", "table: must not be empty"},
    {WITH_FEATURES("{\"dense\":[{\"name\":\"\"}]}"), "features.dense[0].name: must not be empty"},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":{\"name\":\"\"}}", "label.name: must not be empty"},
    {WITH_DENSE_OPS("[{\"op\":\"\"}]"), "features.dense[0].transforms[0].op: must not be empty"},

    /* ranges */
    {"{\"table\":\"t\",\"batch_size\":0," FEATURES_OK "," LABEL_OK "}", "batch_size: must be > 0"},
    {"{\"table\":\"t\",\"batch_size\":-4," FEATURES_OK "," LABEL_OK "}", "batch_size: must be > 0"},
    {"{\"table\":\"t\",\"batch_size\":1048577," FEATURES_OK "," LABEL_OK "}",
     "batch_size: must be <= 1048576"},
    {"{" BASE_OK ",\"epochs\":0," FEATURES_OK "," LABEL_OK "}", "epochs: must be > 0"},
    {"{" BASE_OK ",\"epochs\":1000001," FEATURES_OK "," LABEL_OK "}", "epochs: must be <= 1000000"},
    {"{" BASE_OK ",\"consumers\":0," FEATURES_OK "," LABEL_OK "}", "consumers: must be > 0"},
    {"{" BASE_OK ",\"consumers\":65537," FEATURES_OK "," LABEL_OK "}",
     "consumers: must be <= 65536"},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\",\"n\":0}]"),
     "features.sparse[0].transforms[0].n: must be > 0"},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\",\"n\":-7}]"),
     "features.sparse[0].transforms[0].n: must be > 0"},
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\",\"max_len\":0}]"),
     "features.sparse[0].transforms[0].max_len: must be > 0"},
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\",\"max_len\":2147483648}]"),
     "features.sparse[0].transforms[0].max_len: must be <= 2147483647"},
    {WITH_DENSE_OPS("[{\"op\":\"clamp\",\"min\":2,\"max\":1.5}]"),
     "features.dense[0].transforms[0].min: must be <= max"},
    {WITH_DENSE_OPS("[{\"op\":\"fill_missing\",\"value\":1e39}]"),
     "features.dense[0].transforms[0].value: out of the float range"},
    {WITH_DENSE_OPS("[{\"op\":\"clamp\",\"max\":-3.5e38}]"),
     "features.dense[0].transforms[0].max: out of the float range"},

    /* duplicate feature names, across dense, sparse and the label */
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\"},{\"name\":\"a\"}]}"),
     "features.dense[1].name: duplicate feature name \"a\""},
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\"}],\"sparse\":[{\"name\":\"b\"},{\"name\":\"a\"}]}"),
     "features.sparse[1].name: duplicate feature name \"a\""},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":{\"name\":\"a\"}}",
     "label.name: duplicate feature name \"a\""},

    /* partitions entries */
    {"{" BASE_OK ",\"partitions\":[\"ds=1\",2]," FEATURES_OK "," LABEL_OK "}",
     "partitions[1]: expected a string"},
    {"{" BASE_OK ",\"partitions\":[\"ds=1\",\"ds=2/h=3\"]," FEATURES_OK "," LABEL_OK "}",
     "partitions[1]: must be a folder name, without '/'"},
    {"{" BASE_OK ",\"partitions\":[\"..\"]," FEATURES_OK "," LABEL_OK "}",
     "partitions[0]: must be a folder name, not \".\" or \"..\""},
    {"{" BASE_OK ",\"partitions\":[\".\"]," FEATURES_OK "," LABEL_OK "}",
     "partitions[0]: must be a folder name, not \".\" or \"..\""},
    {"{" BASE_OK ",\"partitions\":[\"\"]," FEATURES_OK "," LABEL_OK "}",
     "partitions[0]: must not be empty"},
    {"{" BASE_OK ",\"partitions\":[\"ds=1\",\"ds=2\",\"ds=1\"]," FEATURES_OK "," LABEL_OK "}",
     "partitions[2]: duplicate partition \"ds=1\""},

    /* table paths that leave their root lexically */
    {"{\"table\":\"/etc\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root"},
    {"{\"table\":\"x/../../etc\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root"},
    {"{\"table\":\"..\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root"},
    {"{\"table\":\"a/..\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root"},
    {"{\"table\":\"a//../b\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root"},

    /* ops: unknown, on the wrong kind of feature, misplaced */
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"d\","
                   "\"transforms\":[{\"op\":\"logp\"}]}]}"),
     "features.dense[3].transforms[0].op: unknown op \"logp\""},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\",\"n\":3},{\"op\":\"log1p\"}]"),
     "features.sparse[0].transforms[1].op: op \"log1p\" applies to dense features, not sparse"},
    {WITH_SPARSE_OPS("[{\"op\":\"fill_missing\",\"value\":0}]"),
     "features.sparse[0].transforms[0].op: op \"fill_missing\" applies to dense features, not "
     "sparse"},
    {WITH_DENSE_OPS("[{\"op\":\"modulo\",\"n\":3}]"),
     "features.dense[0].transforms[0].op: op \"modulo\" applies to sparse features, not dense"},
    {WITH_DENSE_OPS("[{\"op\":\"truncate\",\"max_len\":3}]"),
     "features.dense[0].transforms[0].op: op \"truncate\" applies to sparse features, not dense"},
    {WITH_DENSE_OPS("[{\"op\":\"log1p\"},{\"op\":\"fill_missing\",\"value\":0}]"),
     "features.dense[0].transforms[1].op: fill_missing must be the first op"},
    {WITH_DENSE_OPS(
         "[{\"op\":\"fill_missing\",\"value\":0},{\"op\":\"fill_missing\",\"value\":1}]"),
     "features.dense[0].transforms[1].op: fill_missing must be the first op"},

    /* only the first error is reported */
    {"{\"table\":\"/abs\",\"batch_size\":0,\"features\":{}}",
     "table: must be a relative path inside a data root"},
};

static void test_invalid(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        dpp_spec_t s;
        char err[DPP_SPEC_ERRLEN];
        memset(&s, 0x5a, sizeof(s));
        int rc = parse(bad_cases[i].json, &s, err);
        if (rc != DPP_ESPEC || strcmp(err, bad_cases[i].err) != 0)
            print_error("case %zu: %s\n  rc %d, err \"%s\"\n  expected \"%s\"\n", i,
                        bad_cases[i].json, rc, err, bad_cases[i].err);
        assert_int_equal(rc, DPP_ESPEC);
        assert_string_equal(err, bad_cases[i].err);
        /* the output is left zeroed */
        dpp_spec_t zero;
        memset(&zero, 0, sizeof(zero));
        assert_memory_equal(&s, &zero, sizeof(s));
    }
}

static void test_err_buffer(void **state)
{
    (void)state;
    const char *json = "{\"table\":\"/etc\",\"batch_size\":8}";
    dpp_spec_t s;
    char small[8];

    /* cut short but terminated; NULL and 0-length buffers are fine */
    memset(small, 'x', sizeof(small));
    assert_int_equal(dpp_spec_parse(json, strlen(json), &s, small, sizeof(small)), DPP_ESPEC);
    assert_string_equal(small, "table: ");
    assert_int_equal(dpp_spec_parse(json, strlen(json), &s, NULL, 0), DPP_ESPEC);
    assert_int_equal(dpp_spec_parse(json, strlen(json), &s, small, 0), DPP_ESPEC);
    assert_int_equal(dpp_spec_parse(NULL, 0, &s, small, sizeof(small)), DPP_ESPEC);

    /* the length bounds the text: no NUL needed, trailing bytes ignored */
    const char *valid = "{" BASE_OK "," FEATURES_OK "," LABEL_OK "}garbage";
    char err[DPP_SPEC_ERRLEN];
    assert_int_equal(dpp_spec_parse(valid, strlen(valid) - 7, &s, err, sizeof(err)), 0);
    dpp_spec_close(&s);
    assert_int_equal(dpp_spec_parse(valid, strlen(valid), &s, err, sizeof(err)), DPP_ESPEC);
    assert_string_equal(err, "line 1, column 92: end of file expected near 'garbage'");

    /* a long unknown key is cut to the buffer, never overflowing it */
    char long_key[2048];
    memset(long_key, 'k', sizeof(long_key));
    memcpy(long_key, "{\"", 2);
    memcpy(long_key + sizeof(long_key) - 6, "\":1}", 5);
    assert_int_equal(parse(long_key, &s, err), DPP_ESPEC);
    assert_int_equal(strlen(err), DPP_SPEC_ERRLEN - 1);
}

static long alloc_budget = -1; /* jansson allocations left; -1: no limit */

static void *budget_malloc(size_t n)
{
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(n);
}

/* Every jansson allocation failing in turn gives -ENOMEM (or NULL) and leaks
 * nothing (ASan checks the leaks). */
static void test_out_of_memory(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];
    int rc, enomem = 0;

    json_set_alloc_funcs(budget_malloc, free);
    for (long budget = 0;; budget++) {
        alloc_budget = budget;
        rc = parse(full_spec, &s, err);
        if (rc == 0)
            break;
        /* jansson's lexer reports some failed allocations as syntax errors;
         * everything after json_loadb must say -ENOMEM */
        if (rc == DPP_ESPEC && strncmp(err, "line ", 5) == 0)
            continue;
        assert_int_equal(rc, -ENOMEM);
        assert_string_equal(err, "out of memory");
        enomem++;
    }
    assert_true(enomem > 10); /* the parser's own allocations were reached */
    char *text = NULL;
    for (long budget = 0; !text; budget++) {
        alloc_budget = budget;
        text = dpp_spec_to_json(&s);
    }
    alloc_budget = -1;
    json_set_alloc_funcs(malloc, free);
    assert_non_null(strstr(text, "\"label\":{\"name\":\"click\"}"));
    free(text);
    dpp_spec_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_sparse_only_and_limits),
        cmocka_unit_test(test_numbers_round_trip_exactly),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_err_buffer),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
