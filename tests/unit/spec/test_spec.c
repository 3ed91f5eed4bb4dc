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

#include "spec/spec.h"
#include "spec/transform.h"
#include "dpp/error.h"

/* A valid spec around which the invalid cases vary one part. */
#define FEATURES_OK "\"features\":{\"dense\":[{\"name\":\"a\"}]}"
#define LABEL_OK "\"label\":{\"name\":\"y\"}"
#define BASE_OK "\"table\":\"t\",\"batch_size\":8"
#define WITH_FEATURES(f) "{" BASE_OK ",\"features\":" f "," LABEL_OK "}"
#define NO_FEATURES                                                                                \
    "features: no features: expected at least one, in \"dense\" or \"sparse\" (either list may "   \
    "be left out or empty, not both)"
#define WITH_DENSE_OPS(ops) WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"transforms\":" ops "}]}")
#define WITH_SPARSE_OPS(ops) WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"transforms\":" ops "}]}")
#define WITH_TOP(kv) "{" BASE_OK "," kv "," FEATURES_OK "," LABEL_OK "}"
#define WITH_FILTERS(f) "{" BASE_OK "," FEATURES_OK "," LABEL_OK ",\"filters\":" f "}"
/* The top-level defaults as the normalised form writes them. */
#define IO_DEFAULTS                                                                                \
    "\"split_rows\":65536,\"on_corrupt\":\"skip\",\"compression\":\"auto\",\"compression_level\":" \
    "1,\"remainder\":\"drop\",\"order\":\"deterministic\",\"shuffle\":false,"

static int parse(const char *json, dpp_spec_t *spec, char *err)
{
    return dpp_spec_parse(json, strlen(json), spec, err, DPP_SPEC_ERRLEN);
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static int transforms_equal(const dpp_transform_t *a, const dpp_transform_t *b)
{
    if (!(a->op == b->op && same_bits(a->value, b->value) && same_bits(a->min, b->min) &&
          same_bits(a->max, b->max) && same_bits(a->mean, b->mean) && same_bits(a->std, b->std) &&
          a->nboundaries == b->nboundaries && a->cast_to == b->cast_to && a->n == b->n &&
          a->n_recip == b->n_recip && a->salt == b->salt && a->max_len == b->max_len &&
          a->keep_last == b->keep_last))
        return 0;
    for (uint32_t i = 0; i < a->nboundaries; i++)
        if (!same_bits(a->boundaries[i], b->boundaries[i]))
            return 0;
    return 1;
}

static int names_equal(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int features_equal(const dpp_feature_spec_t *a, const dpp_feature_spec_t *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].dim != b[i].dim ||
            !names_equal(a[i].weights, b[i].weights) || a[i].nops != b[i].nops)
            return 0;
        for (unsigned j = 0; j < a[i].nops; j++)
            if (!transforms_equal(&a[i].ops[j], &b[i].ops[j]))
                return 0;
    }
    return 1;
}

static int filters_equal(const dpp_filter_t *a, const dpp_filter_t *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || !names_equal(a[i].feature, b[i].feature) ||
            !same_bits(a[i].p, b[i].p) || a[i].seed != b[i].seed ||
            a[i].has_label != b[i].has_label || !same_bits(a[i].label, b[i].label) ||
            a[i].threshold != b[i].threshold || a[i].seed_mix != b[i].seed_mix)
            return 0;
    return 1;
}

static int specs_equal(const dpp_spec_t *a, const dpp_spec_t *b)
{
    if (strcmp(a->table, b->table) != 0 || a->npartitions != b->npartitions ||
        a->batch_size != b->batch_size || a->epochs != b->epochs || a->consumers != b->consumers ||
        a->split_rows != b->split_rows || a->on_corrupt_fail != b->on_corrupt_fail ||
        a->compression != b->compression || a->compression_level != b->compression_level ||
        a->ndense != b->ndense || a->nsparse != b->nsparse || !names_equal(a->label, b->label) ||
        a->nfilters != b->nfilters || !filters_equal(a->filters, b->filters, a->nfilters))
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
    assert_int_equal(s.split_rows, 65536);
    assert_int_equal(s.on_corrupt_fail, 0);
    assert_int_equal(s.compression, DPP_COMPRESSION_AUTO);
    assert_int_equal(s.compression_level, 1);
    assert_int_equal(s.ndense, 1);
    assert_string_equal(s.dense[0].name, "a");
    assert_int_equal(s.dense[0].dim, 1);
    assert_null(s.dense[0].weights);
    assert_int_equal(s.dense[0].nops, 0);
    assert_int_equal(s.nsparse, 0);
    assert_string_equal(s.label, "y");
    assert_int_equal(s.nfilters, 0);
    assert_null(s.filters);
    dpp_spec_close(&s);
    assert_null(s.table);
    dpp_spec_close(&s); /* zeroed: safe again */

    check_round_trip(json,
                     "{\"table\":\"t\",\"format\":\"tfrecord\",\"batch_size\":8,\"epochs\":1,"
                     "\"consumers\":1," IO_DEFAULTS
                     "\"features\":{\"dense\":[{\"name\":\"a\",\"dim\":1,\"transforms\":[]}]},"
                     "\"label\":{\"name\":\"y\"},\"filters\":[]}");
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
        "\"format\":\"tfrecord\",\"batch_size\":4096,\"epochs\":3,\"consumers\":4," IO_DEFAULTS
        "\"features\":{\"dense\":["
        "{\"name\":\"i1\",\"dim\":1,\"transforms\":[{\"op\":\"fill_missing\",\"value\":0.0},"
        "{\"op\":\"clamp\",\"min\":0.0},{\"op\":\"log1p\"},{\"op\":\"clamp\",\"max\":20.5},"
        "{\"op\":\"clamp\",\"min\":-1.0,\"max\":25.0}]},{\"name\":\"i2\",\"dim\":1,\"transforms\":["
        "]}],"
        "\"sparse\":[{\"name\":\"c1\",\"transforms\":[{\"op\":\"modulo\",\"n\":100000},"
        "{\"op\":\"truncate\",\"max_len\":5,\"keep\":\"first\"}]},{\"name\":\"c2\",\"transforms\":["
        "]}]},"
        "\"label\":{\"name\":\"click\"},\"filters\":[]}");
}

static void test_sparse_only_and_limits(void **state)
{
    (void)state;
    check_round_trip(
        "{\"table\":\"t\",\"batch_size\":1048576,\"epochs\":1000000,"
        "\"consumers\":16384,\"features\":{\"sparse\":[{\"name\":\"s\","
        "\"transforms\":[{\"op\":\"modulo\",\"n\":9223372036854775807},"
        "{\"op\":\"truncate\",\"max_len\":2147483647},{\"op\":\"modulo\",\"n\":1}]}]},"
        "\"label\":{\"name\":\"y\"}}",
        "{\"table\":\"t\",\"format\":\"tfrecord\",\"batch_size\":1048576,\"epochs\":1000000,"
        "\"consumers\":16384," IO_DEFAULTS "\"features\":{\"sparse\":[{\"name\":\"s\","
        "\"transforms\":[{\"op\":\"modulo\",\"n\":9223372036854775807},"
        "{\"op\":\"truncate\",\"max_len\":2147483647,\"keep\":\"first\"},"
        "{\"op\":\"modulo\",\"n\":1}]}]},"
        "\"label\":{\"name\":\"y\"},\"filters\":[]}");
}

/* Either kind of feature alone, and no label: each list may be absent or
 * empty, and the normalised form leaves out what is not there. */
static void test_optional_features_and_label(void **state)
{
    (void)state;
    static const char dense_only[] =
        "{\"table\":\"t\",\"format\":\"tfrecord\",\"batch_size\":8,\"epochs\":1,"
        "\"consumers\":1," IO_DEFAULTS
        "\"features\":{\"dense\":[{\"name\":\"a\",\"dim\":2,\"transforms\":[]}]},\"filters\":[]}";
    static const char sparse_only[] =
        "{\"table\":\"t\",\"format\":\"tfrecord\",\"batch_size\":8,\"epochs\":1,"
        "\"consumers\":1," IO_DEFAULTS
        "\"features\":{\"sparse\":[{\"name\":\"s\",\"transforms\":[]}]},\"filters\":[]}";
    const struct {
        const char *json, *normal;
        unsigned ndense, nsparse;
        const char *label;
    } cases[] = {
        {"{" BASE_OK ",\"features\":{\"dense\":[{\"name\":\"a\",\"dim\":2}]}}", dense_only, 1, 0,
         NULL},
        {"{" BASE_OK ",\"features\":{\"dense\":[{\"name\":\"a\",\"dim\":2}],\"sparse\":[]}}",
         dense_only, 1, 0, NULL},
        {"{" BASE_OK ",\"features\":{\"sparse\":[{\"name\":\"s\"}]}}", sparse_only, 0, 1, NULL},
        {"{" BASE_OK ",\"features\":{\"dense\":[],\"sparse\":[{\"name\":\"s\"}]}}", sparse_only, 0,
         1, NULL},
        {"{" BASE_OK ",\"features\":{\"sparse\":[{\"name\":\"s\"}]}," LABEL_OK "}", NULL, 0, 1,
         "y"},
        /* a sample without a label to select by applies to every row */
        {"{" BASE_OK ",\"features\":{\"sparse\":[{\"name\":\"s\"}]},"
         "\"filters\":[{\"op\":\"sample\",\"p\":0.5},{\"op\":\"require\",\"feature\":\"s\"}]}",
         NULL, 0, 1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dpp_spec_t s;
        char err[DPP_SPEC_ERRLEN];
        int rc = parse(cases[i].json, &s, err);
        if (rc != 0)
            print_error("case %zu: %s\n  err \"%s\"\n", i, cases[i].json, err);
        assert_int_equal(rc, 0);
        assert_int_equal(s.ndense, cases[i].ndense);
        assert_int_equal(s.nsparse, cases[i].nsparse);
        assert_true(cases[i].ndense > 0 || s.dense == NULL);
        assert_true(cases[i].nsparse > 0 || s.sparse == NULL);
        if (cases[i].label)
            assert_string_equal(s.label, cases[i].label);
        else
            assert_null(s.label);
        dpp_spec_close(&s);
        check_round_trip(cases[i].json, cases[i].normal);
    }
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
        "{\"table\":\"./a//b/..c/"
        "\",\"format\":\"tfrecord\",\"batch_size\":1,\"epochs\":1,\"consumers\":1," IO_DEFAULTS
        "\"features\":{\"dense\":[{\"name\":\"\xc3\xa9t\xc3\xa9\",\"dim\":1,\"transforms\":[]}]},"
        "\"label\":{\"name\":\"a b\"},\"filters\":[]}");
}

/* Every key and op added for the worker data path, with non-default values. */
static const char new_spec[] =
    "{\"table\":\"t\",\"batch_size\":8,\"split_rows\":1000,\"on_corrupt\":\"fail\","
    "\"compression\":\"zstd\",\"compression_level\":19,\"remainder\":\"drop\",\"features\":{"
    "\"dense\":["
    "{\"name\":\"emb\",\"dim\":16,\"transforms\":[{\"op\":\"fill_missing\",\"value\":0},"
    "{\"op\":\"standardize\",\"mean\":1.5,\"std\":0.25},"
    "{\"op\":\"bucketize\",\"boundaries\":[-1,0,0.1e1,2.5]},{\"op\":\"cast\",\"to\":\"bfloat16\"}]}"
    ","
    "{\"name\":\"x\",\"dim\":65536,\"transforms\":[{\"op\":\"cast\",\"to\":\"float16\"},"
    "{\"op\":\"cast\",\"to\":\"int\"}]}],"
    "\"sparse\":[{\"weights\":\"ids_w\",\"name\":\"ids\",\"transforms\":[{\"op\":\"hash\",\"n\":"
    "1000,"
    "\"salt\":-5},{\"op\":\"truncate\",\"keep\":\"last\",\"max_len\":3},{\"op\":\"first_x\",\"x\":"
    "2},"
    "{\"op\":\"truncate\",\"max_len\":9,\"keep\":\"first\"}]},"
    "{\"name\":\"s2\",\"transforms\":[{\"op\":\"hash\",\"n\":9223372036854775807}]}]},"
    "\"filters\":[{\"feature\":\"ids_w\",\"op\":\"require\"},"
    "{\"op\":\"sample\",\"p\":0.25,\"seed\":-3,\"label\":0},{\"op\":\"sample\",\"p\":1},"
    "{\"op\":\"require\",\"feature\":\"y\"},{\"op\":\"sample\",\"p\":0}],"
    "\"label\":{\"name\":\"y\"}}";

static void test_new_keys(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];

    int rc = parse(new_spec, &s, err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(s.split_rows, 1000);
    assert_int_equal(s.on_corrupt_fail, 1);
    assert_int_equal(s.compression, DPP_COMPRESSION_ZSTD);
    assert_int_equal(s.compression_level, 19);

    const dpp_feature_spec_t *emb = &s.dense[0];
    assert_int_equal(emb->dim, 16);
    assert_null(emb->weights);
    assert_int_equal(emb->nops, 4);
    assert_int_equal(emb->ops[1].op, DPP_OP_STANDARDIZE);
    assert_true(emb->ops[1].mean == 1.5 && emb->ops[1].std == 0.25);
    assert_int_equal(emb->ops[2].op, DPP_OP_BUCKETIZE);
    assert_int_equal(emb->ops[2].nboundaries, 4);
    assert_true(emb->ops[2].boundaries[0] == -1.0 && emb->ops[2].boundaries[1] == 0.0 &&
                emb->ops[2].boundaries[2] == 1.0 && emb->ops[2].boundaries[3] == 2.5);
    assert_int_equal(emb->ops[3].op, DPP_OP_CAST);
    assert_int_equal(emb->ops[3].cast_to, DPP_CAST_BFLOAT16);
    assert_int_equal(s.dense[1].dim, 65536);
    assert_int_equal(s.dense[1].ops[0].cast_to, DPP_CAST_FLOAT16);
    assert_int_equal(s.dense[1].ops[1].cast_to, DPP_CAST_INT);

    const dpp_feature_spec_t *ids = &s.sparse[0];
    assert_int_equal(ids->dim, 0);
    assert_string_equal(ids->weights, "ids_w");
    assert_int_equal(ids->nops, 4);
    assert_int_equal(ids->ops[0].op, DPP_OP_HASH);
    assert_int_equal(ids->ops[0].n, 1000);
    assert_int_equal(ids->ops[0].salt, -5);
    assert_true(ids->ops[0].n_recip == UINT64_MAX / 1000);
    assert_int_equal(ids->ops[1].op, DPP_OP_TRUNCATE);
    assert_int_equal(ids->ops[1].max_len, 3);
    assert_int_equal(ids->ops[1].keep_last, 1);
    /* first_x is truncate keeping the first */
    assert_int_equal(ids->ops[2].op, DPP_OP_TRUNCATE);
    assert_int_equal(ids->ops[2].max_len, 2);
    assert_int_equal(ids->ops[2].keep_last, 0);
    assert_int_equal(ids->ops[3].keep_last, 0);
    assert_null(s.sparse[1].weights);
    assert_int_equal(s.sparse[1].ops[0].salt, 0);
    assert_true(s.sparse[1].ops[0].n_recip == 2); /* (2^64 - 1) / (2^63 - 1) */

    assert_int_equal(s.nfilters, 5);
    assert_int_equal(s.filters[0].kind, DPP_FILTER_REQUIRE);
    assert_string_equal(s.filters[0].feature, "ids_w");
    assert_int_equal(s.filters[1].kind, DPP_FILTER_SAMPLE);
    assert_null(s.filters[1].feature);
    assert_true(s.filters[1].p == 0.25);
    assert_int_equal(s.filters[1].seed, -3);
    assert_int_equal(s.filters[1].has_label, 1);
    assert_true(s.filters[1].label == 0.0);
    assert_true(s.filters[1].threshold == 1ull << 62);
    assert_true(s.filters[1].seed_mix == dpp_mix64((uint64_t)-3));
    assert_true(s.filters[2].p == 1.0 && s.filters[2].seed == 0 && !s.filters[2].has_label);
    assert_string_equal(s.filters[3].feature, "y");
    assert_true(s.filters[4].p == 0.0 && s.filters[4].threshold == 0);
    dpp_spec_close(&s);

    /* first_x and an unordered truncate come back as truncate with "keep";
     * boundaries, the sample's p and label as reals; weights after the name */
    check_round_trip(
        new_spec,
        "{\"table\":\"t\",\"format\":\"tfrecord\",\"batch_size\":8,\"epochs\":1,\"consumers\":1,"
        "\"split_rows\":1000,"
        "\"on_corrupt\":\"fail\",\"compression\":\"zstd\",\"compression_level\":19,\"remainder\":"
        "\"drop\",\"order\":\"deterministic\",\"shuffle\":false,"
        "\"features\":{\"dense\":[{\"name\":\"emb\",\"dim\":16,\"transforms\":["
        "{\"op\":\"fill_missing\",\"value\":0.0},{\"op\":\"standardize\",\"mean\":1.5,\"std\":0.25}"
        ","
        "{\"op\":\"bucketize\",\"boundaries\":[-1.0,0.0,1.0,2.5]},{\"op\":\"cast\",\"to\":"
        "\"bfloat16\"}]},"
        "{\"name\":\"x\",\"dim\":65536,\"transforms\":[{\"op\":\"cast\",\"to\":\"float16\"},"
        "{\"op\":\"cast\",\"to\":\"int\"}]}],\"sparse\":[{\"name\":\"ids\",\"weights\":\"ids_w\","
        "\"transforms\":[{\"op\":\"hash\",\"n\":1000,\"salt\":-5},"
        "{\"op\":\"truncate\",\"max_len\":3,\"keep\":\"last\"},"
        "{\"op\":\"truncate\",\"max_len\":2,\"keep\":\"first\"},"
        "{\"op\":\"truncate\",\"max_len\":9,\"keep\":\"first\"}]},"
        "{\"name\":\"s2\",\"transforms\":[{\"op\":\"hash\",\"n\":9223372036854775807,\"salt\":0}]}]"
        "},"
        "\"label\":{\"name\":\"y\"},\"filters\":[{\"op\":\"require\",\"feature\":\"ids_w\"},"
        "{\"op\":\"sample\",\"p\":0.25,\"seed\":-3,\"label\":0.0},"
        "{\"op\":\"sample\",\"p\":1.0,\"seed\":0},{\"op\":\"require\",\"feature\":\"y\"},"
        "{\"op\":\"sample\",\"p\":0.0,\"seed\":0}]}");
}

static void test_new_keys_limits(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];

    /* the other choices and the ranges' edges */
    check_round_trip(WITH_TOP("\"split_rows\":1,\"compression\":\"off\",\"on_corrupt\":\"skip\","
                              "\"compression_level\":1"),
                     NULL);
    check_round_trip(WITH_TOP("\"split_rows\":2147483647"), NULL);
    check_round_trip(WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":-3.4028234663852886e38,"
                                    "\"std\":1e-45},{\"op\":\"bucketize\",\"boundaries\":"
                                    "[-3.4028234663852886e38,-0.0,1e-45,3.4028234663852886e38]}]"),
                     NULL);
    check_round_trip(WITH_SPARSE_OPS("[{\"op\":\"hash\",\"n\":1,\"salt\":-9223372036854775808},"
                                     "{\"op\":\"hash\",\"n\":3,\"salt\":9223372036854775807},"
                                     "{\"op\":\"first_x\",\"x\":2147483647}]"),
                     NULL);
    check_round_trip(WITH_FILTERS("[{\"op\":\"sample\",\"p\":1e-300,\"seed\":-9223372036854775808,"
                                  "\"label\":-3.4028234663852886e38}]"),
                     NULL);

    /* 65,536 boundaries and 64 filters are accepted, one more is not */
    size_t cap = 20 * (DPP_SPEC_MAX_BOUNDARIES + 1) + 1024;
    char *json = malloc(cap);
    assert_non_null(json);
    for (int extra = 0; extra <= 1; extra++) {
        size_t pos = (size_t)snprintf(json, cap,
                                      "{" BASE_OK ",\"features\":{\"dense\":[{\"name\":\"a\","
                                      "\"transforms\":[{\"op\":\"bucketize\",\"boundaries\":[");
        for (int i = 0; i < DPP_SPEC_MAX_BOUNDARIES + extra; i++)
            pos += (size_t)snprintf(json + pos, cap - pos, "%s%d", i ? "," : "", i);
        snprintf(json + pos, cap - pos, "]}]}]}," LABEL_OK "}");
        int rc = parse(json, &s, err);
        if (!extra) {
            assert_int_equal(rc, 0);
            assert_int_equal(s.dense[0].ops[0].nboundaries, DPP_SPEC_MAX_BOUNDARIES);
            dpp_spec_close(&s);
        } else {
            assert_int_equal(rc, DPP_ESPEC);
            assert_string_equal(err, "features.dense[0].transforms[0].boundaries: must have at "
                                     "most 65536 entries");
        }

        pos =
            (size_t)snprintf(json, cap, "{" BASE_OK "," FEATURES_OK "," LABEL_OK ",\"filters\":[");
        for (int i = 0; i < DPP_SPEC_MAX_FILTERS + extra; i++)
            pos += (size_t)snprintf(json + pos, cap - pos,
                                    "%s{\"op\":\"require\",\"feature\":\"a\"}", i ? "," : "");
        snprintf(json + pos, cap - pos, "]}");
        rc = parse(json, &s, err);
        if (!extra) {
            assert_int_equal(rc, 0);
            assert_int_equal(s.nfilters, DPP_SPEC_MAX_FILTERS);
            dpp_spec_close(&s);
        } else {
            assert_int_equal(rc, DPP_ESPEC);
            assert_string_equal(err, "filters: must have at most 64 entries");
        }
    }
    free(json);

    /* an empty filter list is the default */
    assert_int_equal(parse(WITH_FILTERS("[]"), &s, err), 0);
    assert_int_equal(s.nfilters, 0);
    dpp_spec_close(&s);

    /* a require filter may name a weights feature or the label */
    assert_int_equal(parse("{" BASE_OK ",\"features\":{\"sparse\":[{\"name\":\"s\",\"weights\":"
                           "\"w\"}]}," LABEL_OK ",\"filters\":[{\"op\":\"require\",\"feature\":"
                           "\"w\"},{\"op\":\"require\",\"feature\":\"y\"}]}",
                           &s, err),
                     0);
    dpp_spec_close(&s);
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
     "features.dense[0].foo: unknown key (keys here: name, dim, transforms, optional)"},
    {"{" BASE_OK ",\"features\":{\"dense\":[{\"name\":\"a\"}],\"bytes\":[]}," LABEL_OK "}",
     "features.bytes: unknown key (keys here: dense, sparse)"},
    {"{" BASE_OK "," FEATURES_OK ",\"label\":{\"name\":\"y\",\"weight\":1}}",
     "label.weight: unknown key (keys here: name)"},
    {WITH_DENSE_OPS("[{\"op\":\"log1p\",\"base\":2}]"),
     "features.dense[0].transforms[0].base: unknown key (keys here: op)"},
    {WITH_DENSE_OPS("[{\"op\":\"fill_missing\",\"value\":1,\"min\":0}]"),
     "features.dense[0].transforms[0].min: unknown key (keys here: value, op)"},
    {WITH_SPARSE_OPS("[{\"op\":\"modulo\",\"n\":3,\"max_len\":2}]"),
     "features.sparse[0].transforms[0].max_len: unknown key (keys here: n, op)"},
    {"{\"a\\nb\":1}", "a?b: unknown key"},

    /* required keys */
    {"{\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: required (or \"sources\" for a mixture of tables)"},
    {"{\"table\":\"t\"," FEATURES_OK "," LABEL_OK "}", "batch_size: required"},
    {"{" BASE_OK "," LABEL_OK "}", "features: required"},
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
    {WITH_FEATURES("{}"), NO_FEATURES},
    {WITH_FEATURES("{\"dense\":[]}"), NO_FEATURES},
    {WITH_FEATURES("{\"sparse\":[]}"), NO_FEATURES},
    {WITH_FEATURES("{\"dense\":[],\"sparse\":[]}"), NO_FEATURES},
    {"{" BASE_OK ",\"features\":{\"sparse\":[]}}", NO_FEATURES}, /* no label either */
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
     "consumers: must be <= 16384"},
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
     "table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL"},
    {"{\"table\":\"x/../../etc\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL"},
    {"{\"table\":\"..\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL"},
    {"{\"table\":\"a/..\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL"},
    {"{\"table\":\"a//../b\",\"batch_size\":8," FEATURES_OK "," LABEL_OK "}",
     "table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL"},

    /* ops: unknown, on the wrong kind of feature, misplaced */
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"d\","
                   "\"transforms\":[{\"op\":\"logp\"}]}]}"),
     "features.dense[3].transforms[0].op: unknown op \"logp\"; did you mean \"log1p\"? (ops of "
     "dense features: fill_missing, clamp, log1p, standardize, bucketize, cast)"},
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

    /* top-level keys of the data path */
    {WITH_TOP("\"split_rows\":0"), "split_rows: must be > 0"},
    {WITH_TOP("\"split_rows\":-1"), "split_rows: must be > 0"},
    {WITH_TOP("\"split_rows\":2147483648"), "split_rows: must be <= 2147483647"},
    {WITH_TOP("\"split_rows\":1.5"), "split_rows: expected an integer"},
    {WITH_TOP("\"on_corrupt\":1"), "on_corrupt: expected a string"},
    {WITH_TOP("\"on_corrupt\":\"ignore\""),
     "on_corrupt: unknown value \"ignore\" (expected \"skip\" or \"fail\")"},
    {WITH_TOP("\"on_corrupt\":\"\""),
     "on_corrupt: unknown value \"\" (expected \"skip\" or \"fail\")"},
    {WITH_TOP("\"on_corrupt\":\"Skip\""),
     "on_corrupt: unknown value \"Skip\" (expected \"skip\" or \"fail\")"},
    {WITH_TOP("\"compression\":null"), "compression: expected a string"},
    {WITH_TOP("\"compression\":\"lz4\""),
     "compression: unknown value \"lz4\" (expected \"auto\", \"off\" or \"zstd\")"},
    {WITH_TOP("\"compression_level\":0"), "compression_level: must be > 0"},
    {WITH_TOP("\"remainder\":\"trim\""),
     "remainder: unknown value \"trim\" (expected \"drop\", \"keep\" or \"pad\")"},
    {WITH_TOP("\"order\":\"random\""),
     "order: unknown value \"random\" (expected \"deterministic\" or \"fastest\")"},
    {WITH_TOP("\"order\":true"), "order: expected a string"},
    {WITH_TOP("\"format\":\"orc\""),
     "format: unknown value \"orc\" (expected \"tfrecord\", \"parquet\", \"jsonl\" or \"text\")"},
    {WITH_TOP("\"sequence\":{\"length\":8}"),
     "sequence: applies to text sessions only (\"format\": \"jsonl\", \"text\", or \"parquet\" "
     "to read a string column)"},
    {WITH_TOP("\"format\":\"TFRecord\""),
     "format: unknown value \"TFRecord\" (expected \"tfrecord\", \"parquet\", \"jsonl\" or \"text\")"},
    {WITH_TOP("\"format\":1"), "format: expected a string"},
    {"{\"table\":\"t\",\"batch_size\":1100,\"features\":{\"dense\":[{\"name\":\"x\","
     "\"dim\":65536}]},\"label\":{\"name\":\"y\"}}",
     "batch_size: 1100 rows of these features take at least 275 MiB, over the 256 MiB a block "
     "may hold: at most 1023 rows per batch (or fewer dense values)"},
    {"{\"table\":\"t\",\"batch_size\":8,\"epochs\":\"forever\"," FEATURES_OK "," LABEL_OK "}",
     "epochs: expected an integer or \"unbounded\""},
    {WITH_TOP("\"shuffle\":1"), "shuffle: expected false, true or an object {\"seed\": N}"},
    {WITH_TOP("\"shuffle\":\"yes\""), "shuffle: expected false, true or an object {\"seed\": N}"},
    {WITH_TOP("\"shuffle\":{}"), "shuffle.seed: required"},
    {WITH_TOP("\"shuffle\":{\"seed\":1.5}"), "shuffle.seed: expected an integer"},
    {WITH_TOP("\"shuffle\":{\"seed\":1,\"salt\":2}"),
     "shuffle.salt: unknown key (keys here: seed)"},
    {WITH_TOP("\"remainder\":1"), "remainder: expected a string"},
    {WITH_TOP("\"compression_level\":20"), "compression_level: must be <= 19"},
    {WITH_TOP("\"compression_level\":\"1\""), "compression_level: expected an integer"},
    {WITH_TOP("\"split_rows\":0,\"compression\":\"lz4\""), "split_rows: must be > 0"},
    {WITH_TOP("\"compression_level\":0,\"remainder\":\"drop\",\"on_corrupt\":\"x\""),
     "on_corrupt: unknown value \"x\" (expected \"skip\" or \"fail\")"},

    /* dense dim */
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"dim\":0}]}"),
     "features.dense[0].dim: must be > 0"},
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"dim\":65537}]}"),
     "features.dense[0].dim: must be <= 65536"},
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"dim\":\"2\"}]}"),
     "features.dense[0].dim: expected an integer"},
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"dim\":2.0}]}"),
     "features.dense[0].dim: expected an integer"},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"dim\":1}]}"),
     "features.sparse[0].dim: unknown key (keys here: name, weights, transforms, optional)"},

    /* sparse weights */
    {WITH_FEATURES("{\"dense\":[{\"name\":\"a\",\"weights\":\"w\"}]}"),
     "features.dense[0].weights: unknown key (keys here: name, dim, transforms, optional)"},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":1}]}"),
     "features.sparse[0].weights: expected a string"},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":null}]}"),
     "features.sparse[0].weights: expected a string"},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":\"\"}]}"),
     "features.sparse[0].weights: must not be empty"},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":\"s\"}]}"),
     "features.sparse[0].weights: duplicate feature name \"s\""},
    {WITH_FEATURES(
         "{\"dense\":[{\"name\":\"a\"}],\"sparse\":[{\"name\":\"s\",\"weights\":\"a\"}]}"),
     "features.sparse[0].weights: duplicate feature name \"a\""},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":\"w\"},{\"name\":\"w\"}]}"),
     "features.sparse[1].name: duplicate feature name \"w\""},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":\"w\"},{\"name\":\"t\",\"weights\":"
                   "\"w\"}]}"),
     "features.sparse[1].weights: duplicate feature name \"w\""},
    {WITH_FEATURES("{\"sparse\":[{\"name\":\"s\",\"weights\":\"y\"}]}"),
     "label.name: duplicate feature name \"y\""},

    /* standardize */
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"std\":1}]"),
     "features.dense[0].transforms[0].mean: required"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":1}]"),
     "features.dense[0].transforms[0].std: required"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":1,\"std\":0}]"),
     "features.dense[0].transforms[0].std: must be > 0"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":1,\"std\":-0.0}]"),
     "features.dense[0].transforms[0].std: must be > 0"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":1,\"std\":-2}]"),
     "features.dense[0].transforms[0].std: must be > 0"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":\"0\",\"std\":1}]"),
     "features.dense[0].transforms[0].mean: expected a number"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":1e39,\"std\":1}]"),
     "features.dense[0].transforms[0].mean: out of the float range"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":0,\"std\":1e39}]"),
     "features.dense[0].transforms[0].std: out of the float range"},
    {WITH_DENSE_OPS("[{\"op\":\"standardize\",\"mean\":0,\"std\":1,\"scale\":2}]"),
     "features.dense[0].transforms[0].scale: unknown key (keys here: mean, std, op)"},

    /* bucketize */
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\"}]"),
     "features.dense[0].transforms[0].boundaries: required"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[]}]"),
     "features.dense[0].transforms[0].boundaries: must not be empty"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":{}}]"),
     "features.dense[0].transforms[0].boundaries: expected an array"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":1}]"),
     "features.dense[0].transforms[0].boundaries: expected an array"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[1,\"2\"]}]"),
     "features.dense[0].transforms[0].boundaries[1]: expected a number"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[1,null]}]"),
     "features.dense[0].transforms[0].boundaries[1]: expected a number"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[0,1,1]}]"),
     "features.dense[0].transforms[0].boundaries[2]: must be greater than boundaries[1]"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[2,1]}]"),
     "features.dense[0].transforms[0].boundaries[1]: must be greater than boundaries[0]"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[-0.0,0.0]}]"),
     "features.dense[0].transforms[0].boundaries[1]: must be greater than boundaries[0]"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[0,1e39]}]"),
     "features.dense[0].transforms[0].boundaries[1]: out of the float range"},
    {WITH_DENSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[0],\"right\":true}]"),
     "features.dense[0].transforms[0].right: unknown key (keys here: boundaries, op)"},

    /* cast */
    {WITH_DENSE_OPS("[{\"op\":\"cast\"}]"), "features.dense[0].transforms[0].to: required"},
    {WITH_DENSE_OPS("[{\"op\":\"cast\",\"to\":16}]"),
     "features.dense[0].transforms[0].to: expected a string"},
    {WITH_DENSE_OPS("[{\"op\":\"cast\",\"to\":\"double\"}]"),
     "features.dense[0].transforms[0].to: unknown value \"double\" (expected \"int\", "
     "\"bfloat16\" or \"float16\")"},
    {WITH_DENSE_OPS("[{\"op\":\"cast\",\"to\":\"int\",\"mode\":\"round\"}]"),
     "features.dense[0].transforms[0].mode: unknown key (keys here: to, op)"},

    /* hash */
    {WITH_SPARSE_OPS("[{\"op\":\"hash\"}]"), "features.sparse[0].transforms[0].n: required"},
    {WITH_SPARSE_OPS("[{\"op\":\"hash\",\"salt\":1}]"),
     "features.sparse[0].transforms[0].n: required"},
    {WITH_SPARSE_OPS("[{\"op\":\"hash\",\"n\":0}]"),
     "features.sparse[0].transforms[0].n: must be > 0"},
    {WITH_SPARSE_OPS("[{\"op\":\"hash\",\"n\":1.0}]"),
     "features.sparse[0].transforms[0].n: expected an integer"},
    {WITH_SPARSE_OPS("[{\"op\":\"hash\",\"n\":10,\"salt\":1.5}]"),
     "features.sparse[0].transforms[0].salt: expected an integer"},
    {WITH_SPARSE_OPS("[{\"op\":\"hash\",\"n\":10,\"seed\":1}]"),
     "features.sparse[0].transforms[0].seed: unknown key (keys here: n, salt, op)"},

    /* truncate keep and first_x */
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\",\"max_len\":3,\"keep\":\"middle\"}]"),
     "features.sparse[0].transforms[0].keep: unknown value \"middle\" (expected \"first\" or "
     "\"last\")"},
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\",\"max_len\":3,\"keep\":1}]"),
     "features.sparse[0].transforms[0].keep: expected a string"},
    {WITH_SPARSE_OPS("[{\"op\":\"truncate\",\"keep\":\"last\"}]"),
     "features.sparse[0].transforms[0].max_len: required"},
    {WITH_SPARSE_OPS("[{\"op\":\"first_x\"}]"), "features.sparse[0].transforms[0].x: required"},
    {WITH_SPARSE_OPS("[{\"op\":\"first_x\",\"x\":0}]"),
     "features.sparse[0].transforms[0].x: must be > 0"},
    {WITH_SPARSE_OPS("[{\"op\":\"first_x\",\"x\":2147483648}]"),
     "features.sparse[0].transforms[0].x: must be <= 2147483647"},
    {WITH_SPARSE_OPS("[{\"op\":\"first_x\",\"x\":\"3\"}]"),
     "features.sparse[0].transforms[0].x: expected an integer"},
    {WITH_SPARSE_OPS("[{\"op\":\"first_x\",\"x\":3,\"keep\":\"last\"}]"),
     "features.sparse[0].transforms[0].keep: unknown key (keys here: x, op)"},
    {WITH_SPARSE_OPS("[{\"op\":\"first_x\",\"max_len\":3}]"),
     "features.sparse[0].transforms[0].max_len: unknown key (keys here: x, op)"},

    /* new ops on the wrong kind of feature */
    {WITH_DENSE_OPS("[{\"op\":\"hash\",\"n\":3}]"),
     "features.dense[0].transforms[0].op: op \"hash\" applies to sparse features, not dense"},
    {WITH_DENSE_OPS("[{\"op\":\"first_x\",\"x\":3}]"),
     "features.dense[0].transforms[0].op: op \"first_x\" applies to sparse features, not dense"},
    {WITH_SPARSE_OPS("[{\"op\":\"standardize\",\"mean\":0,\"std\":1}]"),
     "features.sparse[0].transforms[0].op: op \"standardize\" applies to dense features, not "
     "sparse"},
    {WITH_SPARSE_OPS("[{\"op\":\"bucketize\",\"boundaries\":[0]}]"),
     "features.sparse[0].transforms[0].op: op \"bucketize\" applies to dense features, not sparse"},
    {WITH_SPARSE_OPS("[{\"op\":\"cast\",\"to\":\"int\"}]"),
     "features.sparse[0].transforms[0].op: op \"cast\" applies to dense features, not sparse"},
    {WITH_DENSE_OPS("[{\"op\":\"cast\",\"to\":\"int\"},{\"op\":\"fill_missing\",\"value\":0}]"),
     "features.dense[0].transforms[1].op: fill_missing must be the first op"},

    /* filters */
    {WITH_FILTERS("{}"), "filters: expected an array"},
    {WITH_FILTERS("null"), "filters: expected an array"},
    {WITH_FILTERS("[1]"), "filters[0]: expected an object"},
    {WITH_FILTERS("[{}]"), "filters[0].op: required"},
    {WITH_FILTERS("[{\"op\":7}]"), "filters[0].op: expected a string"},
    {WITH_FILTERS("[{\"op\":\"\"}]"), "filters[0].op: must not be empty"},
    {WITH_FILTERS("[{\"op\":\"require\",\"feature\":\"a\"},{\"op\":\"drop\"}]"),
     "filters[1].op: unknown filter \"drop\""},
    {WITH_FILTERS("[{\"op\":\"require\"}]"), "filters[0].feature: required"},
    {WITH_FILTERS("[{\"op\":\"require\",\"feature\":3}]"), "filters[0].feature: expected a string"},
    {WITH_FILTERS("[{\"op\":\"require\",\"feature\":\"\"}]"),
     "filters[0].feature: must not be empty"},
    {WITH_FILTERS("[{\"op\":\"require\",\"feature\":\"zz\"}]"),
     "filters[0].feature: no feature \"zz\" in the spec"},
    {WITH_FILTERS("[{\"op\":\"require\",\"feature\":\"a\",\"p\":1}]"),
     "filters[0].p: unknown key; did you mean \"op\"? (keys here: feature, op)"},
    {WITH_FILTERS("[{\"op\":\"sample\"}]"), "filters[0].p: required"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":\"0.5\"}]"), "filters[0].p: expected a number"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":-0.1}]"), "filters[0].p: must be between 0 and 1"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":1.0000001}]"),
     "filters[0].p: must be between 0 and 1"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":2}]"), "filters[0].p: must be between 0 and 1"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":1e39}]"), "filters[0].p: out of the float range"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":0.5,\"seed\":1.5}]"),
     "filters[0].seed: expected an integer"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":0.5,\"label\":\"0\"}]"),
     "filters[0].label: expected a number"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":0.5,\"label\":-1e39}]"),
     "filters[0].label: out of the float range"},
    {WITH_FILTERS("[{\"op\":\"sample\",\"p\":0.5,\"feature\":\"a\"}]"),
     "filters[0].feature: unknown key (keys here: p, seed, label, op)"},
    /* without a label there is none to sample by, nor to require */
    {"{" BASE_OK "," FEATURES_OK ",\"filters\":[{\"op\":\"sample\",\"p\":0.5,\"label\":1}]}",
     "filters[0].label: the spec has no label to compare with: give it one (\"label\": "
     "{\"name\": ...}) or sample every row (leave this key out)"},
    {"{" BASE_OK "," FEATURES_OK ",\"filters\":[{\"op\":\"require\",\"feature\":\"y\"}]}",
     "filters[0].feature: no feature \"y\" in the spec"},
    /* filters are checked after the label, whatever the key order */
    {"{\"filters\":[{\"op\":\"drop\"}]," BASE_OK "," FEATURES_OK ",\"label\":{}}",
     "label.name: required"},

    /* only the first error is reported */
    {"{\"table\":\"/abs\",\"batch_size\":0,\"features\":{}}",
     "table: must be a relative path inside a data root, or an s3://BUCKET/PREFIX URL"},
};

#define TEXT_BASE "\"table\":\"c\",\"batch_size\":4,\"format\":\"jsonl\""
#define TEXT_TOK "\"tokenizer\":{\"file\":\"c/_t.tiktoken\",\"pattern\":\"cl100k_base\"}"
#define TEXT_SEQ "\"sequence\":{\"length\":16}"
#define PLAIN_BASE "\"table\":\"c\",\"batch_size\":4,\"format\":\"text\""
#define PQ_BASE "\"table\":\"c\",\"batch_size\":4,\"format\":\"parquet\""

/* Text sessions: the sections, their defaults, the synthesised columns and
 * the refusals. */
static void test_text(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];
    assert_int_equal(parse("{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ "}", &s, err), 0);
    assert_non_null(s.text);
    assert_string_equal(s.text->field, "text");
    assert_int_equal(s.text->length, 16);
    assert_int_equal(s.text->pack, DPP_PACK_KIND_CONCAT);
    assert_string_equal(s.text->eos, "<|endoftext|>");
    assert_null(s.text->bos);
    assert_int_equal(s.text->tokenizer_kind, DPP_TOKENIZER_TIKTOKEN);
    assert_true(s.text->max_bytes == UINT64_MAX);
    assert_int_equal(s.nsparse, DPP_TEXT_NCOLUMNS);
    assert_string_equal(s.sparse[0].name, "input_ids");
    assert_string_equal(s.sparse[3].name, "cu_seqlens");
    assert_string_equal(s.label, DPP_TEXT_LABEL);
    uint64_t k1 = dpp_spec_index_key(&s);
    assert_true(k1 != s.split_rows);
    dpp_spec_close(&s);
    /* every setting that changes the sequences changes the index key */
    assert_int_equal(parse("{" TEXT_BASE "," TEXT_TOK ",\"sequence\":{\"length\":17}}", &s, err),
                     0);
    assert_true(dpp_spec_index_key(&s) != k1);
    dpp_spec_close(&s);

    check_round_trip("{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ "}", NULL);
    check_round_trip(
        "{" TEXT_BASE ",\"text\":{\"field\":\"body\",\"min_bytes\":3,\"max_bytes\":900,"
        "\"where\":{\"lang\":\"en\",\"src\":\"web\"}},\"tokenizer\":{\"file\":\"c/tok.json\"},"
        "\"sequence\":{\"length\":64,\"pack\":\"best_fit\",\"window\":9,\"eos\":null,"
        "\"bos\":\"<s>\"}}",
        NULL);
    check_round_trip("{" TEXT_BASE ",\"tokenizer\":{\"file\":\"c/t\",\"pattern\":\"o200k_base\","
                     "\"specials\":{\"<|endoftext|>\":900}}," TEXT_SEQ "}",
                     NULL);
    assert_int_equal(parse("{" TEXT_BASE ",\"tokenizer\":{\"file\":\"c/tok.json\"}," TEXT_SEQ "}",
                           &s, err),
                     0);
    assert_int_equal(s.text->tokenizer_kind, DPP_TOKENIZER_HUGGINGFACE);
    dpp_spec_close(&s);
    /* a .model is SentencePiece, whose texts end with its "</s>" */
    assert_int_equal(parse("{" TEXT_BASE ",\"tokenizer\":{\"file\":\"c/sp.model\"}," TEXT_SEQ
                           "}",
                           &s, err),
                     0);
    assert_int_equal(s.text->tokenizer_kind, DPP_TOKENIZER_SENTENCEPIECE);
    assert_string_equal(s.text->eos, "</s>");
    dpp_spec_close(&s);
    check_round_trip("{" TEXT_BASE ",\"tokenizer\":{\"file\":\"c/sp\",\"kind\":"
                     "\"sentencepiece\"},\"sequence\":{\"length\":8,\"bos\":\"<s>\"}}",
                     NULL);

    /* plain text, a document a file; a Parquet string column */
    assert_int_equal(
        parse("{" PLAIN_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"unit\":\"file\"}}", &s, err),
        0);
    assert_int_equal(s.format, DPP_FORMAT_TEXT);
    assert_int_equal(s.text->unit, DPP_TEXT_UNIT_FILE);
    uint64_t k2 = dpp_spec_index_key(&s);
    dpp_spec_close(&s);
    assert_int_equal(parse("{" PLAIN_BASE "," TEXT_TOK "," TEXT_SEQ "}", &s, err), 0);
    assert_int_equal(s.text->unit, DPP_TEXT_UNIT_LINE);
    assert_true(dpp_spec_index_key(&s) != k2); /* lines and files make other sequences */
    dpp_spec_close(&s);
    check_round_trip("{" PLAIN_BASE "," TEXT_TOK "," TEXT_SEQ
                     ",\"text\":{\"unit\":\"file\",\"min_bytes\":2}}",
                     NULL);
    assert_int_equal(parse("{" PQ_BASE "," TEXT_TOK "," TEXT_SEQ
                           ",\"text\":{\"field\":\"body\",\"where\":{\"lang\":\"en\"}}}",
                           &s, err),
                     0);
    assert_int_equal(s.format, DPP_FORMAT_PARQUET);
    assert_non_null(s.text);
    assert_string_equal(s.text->field, "body");
    dpp_spec_close(&s);
    check_round_trip("{" PQ_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"field\":\"body\"}}", NULL);

    static const struct {
        const char *json, *err;
    } bad[] = {
        {"{" TEXT_BASE "," TEXT_TOK "}", "sequence: required for a text session: {\"length\": "
                                         "<tokens per sequence>, \"pack\": \"concat\" or \"best_fit\"}"},
        {"{" TEXT_BASE "," TEXT_SEQ "}",
         "tokenizer: required for a text session: {\"file\": \"<a tiktoken rank file, "
         "tokenizer.json or SentencePiece .model under a data root>\", ...}"},
        {"{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ ",\"features\":{}}",
         "features: a text session (format \"jsonl\") has no features: its batches are "
         "input_ids, labels, position_ids and cu_seqlens; choose documents with \"text\" "
         "(field, min_bytes, max_bytes, where)"},
        {"{" TEXT_BASE ",\"tokenizer\":{\"file\":\"t\",\"pattern\":\"cl100k\"}," TEXT_SEQ "}",
         "tokenizer.pattern: unknown encoding \"cl100k\"; did you mean \"cl100k_base\"? (encodings: "
         "cl100k_base, o200k_base)"},
        {"{" TEXT_BASE ",\"tokenizer\":{\"file\":\"t\"}," TEXT_SEQ "}",
         "tokenizer.pattern: required: the tiktoken encoding whose split pattern applies, "
         "\"cl100k_base\" or \"o200k_base\""},
        {"{" TEXT_BASE ",\"tokenizer\":{\"file\":\"../t\",\"pattern\":\"cl100k_base\"}," TEXT_SEQ "}",
         "tokenizer.file: must be a relative path inside a data root"},
        {"{" TEXT_BASE "," TEXT_TOK ",\"sequence\":{\"length\":0}}", "sequence.length: must be > 0"},
        {"{" TEXT_BASE "," TEXT_TOK ",\"sequence\":{\"length\":8,\"window\":4}}",
         "sequence.window: applies to \"pack\": \"best_fit\" only"},
        {"{" TEXT_BASE "," TEXT_TOK ",\"sequence\":{\"length\":8,\"pack\":\"bestfit\"}}",
         "sequence.pack: unknown value \"bestfit\" (expected \"concat\" or \"best_fit\")"},
        {"{" TEXT_BASE "," TEXT_TOK ",\"sequence\":{\"length\":8,\"eos\":3}}",
         "sequence.eos: expected the name of a special token (e.g. \"<|endoftext|>\") or null"},
        {"{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"where\":{\"lang\":1}}}",
         "text.where.lang: expected a string (a document passes when its field \"lang\" is this "
         "string)"},
        {"{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"min_bytes\":9,\"max_bytes\":3}}",
         "text.max_bytes: is below min_bytes (9): no document could pass"},
        {"{" TEXT_BASE ",\"tokenizer\":{\"file\":\"t.json\",\"pattern\":\"cl100k_base\"}," TEXT_SEQ
         "}",
         "tokenizer.pattern: a Hugging Face tokenizer.json has its own pattern; leave it out"},
        {"{" TEXT_BASE ",\"tokenizer\":{\"file\":\"t.model\",\"specials\":{\"<s>\":1}}," TEXT_SEQ
         "}",
         "tokenizer.specials: a SentencePiece model names its special tokens itself (control "
         "pieces); leave it out"},
        {"{" TEXT_BASE ",\"tokenizer\":{\"file\":\"t\",\"kind\":\"sentencepeice\"}," TEXT_SEQ
         "}",
         "tokenizer.kind: unknown value \"sentencepeice\" (expected \"tiktoken\", \"huggingface\" "
         "or \"sentencepiece\")"},
        /* plain text has no fields; unit is plain text's */
        {"{" PLAIN_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"field\":\"body\"}}",
         "text.field: format \"text\" reads plain text, a document per line or per file "
         "(\"unit\"), which has no fields; \"field\" applies to \"jsonl\" and \"parquet\""},
        {"{" PLAIN_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"where\":{\"a\":\"b\"}}}",
         "text.where: format \"text\" reads plain text, a document per line or per file "
         "(\"unit\"), which has no fields; \"where\" applies to \"jsonl\" and \"parquet\""},
        {"{" PLAIN_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"unit\":\"files\"}}",
         "text.unit: unknown value \"files\" (expected \"line\" or \"file\")"},
        {"{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ ",\"text\":{\"unit\":\"file\"}}",
         "text.unit: unknown key (keys here: field, min_bytes, max_bytes, where)"},
        {"{" PQ_BASE "," TEXT_SEQ ",\"features\":{}}",
         "features: a text session (format \"parquet\" with a \"text\" section) has no features: "
         "its batches are input_ids, labels, position_ids and cu_seqlens; choose documents with "
         "\"text\" (field, min_bytes, max_bytes, where)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].json, &s, err);
        if (rc != DPP_ESPEC || strcmp(err, bad[i].err) != 0)
            print_error("text case %zu: %s\n  rc %d, err \"%s\"\n", i, bad[i].json, rc, err);
        assert_int_equal(rc, DPP_ESPEC);
        assert_string_equal(err, bad[i].err);
    }
}

/* The cache fingerprint: what a split's output depends on. */
/* "pins": the versions the master writes for the files a spec names beside
 * its table; they travel through the normalised spec, key the text index
 * and the cache fingerprint, and a misspelt file is named. */
static void test_pins(void **state)
{
    (void)state;
#define PIN_V1 "size=10 mtime_ns=5"
#define PIN_V2 "size=10 etag=abc"
    dpp_spec_t s, t;
    char err[DPP_SPEC_ERRLEN];
    const char *files[4];
    assert_int_equal(parse("{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ "}", &s, err), 0);
    assert_int_equal(dpp_spec_side_files(&s, files, 4), 1);
    assert_string_equal(files[0], "c/_t.tiktoken");
    assert_null(dpp_spec_pin(&s, "c/_t.tiktoken"));
    uint64_t key0 = dpp_spec_index_key(&s), fp0 = dpp_spec_cache_fingerprint(&s);
    assert_int_equal(dpp_spec_set_pin(&s, "c/_t.tiktoken", PIN_V1), 0);
    assert_true(dpp_spec_index_key(&s) != key0);
    assert_true(dpp_spec_cache_fingerprint(&s) != fp0);
    char *js = dpp_spec_to_json(&s);
    assert_non_null(js);
    assert_int_equal(dpp_spec_parse(js, strlen(js), &t, err, sizeof err), 0);
    assert_string_equal(dpp_spec_pin(&t, "c/_t.tiktoken"), PIN_V1);
    assert_true(dpp_spec_index_key(&t) == dpp_spec_index_key(&s));
    free(js);
    /* a second pin of the same file replaces the first */
    assert_int_equal(dpp_spec_set_pin(&t, "c/_t.tiktoken", PIN_V2), 0);
    assert_int_equal(t.npins, 1);
    assert_string_equal(dpp_spec_pin(&t, "c/_t.tiktoken"), PIN_V2);
    dpp_spec_close(&t);
    dpp_spec_close(&s);
    /* vocabularies, each once */
    assert_int_equal(
        parse("{\"table\":\"t\",\"batch_size\":8,\"features\":{\"sparse\":["
              "{\"name\":\"a\",\"transforms\":[{\"op\":\"vocab\",\"file\":\"v/a.txt\"}]},"
              "{\"name\":\"b\",\"transforms\":[{\"op\":\"vocab\",\"file\":\"v/a.txt\"}]},"
              "{\"name\":\"c\",\"transforms\":[{\"op\":\"vocab\",\"file\":\"v/c.txt\"}]}]},"
              "\"pins\":{\"v/c.txt\":\"" PIN_V1 "\"}}",
              &s, err),
        0);
    assert_int_equal(dpp_spec_side_files(&s, files, 4), 2);
    assert_string_equal(files[1], "v/c.txt");
    assert_string_equal(dpp_spec_pin(&s, "v/c.txt"), PIN_V1);
    dpp_spec_close(&s);
    /* refusals */
    assert_int_equal(parse("{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ
                           ",\"pins\":{\"c/_t.tiktokn\":\"" PIN_V1 "\"}}",
                           &s, err),
                     DPP_ESPEC);
    assert_string_equal(err, "pins.c/_t.tiktokn: no file of this spec; did you mean "
                             "\"c/_t.tiktoken\"? (its files beside the table: c/_t.tiktoken)");
    dpp_spec_close(&s);
    assert_int_equal(
        parse("{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ ",\"pins\":{\"c/_t.tiktoken\":7}}", &s, err),
        DPP_ESPEC);
    assert_non_null(strstr(err, "pins.c/_t.tiktoken: expected a version string"));
    dpp_spec_close(&s);
    assert_int_equal(parse("{" TEXT_BASE "," TEXT_TOK "," TEXT_SEQ ",\"pins\":[]}", &s, err),
                     DPP_ESPEC);
    assert_non_null(strstr(err, "pins: expected an object"));
    dpp_spec_close(&s);
}

static void test_cache_fingerprint(void **state)
{
    (void)state;
#define FP_BASE "\"table\":\"t\",\"label\":{\"name\":\"y\"}"
#define FP_FEAT "\"features\":{\"dense\":[{\"name\":\"a\"}]}"
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];
    assert_int_equal(parse("{" FP_BASE "," FP_FEAT ",\"batch_size\":8}", &s, err), 0);
    assert_int_equal(s.cache_off, 0);
    uint64_t fp = dpp_spec_cache_fingerprint(&s);
    dpp_spec_close(&s);
    /* planning and serving settings leave it alone */
    static const char *const same[] = {
        "{\"table\":\"other\",\"label\":{\"name\":\"y\"}," FP_FEAT ",\"batch_size\":8}",
        "{" FP_BASE "," FP_FEAT ",\"batch_size\":8,\"epochs\":5,\"consumers\":3,"
        "\"shuffle\":{\"seed\":4},\"compression\":\"zstd\",\"remainder\":\"pad\","
        "\"order\":\"fastest\",\"cache\":\"off\",\"split_rows\":99,\"partitions\":[\"p=1\"]}",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        assert_int_equal(parse(same[i], &s, err), 0);
        assert_true(dpp_spec_cache_fingerprint(&s) == fp);
        dpp_spec_close(&s);
    }
    /* what changes a split's blocks changes it */
    static const char *const other[] = {
        "{" FP_BASE "," FP_FEAT ",\"batch_size\":9}",
        "{" FP_BASE ",\"features\":{\"dense\":[{\"name\":\"a\",\"transforms\":[{\"op\":\"log1p\"}]}]},"
        "\"batch_size\":8}",
        "{" FP_BASE "," FP_FEAT ",\"batch_size\":8,\"filters\":[{\"op\":\"sample\",\"p\":0.5}]}",
        "{" FP_BASE "," FP_FEAT ",\"batch_size\":8,\"format\":\"parquet\"}",
        "{" FP_BASE "," FP_FEAT ",\"batch_size\":8,\"on_corrupt\":\"fail\"}",
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        assert_int_equal(parse(other[i], &s, err), 0);
        assert_true(dpp_spec_cache_fingerprint(&s) != fp);
        dpp_spec_close(&s);
    }
    /* "cache": "off" round trips; other values are refused */
    assert_int_equal(parse("{" FP_BASE "," FP_FEAT ",\"batch_size\":8,\"cache\":\"off\"}", &s, err), 0);
    assert_int_equal(s.cache_off, 1);
    char *js = dpp_spec_to_json(&s);
    assert_non_null(strstr(js, "\"cache\":\"off\""));
    free(js);
    dpp_spec_close(&s);
    assert_int_equal(parse("{" FP_BASE "," FP_FEAT ",\"batch_size\":8,\"cache\":\"on\"}", &s, err),
                     DPP_ESPEC);
    assert_string_equal(err, "cache: unknown value \"on\" (expected \"auto\" or \"off\")");
    /* the split key: every field of a split's range and window counts */
    uint64_t k0[2], k[2];
    dpp_spec_split_key(fp, "/d/t/a", 0, 100, 0, 10, 0, 10, k0);
    static const uint64_t f[][7] = {
        {1, 0, 100, 0, 10, 0, 10}, {0, 1, 100, 0, 10, 0, 10}, {0, 0, 101, 0, 10, 0, 10},
        {0, 0, 100, 1, 10, 0, 10}, {0, 0, 100, 0, 11, 0, 10}, {0, 0, 100, 0, 10, 1, 10},
        {0, 0, 100, 0, 10, 0, 9},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        dpp_spec_split_key(fp + f[i][0], "/d/t/a", f[i][1], f[i][2], f[i][3], f[i][4], f[i][5],
                           f[i][6], k);
        assert_true(k[0] != k0[0] && k[1] != k0[1]);
    }
    dpp_spec_split_key(fp, "/d/t/b", 0, 100, 0, 10, 0, 10, k);
    assert_true(k[1] != k0[1]);
    dpp_spec_split_key(fp, "/d/t/a", 0, 100, 0, 10, 0, 10, k);
    assert_true(k[0] == k0[0] && k[1] == k0[1]);
#undef FP_BASE
#undef FP_FEAT
}

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

/* dpp_spec_parse_report: each problem once, in document order, with its
 * path; the first is also err; a valid spec reports nothing. */
typedef struct problems {
    char text[12][DPP_SPEC_ERRLEN];
    size_t n;
} problems_t;

static void collect(void *arg, const char *problem)
{
    problems_t *ps = arg;
    assert_true(ps->n < 12);
    snprintf(ps->text[ps->n++], DPP_SPEC_ERRLEN, "%s", problem);
}

static void test_every_problem(void **state)
{
    (void)state;
    static const char json[] =
        "{\"table\":\"t\",\"batch_sise\":8,\"epochs\":\"two\","
        "\"features\":{\"dense\":[{\"name\":\"a\",\"transforms\":[{\"op\":\"log1pp\"},"
        "{\"op\":\"clamp\"}]},{\"name\":\"b\",\"dimm\":2}],"
        "\"sparse\":[{\"name\":\"a\"}]},"
        "\"filters\":[{\"op\":\"require\",\"feature\":\"zz\"},{\"op\":\"keep\"}]}";
    static const char *const want[] = {
        "batch_sise: unknown key; did you mean \"batch_size\"?",
        "batch_size: required",
        "epochs: expected an integer or \"unbounded\"",
        "features.dense[0].transforms[0].op: unknown op \"log1pp\"; did you mean \"log1p\"? "
        "(ops of dense features: fill_missing, clamp, log1p, standardize, bucketize, cast)",
        "features.dense[0].transforms[1]: clamp needs \"min\" or \"max\"",
        "features.dense[1].dimm: unknown key; did you mean \"dim\"? (keys here: name, dim, "
        "transforms, optional)",
        "features.sparse[0].name: duplicate feature name \"a\"",
        "filters[0].feature: no feature \"zz\" in the spec",
        "filters[1].op: unknown filter \"keep\"",
    };
    problems_t ps = {.n = 0};
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];
    int rc = dpp_spec_parse_report(json, strlen(json), &s, err, sizeof err, collect, &ps);
    for (size_t i = 0; i < ps.n; i++)
        print_message("problem %zu: %s\n", i, ps.text[i]);
    assert_int_equal(rc, DPP_ESPEC);
    assert_int_equal(ps.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < ps.n; i++)
        assert_string_equal(ps.text[i], want[i]);
    assert_string_equal(err, want[0]);
    dpp_spec_t zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&s, &zero, sizeof s);

    /* a valid spec: no report */
    static const char ok[] = "{" BASE_OK "," FEATURES_OK "," LABEL_OK "}";
    ps.n = 0;
    assert_int_equal(dpp_spec_parse_report(ok, strlen(ok), &s, err, sizeof err, collect, &ps), 0);
    assert_int_equal(ps.n, 0);
    dpp_spec_close(&s);
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

    /* the same for the new keys, ops and filters */
    json_set_alloc_funcs(budget_malloc, free);
    for (long budget = 0;; budget++) {
        alloc_budget = budget;
        rc = parse(new_spec, &s, err);
        if (rc == 0)
            break;
        if (rc == DPP_ESPEC && strncmp(err, "line ", 5) == 0)
            continue;
        assert_int_equal(rc, -ENOMEM);
    }
    text = NULL;
    for (long budget = 0; !text; budget++) {
        alloc_budget = budget;
        text = dpp_spec_to_json(&s);
    }
    alloc_budget = -1;
    json_set_alloc_funcs(malloc, free);
    assert_non_null(strstr(text, "\"filters\":[{\"op\":\"require\""));
    free(text);
    dpp_spec_close(&s);
}

/* The parser's own limits: text size, nesting (checked before jansson
 * recurses), feature count. */
static void test_spec_limits(void **state)
{
    (void)state;
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    /* 32 levels pass the depth check (and fail later as a spec); 33 do not */
    for (int depth = 31; depth <= 33; depth++) {
        char json[256];
        int n = snprintf(json, sizeof json, "{\"table\":");
        for (int i = 1; i < depth; i++)
            json[n++] = '[';
        json[n++] = '1';
        for (int i = 1; i < depth; i++)
            json[n++] = ']';
        json[n++] = '}';
        json[n] = '\0';
        assert_int_equal(dpp_spec_parse(json, (size_t)n, &spec, err, sizeof err), DPP_ESPEC);
        if (depth <= DPP_SPEC_MAX_DEPTH)
            assert_null(strstr(err, "nested"));
        else
            assert_string_equal(err, "(root): nested deeper than 32 levels");
    }
    /* brackets inside strings are not nesting */
    char str[200] = "{\"table\":\"";
    for (int i = 0; i < 40; i++)
        strcat(str, "[");
    strcat(str, "\"}");
    assert_int_equal(parse(str, &spec, err), DPP_ESPEC);
    assert_null(strstr(err, "nested"));
    /* more than 1 MiB */
    size_t big = DPP_SPEC_MAX_BYTES + 1;
    char *text = malloc(big);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    assert_int_equal(dpp_spec_parse(text, big, &spec, err, sizeof err), DPP_ESPEC);
    assert_string_equal(err, "(root): the spec is 1048577 bytes, more than 1048576");
    free(text);
    /* 4097 features */
    size_t cap = 200000, len = 0;
    text = malloc(cap);
    len +=
        (size_t)snprintf(text, cap, "{\"table\":\"t\",\"batch_size\":8,\"features\":{\"sparse\":[");
    for (int i = 0; i < DPP_SPEC_MAX_FEATURES + 1; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s{\"name\":\"f%d\"}", i ? "," : "", i);
    len += (size_t)snprintf(text + len, cap - len, "]},\"label\":{\"name\":\"y\"}}");
    assert_int_equal(dpp_spec_parse(text, len, &spec, err, sizeof err), DPP_ESPEC);
    assert_string_equal(err, "features: 4097 features, more than 4096");
    free(text);
}

/* pad, order and shuffle survive the normalised form. */
static void test_order_shuffle_pad(void **state)
{
    (void)state;
    dpp_spec_t spec, again;
    char err[DPP_SPEC_ERRLEN];
    assert_int_equal(parse(WITH_TOP("\"remainder\":\"pad\",\"order\":\"fastest\","
                                    "\"shuffle\":{\"seed\":-9007199254740993}"),
                           &spec, err),
                     0);
    assert_int_equal(spec.remainder, DPP_REMAINDER_PAD);
    assert_int_equal(spec.order_fastest, 1);
    assert_int_equal(spec.shuffle, 1);
    assert_true(spec.shuffle_seed == -9007199254740993LL);
    char *json = dpp_spec_to_json(&spec);
    assert_non_null(strstr(json, "\"order\":\"fastest\",\"shuffle\":{\"seed\":-9007199254740993}"));
    assert_int_equal(parse(json, &again, err), 0);
    assert_int_equal(again.remainder, DPP_REMAINDER_PAD);
    assert_int_equal(again.order_fastest, 1);
    assert_true(again.shuffle && again.shuffle_seed == spec.shuffle_seed);
    free(json);
    dpp_spec_close(&again);
    dpp_spec_close(&spec);
    /* "epochs": "unbounded" survives the normalised form */
    assert_int_equal(parse("{\"table\":\"t\",\"batch_size\":8,\"epochs\":\"unbounded\"," FEATURES_OK
                           "," LABEL_OK "}",
                           &spec, err),
                     0);
    assert_true(spec.epochs == DPP_EPOCHS_UNBOUNDED);
    json = dpp_spec_to_json(&spec);
    assert_non_null(strstr(json, "\"epochs\":\"unbounded\""));
    assert_int_equal(parse(json, &again, err), 0);
    assert_true(again.epochs == DPP_EPOCHS_UNBOUNDED);
    free(json);
    dpp_spec_close(&again);
    dpp_spec_close(&spec);
    /* true: seed 0; false: file order */
    assert_int_equal(parse(WITH_TOP("\"shuffle\":true"), &spec, err), 0);
    assert_true(spec.shuffle == 1 && spec.shuffle_seed == 0);
    dpp_spec_close(&spec);
    assert_int_equal(parse(WITH_TOP("\"shuffle\":false"), &spec, err), 0);
    assert_int_equal(spec.shuffle, 0);
    assert_int_equal(spec.order_fastest, 0);
    dpp_spec_close(&spec);
}

static void test_remainder(void **state)
{
    (void)state;
    dpp_spec_t spec;
    char err[DPP_SPEC_ERRLEN];
    assert_int_equal(parse(WITH_TOP("\"remainder\":\"keep\""), &spec, err), 0);
    assert_int_equal(spec.remainder, DPP_REMAINDER_KEEP);
    char *json = dpp_spec_to_json(&spec);
    assert_non_null(strstr(json, "\"remainder\":\"keep\""));
    dpp_spec_t again;
    assert_int_equal(parse(json, &again, err), 0);
    assert_int_equal(again.remainder, DPP_REMAINDER_KEEP);
    free(json);
    dpp_spec_close(&again);
    dpp_spec_close(&spec);
}

/* Mixtures: sources with their own table, format and filters, the shares
 * of a window, the round trip, and the refusals. */
#define MIX_SOURCES                                                                                \
    "\"sources\":[{\"table\":\"web\",\"weight\":0.5},{\"table\":\"code\",\"weight\":0.3,"         \
    "\"format\":\"parquet\",\"partitions\":[\"ds=1\"]},{\"table\":\"books\",\"weight\":0.2,"      \
    "\"filters\":[{\"op\":\"sample\",\"p\":0.5,\"seed\":3}]}]"
static void test_mixture(void **state)
{
    (void)state;
    dpp_spec_t s;
    char err[DPP_SPEC_ERRLEN];
    const char *json = "{\"batch_size\":10," FEATURES_OK "," LABEL_OK "," MIX_SOURCES
                       ",\"mixture\":{\"window\":4}}";
    int rc = parse(json, &s, err);
    if (rc)
        fail_msg("%s", err);
    assert_int_equal(s.nsources, 3);
    assert_int_equal(s.mix_window, 4);
    assert_int_equal(s.mix_repeat, 0);
    assert_string_equal(s.table, "web"); /* source 0's */
    assert_string_equal(s.sources[1].spec.table, "code");
    assert_int_equal(s.sources[1].spec.format, DPP_FORMAT_PARQUET);
    assert_int_equal(s.sources[1].spec.npartitions, 1);
    assert_int_equal(s.sources[2].spec.nfilters, 1);
    assert_int_equal(s.sources[0].spec.nfilters, 0);
    assert_int_equal(s.sources[2].spec.ndense, 1); /* the shared features */
    /* 40 rows a window: 20, 12, 8 */
    assert_int_equal(s.sources[0].window_rows, 20);
    assert_int_equal(s.sources[1].window_rows, 12);
    assert_int_equal(s.sources[2].window_rows, 8);
    char *text = dpp_spec_to_json(&s);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"sources\":[{\"table\":\"web\",\"weight\":0.5,"));
    dpp_spec_t b;
    assert_int_equal(parse(text, &b, err), 0);
    char *again = dpp_spec_to_json(&b);
    assert_string_equal(text, again);
    assert_int_equal(b.sources[2].window_rows, 8);
    free(again);
    free(text);
    dpp_spec_close(&b);
    /* a source's spec is a whole spec (what a worker reads it with) */
    text = dpp_spec_to_json(&s.sources[1].spec);
    assert_int_equal(parse(text, &b, err), 0);
    assert_int_equal(b.nsources, 0);
    assert_string_equal(b.table, "code");
    free(text);
    dpp_spec_close(&b);
    dpp_spec_close(&s);
    /* shares by largest remainder: 1/3 each of 10 rows is 4, 3, 3 */
    assert_int_equal(parse("{\"batch_size\":10," FEATURES_OK ",\"mixture\":{\"window\":1,"
                           "\"exhausted\":\"repeat\"},\"sources\":[{\"table\":\"a\",\"weight\":1},"
                           "{\"table\":\"b\",\"weight\":1},{\"table\":\"c\",\"weight\":1}]}",
                           &s, err),
                     0);
    assert_int_equal(s.mix_repeat, 1);
    assert_int_equal(s.sources[0].window_rows + s.sources[1].window_rows +
                         s.sources[2].window_rows,
                     10);
    assert_int_equal(s.sources[0].window_rows, 4);
    dpp_spec_close(&s);
    /* the largest window, one weight a billion times the other: the shares
     * still add up to it, each at least a row */
    assert_int_equal(parse("{\"batch_size\":8192," FEATURES_OK ",\"mixture\":{\"window\":262144},"
                           "\"sources\":[{\"table\":\"a\",\"weight\":1e9},{\"table\":\"b\","
                           "\"weight\":1}]}",
                           &s, err),
                     0);
    assert_int_equal((uint64_t)s.sources[0].window_rows + s.sources[1].window_rows,
                     DPP_SPEC_MAX_WINDOW_ROWS);
    assert_int_equal(s.sources[1].window_rows, 2);
    dpp_spec_close(&s);

    static const struct {
        const char *json, *err;
    } bad[] = {
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1}]}",
         "sources: expected an array of 2 to 64 sources"},
        {"{\"table\":\"t\",\"batch_size\":10," FEATURES_OK "," MIX_SOURCES "}",
         "table: a mixture names each source's table"},
        {"{\"batch_size\":10," FEATURES_OK ",\"remainder\":\"pad\"," MIX_SOURCES "}",
         "remainder: a mixture's epoch is whole windows"},
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1},"
         "{\"table\":\"b\"}]}",
         "sources[1].weight: required: a positive number"},
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1},"
         "{\"table\":\"b\",\"weight\":1,\"formt\":\"parquet\"}]}",
         "sources[1].formt: unknown key; did you mean \"format\"?"},
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1},"
         "{\"table\":\"../b\",\"weight\":1}]}",
         "sources[1].table: must be a relative path inside a data root"},
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1},"
         "{\"table\":\"b\",\"weight\":1,\"features\":{}}]}",
         "sources[1].features: a mixture's features are shared by every source"},
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1},"
         "{\"table\":\"b\",\"weight\":0.001}]}",
         "sources[1].weight: 0.001 of 1.001 gives no row in a window of 160 rows"},
        /* a window of 2^33 rows: refused by name, never dealt (a 32-bit share
         * wrapped to 0 and a count-up loop ran 2^33 times) */
        {"{\"batch_size\":8192," FEATURES_OK ",\"mixture\":{\"window\":1048576},"
         "\"sources\":[{\"table\":\"a\",\"weight\":1},{\"table\":\"b\",\"weight\":1}]}",
         "mixture.window: 1048576 batches of 8192 rows make 8589934592 rows a window, more than "
         "the 2147483648 a mixture's window may hold: at most 262144 batches of 8192 rows; lower "
         "mixture.window or batch_size"},
        {"{\"batch_size\":10," FEATURES_OK ",\"source\":[{\"table\":\"a\",\"weight\":1}]}",
         "source: unknown key; did you mean \"sources\"?"},
        {"{" BASE_OK "," FEATURES_OK ",\"mixture\":{\"window\":2}}",
         "mixture: applies to a mixture, whose tables are in \"sources\""},
        {"{\"batch_size\":10," FEATURES_OK ",\"sources\":[{\"table\":\"a\",\"weight\":1},"
         "{\"table\":\"b\",\"wieght\":1}]}",
         "sources[1].wieght: unknown key; did you mean \"weight\"?"},
        {"{\"batch_size\":4," TEXT_TOK "," TEXT_SEQ ",\"sources\":[{\"table\":\"a\",\"weight\":1,"
         "\"format\":\"jsonl\"},{\"table\":\"b\",\"weight\":1}]}",
         "sources[1]: tokenizer: applies to text sessions only"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].json, &s, err);
        if (rc != DPP_ESPEC || strncmp(err, bad[i].err, strlen(bad[i].err)) != 0)
            fail_msg("mixture case %zu: rc %d, err \"%s\", want \"%s...\"", i, rc, err,
                     bad[i].err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remainder),
        cmocka_unit_test(test_order_shuffle_pad),
        cmocka_unit_test(test_spec_limits),
        cmocka_unit_test(test_minimal),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_sparse_only_and_limits),
        cmocka_unit_test(test_optional_features_and_label),
        cmocka_unit_test(test_numbers_round_trip_exactly),
        cmocka_unit_test(test_new_keys),
        cmocka_unit_test(test_new_keys_limits),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_mixture), cmocka_unit_test(test_cache_fingerprint),
        cmocka_unit_test(test_pins),
        cmocka_unit_test(test_every_problem),
        cmocka_unit_test(test_err_buffer),
        cmocka_unit_test(test_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
