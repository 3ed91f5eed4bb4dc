/* SPDX-License-Identifier: Apache-2.0 */
/* ListObjectsV2 pages as S3 writes them (the example of the S3 API
 * reference's ListObjectsV2 page, with entities and a second page), URL
 * encoded keys, error responses, and malformed pages that add nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dpp/error.h"
#include "storage/s3_list.h"

#define HEAD                                                                                       \
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                                                 \
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"                         \
    "<Name>bucket</Name><Prefix>t/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"

static const char page1[] = HEAD
    "<IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "<Contents><Key>t/ds=2026-01-01/part-00000.tfrecord</Key>"
    "<LastModified>2026-12-06T21:57:34.000Z</LastModified>"
    "<ETag>&quot;599bab3ed2c697f1d26842727561fd94&quot;</ETag><Size>2448544</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>t/ds=2026-01-01/a&amp;b &lt;c&gt; &#233;&#x1F600;.json</Key>"
    "<ETag>\"9b2cf535f27731c974343645a3985328-2\"</ETag><Size>0</Size></Contents>"
    "</ListBucketResult>";

static const char page2[] =
    HEAD "<IsTruncated>false</IsTruncated>"
         "<Contents><Key>t/z</Key><Size>18446744073709551615</Size></Contents>"
         "</ListBucketResult>";

static void test_pages(void **state)
{
    (void)state;
    dpp_s3_listing_t l = {0};
    char err[256];
    assert_int_equal(dpp_s3_list_parse(&l, page1, strlen(page1), err, sizeof err), 0);
    assert_int_equal(l.n, 2);
    assert_true(l.truncated);
    assert_string_equal(l.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    assert_string_equal(l.objs[0].key, "t/ds=2026-01-01/part-00000.tfrecord");
    assert_int_equal(l.objs[0].size, 2448544);
    assert_string_equal(l.objs[0].etag, "599bab3ed2c697f1d26842727561fd94");
    assert_string_equal(l.objs[1].key, "t/ds=2026-01-01/a&b <c> \xc3\xa9\xf0\x9f\x98\x80.json");
    assert_int_equal(l.objs[1].size, 0);
    assert_string_equal(l.objs[1].etag, "9b2cf535f27731c974343645a3985328-2");
    assert_int_equal(dpp_s3_list_parse(&l, page2, strlen(page2), err, sizeof err), 0);
    assert_int_equal(l.n, 3);
    assert_false(l.truncated);
    assert_null(l.next_token);
    assert_int_equal(l.objs[2].size, UINT64_MAX);
    assert_string_equal(l.objs[2].etag, "");
    dpp_s3_listing_close(&l);
    assert_int_equal(l.n, 0);
}

static void test_url_encoding(void **state)
{
    (void)state;
    const char *xml = HEAD "<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
                           "<Contents><Key>t/a%2Bb+c%0A%C3%A9</Key><Size>1</Size></Contents>"
                           "</ListBucketResult>";
    dpp_s3_listing_t l = {0};
    char err[256];
    assert_int_equal(dpp_s3_list_parse(&l, xml, strlen(xml), err, sizeof err), 0);
    assert_string_equal(l.objs[0].key, "t/a+b c\n\xc3\xa9");
    dpp_s3_listing_close(&l);
}

/* Each malformed page is refused with its reason and adds nothing to what
 * earlier pages gave. */
static void test_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *xml, *why;
    } bad[] = {
        {"<Error><Code>NoSuchBucket</Code></Error>", "no <ListBucketResult> element"},
        {HEAD "<Contents><Key>k</Key><Size>1</Size></Contents>", "no <ListBucketResult>"},
        {HEAD "<Contents><Size>1</Size></Contents></ListBucketResult>", "without Key"},
        {HEAD "<Contents><Key>k</Key></Contents></ListBucketResult>", "without Size"},
        {HEAD "<Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
         "the Size of \"k\" is not a whole number"},
        {HEAD "<Contents><Key>k</Key><Size>18446744073709551616</Size></Contents>"
              "</ListBucketResult>",
         "not a whole number"},
        {HEAD "<Contents><Key>a&nbsp;b</Key><Size>1</Size></Contents></ListBucketResult>",
         "\"&nbsp;\" is not an XML entity"},
        {HEAD "<Contents><Key>a&#0;b</Key><Size>1</Size></Contents></ListBucketResult>",
         "is not an XML entity"},
        {HEAD "<Contents><Key>a&amp b</Key><Size>1</Size></Contents></ListBucketResult>",
         "without its ';'"},
        {HEAD "<Contents><Key>\xff</Key><Size>1</Size></Contents></ListBucketResult>", "not UTF-8"},
        {HEAD "<Contents><Key></Key><Size>1</Size></Contents></ListBucketResult>", "Key: empty"},
        {HEAD "<EncodingType>url</EncodingType><Contents><Key>a%4</Key><Size>1</Size>"
              "</Contents></ListBucketResult>",
         "not %XY"},
        {HEAD "<EncodingType>url</EncodingType><Contents><Key>a%00</Key><Size>1</Size>"
              "</Contents></ListBucketResult>",
         "holds a NUL"},
        {HEAD "<IsTruncated>true</IsTruncated><Contents><Key>k</Key><Size>1</Size></Contents>"
              "</ListBucketResult>",
         "without a usable NextContinuationToken"},
    };
    dpp_s3_listing_t l = {0};
    char err[256];
    assert_int_equal(dpp_s3_list_parse(&l, page2, strlen(page2), err, sizeof err), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = dpp_s3_list_parse(&l, bad[i].xml, strlen(bad[i].xml), err, sizeof err);
        if (rc != DPP_EINVAL || strstr(err, bad[i].why) == NULL)
            fail_msg("case %zu: rc %d, err \"%s\", expected \"%s\"", i, rc, err, bad[i].why);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.objs[0].key, "t/z");
    }
    /* a key over S3's 1024 bytes */
    char big[2200];
    int n = snprintf(big, sizeof big, HEAD "<Contents><Key>");
    memset(big + n, 'k', 1025);
    snprintf(big + n + 1025, sizeof big - (size_t)n - 1025,
             "</Key><Size>1</Size></Contents></ListBucketResult>");
    assert_int_equal(dpp_s3_list_parse(&l, big, strlen(big), err, sizeof err), DPP_EINVAL);
    assert_non_null(strstr(err, "longer than 1024 bytes"));
    assert_int_equal(l.n, 1);
    dpp_s3_listing_close(&l);
}

static void test_error_response(void **state)
{
    (void)state;
    const char *xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
                      "<Message>The specified key does not exist &amp; never did.</Message>"
                      "<Key>t/x</Key></Error>";
    char code[32], msg[128];
    dpp_s3_error_parse(xml, strlen(xml), code, sizeof code, msg, sizeof msg);
    assert_string_equal(code, "NoSuchKey");
    assert_string_equal(msg, "The specified key does not exist & never did.");
    dpp_s3_error_parse(xml, strlen(xml), code, 5, msg, sizeof msg); /* does not fit */
    assert_string_equal(code, "");
    dpp_s3_error_parse("<html>502 Bad Gateway</html>", 28, code, sizeof code, msg, sizeof msg);
    assert_string_equal(code, "");
    assert_string_equal(msg, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pages),
        cmocka_unit_test(test_url_encoding),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_error_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
