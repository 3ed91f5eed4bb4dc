// SPDX-License-Identifier: Apache-2.0
// An object store's listing made into a table (src/master/s3_table.c,
// dpp_s3_table_from_listing): the keys a spec selects, and the listings it
// refuses: a key listed twice, a key outside the prefix asked for (also one
// shorter than the prefix, once read past its end), a kept object without
// an ETag.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "master/s3_table.h"
#include "spec/spec.h"

/* A listing of keys[0..n), each with size 10 and ETag "e<i>" (none where
 * no_etag[i]); free with dpp_s3_listing_close. */
static void make_listing(dpp_s3_listing_t *l, const char *const *keys, size_t n, const int *no_etag)
{
    memset(l, 0, sizeof *l);
    l->objs = calloc(n ? n : 1, sizeof *l->objs);
    assert_non_null(l->objs);
    l->n = l->cap = n;
    for (size_t i = 0; i < n; i++) {
        l->objs[i].key = strdup(keys[i]);
        l->objs[i].size = 10;
        if (!(no_etag && no_etag[i]))
            snprintf(l->objs[i].etag, sizeof l->objs[i].etag, "e%zu", i);
    }
}

static void parse_spec(dpp_spec_t *spec, const char *table, const char *partitions)
{
    char json[512], err[DPP_SPEC_ERRLEN];
    snprintf(json, sizeof json,
             "{\"table\":\"%s\",\"batch_size\":4,%s"
             "\"features\":{\"sparse\":[{\"name\":\"c1\"}]},\"label\":{\"name\":\"label\"}}",
             table, partitions);
    assert_int_equal(dpp_spec_parse(json, strlen(json), spec, err, sizeof err), 0);
}

/* dpp_s3_table_from_listing of keys under "w/t/" for table s3://b/w/t. */
static int from_keys(const char *const *keys, size_t n, const int *no_etag, const char *partitions,
                     dpp_s3_table_t *t, char *err, size_t errlen)
{
    dpp_spec_t spec;
    dpp_s3_listing_t l;
    parse_spec(&spec, "s3://b/w/t", partitions);
    make_listing(&l, keys, n, no_etag);
    int rc = dpp_s3_table_from_listing(&spec, "b", "w/t/", &l, t, err, errlen);
    dpp_s3_listing_close(&l);
    dpp_spec_close(&spec);
    return rc;
}

static void test_selects(void **state)
{
    (void)state;
    const char *keys[] = {"w/t/ds=1/a.tfrecord", "w/t/_SUCCESS", "w/t/ds=2/b.tfrecord",
                          "w/t/ds=1/a.tfrecord.idx"};
    const int no_etag[] = {0, 1, 0, 0}; /* a file not kept needs none */
    dpp_s3_table_t t;
    char err[512];
    assert_int_equal(from_keys(keys, 4, no_etag, "", &t, err, sizeof err), 0);
    assert_string_equal(t.table_path, "s3://b/w/t");
    assert_int_equal(t.n, 2);
    assert_string_equal(t.files[0], "s3://b/w/t/ds=1/a.tfrecord");
    assert_string_equal(t.etags[0], "e0");
    assert_string_equal(t.files[1], "s3://b/w/t/ds=2/b.tfrecord");
    assert_string_equal(t.etags[1], "e2");
    assert_int_equal(t.sizes[1], 10);
    dpp_s3_table_close(&t);

    assert_int_equal(from_keys(keys, 4, no_etag, "\"partitions\":[\"ds=2\"],", &t, err, sizeof err),
                     0);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.files[0], "s3://b/w/t/ds=2/b.tfrecord");
    dpp_s3_table_close(&t);

    assert_int_equal(from_keys(keys, 4, no_etag, "\"partitions\":[\"ds=3\"],", &t, err, sizeof err),
                     DPP_ESPEC);
    assert_null(t.files);

    assert_int_equal(from_keys(keys, 0, NULL, "", &t, err, sizeof err), -ENOENT);
    assert_string_equal(err, "table \"s3://b/w/t\": no objects under s3://b/w/t/");
}

static void test_bucket_top(void **state)
{
    (void)state;
    const char *keys[] = {"ds=1/a.tfrecord"};
    dpp_spec_t spec;
    dpp_s3_listing_t l;
    dpp_s3_table_t t;
    char err[512];
    parse_spec(&spec, "s3://b", "");
    make_listing(&l, keys, 1, NULL);
    assert_int_equal(dpp_s3_table_from_listing(&spec, "b", "", &l, &t, err, sizeof err), 0);
    assert_string_equal(t.table_path, "s3://b");
    assert_string_equal(t.files[0], "s3://b/ds=1/a.tfrecord");
    dpp_s3_table_close(&t);
    dpp_s3_listing_close(&l);
    dpp_spec_close(&spec);
}

static void test_refuses_repeated_key(void **state)
{
    (void)state;
    /* pages that overlap: a key again, out of order */
    const char *keys[] = {"w/t/ds=1/a.tfrecord", "w/t/ds=1/b.tfrecord", "w/t/ds=1/a.tfrecord"};
    dpp_s3_table_t t;
    char err[512];
    assert_int_equal(from_keys(keys, 3, NULL, "", &t, err, sizeof err), DPP_ESTORAGE);
    assert_non_null(strstr(err, "table \"s3://b/w/t\": the store listed key "
                                "\"w/t/ds=1/a.tfrecord\" twice (objects 1 and 3 of the listing)"));
    assert_int_equal(t.n, 0);
    assert_null(t.files);
}

static void test_refuses_keys_outside_the_prefix(void **state)
{
    (void)state;
    char err[512];
    dpp_s3_table_t t;
    /* shorter than the prefix: the table's files were once cut from key +
     * strlen(prefix), past the end of this one */
    const char *short_key[] = {"w/t/ds=1/a.tfrecord", "w"};
    assert_int_equal(from_keys(short_key, 2, NULL, "", &t, err, sizeof err), DPP_ESTORAGE);
    assert_non_null(strstr(err, "the store listed key \"w\" (object 2 of the listing), which is "
                                "not under the prefix \"w/t/\" asked for"));
    const char *beside[] = {"w/tother/ds=1/a.tfrecord"};
    assert_int_equal(from_keys(beside, 1, NULL, "", &t, err, sizeof err), DPP_ESTORAGE);
    assert_non_null(strstr(err, "\"w/tother/ds=1/a.tfrecord\" (object 1 of the listing)"));
    const char *the_prefix_less_its_slash[] = {"w/t"};
    assert_int_equal(from_keys(the_prefix_less_its_slash, 1, NULL, "", &t, err, sizeof err),
                     DPP_ESTORAGE);
}

static void test_refuses_kept_object_without_etag(void **state)
{
    (void)state;
    const char *keys[] = {"w/t/ds=1/a.tfrecord", "w/t/ds=1/b.tfrecord"};
    const int no_etag[] = {0, 1};
    dpp_s3_table_t t;
    char err[512];
    assert_int_equal(from_keys(keys, 2, no_etag, "", &t, err, sizeof err), DPP_ESTORAGE);
    assert_non_null(strstr(err, "the store listed \"s3://b/w/t/ds=1/b.tfrecord\" without an ETag"));
    assert_null(t.files);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selects),
        cmocka_unit_test(test_bucket_top),
        cmocka_unit_test(test_refuses_repeated_key),
        cmocka_unit_test(test_refuses_keys_outside_the_prefix),
        cmocka_unit_test(test_refuses_kept_object_without_etag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
