/* SPDX-License-Identifier: Apache-2.0 */
/* Vocabulary files and string ids (spec/vocab.h, dpp_transform_string):
 * line numbers, out-of-vocabulary ids, refused files, and the string hash
 * against docs/spec.md's vectors (computed with libxxhash from Python). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dpp/error.h"
#include "spec/spec.h"
#include "spec/transform.h"
#include "spec/vocab.h"

static char dir[] = "/tmp/dpp-test-vocab.XXXXXX";

static const char *write_file(const char *name, const char *text, size_t len)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}

static int64_t find(const dpp_vocab_t *v, const char *s)
{
    return dpp_vocab_find(v, (const uint8_t *)s, strlen(s));
}

static void test_lines(void **state)
{
    (void)state;
    char err[256];
    dpp_vocab_t *v;
    /* an empty line is the empty string; "\r" is part of a string; the
     * last line lacks its newline */
    static const char text[] = "apple\nbanana\n\nc\r\nd";
    const char *path = write_file("a.txt", text, sizeof text - 1);
    assert_int_equal(dpp_vocab_load(path, "a.txt", &v, err, sizeof err), 0);
    assert_int_equal(dpp_vocab_size(v), 5);
    assert_int_equal(find(v, "apple"), 0);
    assert_int_equal(find(v, "banana"), 1);
    assert_int_equal(find(v, ""), 2);
    assert_int_equal(find(v, "c\r"), 3);
    assert_int_equal(find(v, "c"), -1);
    assert_int_equal(find(v, "d"), 4);
    assert_int_equal(find(v, "appl"), -1);
    assert_int_equal(find(v, "apple\n"), -1);

    /* as the vocab op's first step: OOV is the size, or size + a bucket */
    dpp_transform_t op = {.op = DPP_OP_VOCAB, .vocab = v};
    assert_int_equal(dpp_transform_string(&op, (const uint8_t *)"banana", 6), 1);
    assert_int_equal(dpp_transform_string(&op, (const uint8_t *)"kiwi", 4), 5);
    op.oov_buckets = 3;
    int64_t kiwi = dpp_transform_string(&op, (const uint8_t *)"kiwi", 4);
    assert_int_equal(kiwi, 5 + (int64_t)(dpp_string_hash((const uint8_t *)"kiwi", 4, 0) % 3));
    assert_true(kiwi >= 5 && kiwi < 8);
    assert_int_equal(dpp_transform_string(&op, (const uint8_t *)"d", 1), 4);
    dpp_vocab_free(v);

    /* an empty file: every string out of vocabulary */
    path = write_file("empty.txt", "", 0);
    assert_int_equal(dpp_vocab_load(path, "empty.txt", &v, err, sizeof err), 0);
    assert_int_equal(dpp_vocab_size(v), 0);
    assert_int_equal(find(v, ""), -1);
    dpp_vocab_free(v);
}

static void test_many(void **state)
{
    (void)state;
    char err[256];
    size_t n = 50000, len = 0;
    char *text = malloc(n * 12);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "w%zu\n", (i * 7919) % n);
    const char *path = write_file("many.txt", text, len);
    dpp_vocab_t *v;
    assert_int_equal(dpp_vocab_load(path, "many.txt", &v, err, sizeof err), 0);
    assert_int_equal(dpp_vocab_size(v), n);
    for (size_t i = 0; i < n; i += 97) {
        char w[16];
        snprintf(w, sizeof w, "w%zu", (i * 7919) % n);
        assert_int_equal(find(v, w), (int64_t)i);
    }
    assert_int_equal(find(v, "w50000"), -1);
    dpp_vocab_free(v);
    free(text);
}

static void test_refused(void **state)
{
    (void)state;
    char err[256];
    dpp_vocab_t *v = (dpp_vocab_t *)1;
    const char *path = write_file("dup.txt", "a\nb\na\n", 6);
    assert_int_equal(dpp_vocab_load(path, "dup.txt", &v, err, sizeof err), DPP_EINVAL);
    assert_null(v);
    assert_string_equal(err, "vocabulary dup.txt: line 3 repeats line 1; every string must have "
                             "one id");
    snprintf(err, sizeof err, "%s/nope.txt", dir);
    char missing[256];
    snprintf(missing, sizeof missing, "%s", err);
    assert_int_equal(dpp_vocab_load(missing, "nope.txt", &v, err, sizeof err), -ENOENT);
    assert_string_equal(err, "vocabulary nope.txt: No such file or directory");
}

/* dpp_vocab_new (an object's bytes) reads as dpp_vocab_load does, and
 * refuses the same. */
static void test_from_bytes(void **state)
{
    (void)state;
    char err[256];
    dpp_vocab_t *v;
    static const char text[] = "apple\nbanana\n\nc\r\nd";
    assert_int_equal(dpp_vocab_new((const uint8_t *)text, sizeof text - 1, "s3://b/v.txt", &v, err,
                                   sizeof err),
                     0);
    assert_int_equal(dpp_vocab_size(v), 5);
    assert_int_equal(find(v, "banana"), 1);
    assert_int_equal(find(v, ""), 2);
    assert_int_equal(find(v, "c\r"), 3);
    assert_int_equal(find(v, "d"), 4);
    assert_int_equal(find(v, "c"), -1);
    dpp_vocab_free(v);
    v = (dpp_vocab_t *)1;
    assert_int_equal(dpp_vocab_new((const uint8_t *)"a\nb\na\n", 6, "s3://b/dup.txt", &v, err,
                                   sizeof err),
                     DPP_EINVAL);
    assert_null(v);
    assert_string_equal(err, "vocabulary s3://b/dup.txt: line 3 repeats line 1; every string must "
                             "have one id");
}

static void test_string_hash(void **state)
{
    (void)state;
    /* docs/spec.md's vectors, and one with a seed (libxxhash via Python) */
    assert_true(dpp_string_hash((const uint8_t *)"", 0, 0) == 0x2d06800538d394c2ull);
    assert_true(dpp_string_hash((const uint8_t *)"a", 1, 0) == 0xe6c632b61e964e1full);
    assert_true(dpp_string_hash((const uint8_t *)"abc", 3, 7) == 0x48ff56f569e39912ull);
    dpp_transform_t op = {.op = DPP_OP_HASH, .n = 1000, .salt = 7};
    dpp_transform_prepare(&op);
    assert_int_equal(dpp_transform_string(&op, (const uint8_t *)"abc", 3),
                     (int64_t)(0x48ff56f569e39912ull % 1000));
    assert_true(dpp_transform_takes_strings(&op, 1));
    dpp_transform_t mod = {.op = DPP_OP_MODULO, .n = 3};
    assert_false(dpp_transform_takes_strings(&mod, 1));
    assert_false(dpp_transform_takes_strings(&op, 0));
}

static void test_spec(void **state)
{
    (void)state;
    char err[DPP_SPEC_ERRLEN];
    dpp_spec_t s;
    static const char ok[] =
        "{\"table\":\"t\",\"batch_size\":8,\"features\":{\"sparse\":[{\"name\":\"s\","
        "\"transforms\":"
        "[{\"op\":\"vocab\",\"file\":\"v/s.txt\",\"oov_buckets\":4},{\"op\":\"truncate\","
        "\"max_len\":2}]}]},\"label\":{\"name\":\"y\"}}";
    assert_int_equal(dpp_spec_parse(ok, strlen(ok), &s, err, sizeof err), 0);
    assert_int_equal(s.sparse[0].ops[0].op, DPP_OP_VOCAB);
    assert_string_equal(s.sparse[0].ops[0].file, "v/s.txt");
    assert_int_equal(s.sparse[0].ops[0].oov_buckets, 4);
    char *json = dpp_spec_to_json(&s);
    assert_non_null(strstr(json, "\"vocab\""));
    dpp_spec_t again;
    assert_int_equal(dpp_spec_parse(json, strlen(json), &again, err, sizeof err), 0);
    assert_string_equal(again.sparse[0].ops[0].file, "v/s.txt");
    free(json);
    dpp_spec_close(&again);
    dpp_spec_close(&s);

    static const struct {
        const char *ops, *err;
    } bad[] = {
        {"[{\"op\":\"modulo\",\"n\":3},{\"op\":\"vocab\",\"file\":\"v\"}]",
         "features.sparse[0].transforms[1].op: vocab turns strings into ids, so it must be the "
         "first op"},
        {"[{\"op\":\"vocab\",\"file\":\"../v\"}]",
         "features.sparse[0].transforms[0].file: \"../v\" must be a path relative to a data root, "
         "without \"..\""},
        {"[{\"op\":\"vocab\",\"file\":\"/etc/passwd\"}]",
         "features.sparse[0].transforms[0].file: \"/etc/passwd\" must be a path relative to a "
         "data root, without \"..\""},
        {"[{\"op\":\"vocab\"}]", "features.sparse[0].transforms[0].file: required"},
        {"[{\"op\":\"vocab\",\"file\":\"v\",\"oov_buckets\":-1}]", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"table\":\"t\",\"batch_size\":8,\"features\":{\"sparse\":[{\"name\":\"s\","
                 "\"transforms\":%s}]},\"label\":{\"name\":\"y\"}}",
                 bad[i].ops);
        assert_int_equal(dpp_spec_parse(text, strlen(text), &s, err, sizeof err), DPP_ESPEC);
        if (bad[i].err)
            assert_string_equal(err, bad[i].err);
    }
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),   cmocka_unit_test(test_many),
        cmocka_unit_test(test_refused), cmocka_unit_test(test_string_hash),
        cmocka_unit_test(test_spec),    cmocka_unit_test(test_from_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
