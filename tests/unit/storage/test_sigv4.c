/* SPDX-License-Identifier: Apache-2.0 */
/* SigV4 against the signatures AWS publishes for its S3 examples (S3 API
 * reference, "Signature Calculations for the Authorization Header":
 * examplebucket, 20130524, the documentation's example key), URI encoding,
 * the canonical query's order, and malformed requests. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "dpp/error.h"
#include "storage/sigv4.h"

static const dpp_sigv4_cred_t aws_example = {
    .key_id = "AKIAIOSFODNN7EXAMPLE",
    .secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
};

/* "Example: GET Object": the first 10 bytes of test.txt. */
static void test_get_object(void **state)
{
    (void)state;
    dpp_sigv4_req_t req = {.method = "GET",
                           .host = "examplebucket.s3.amazonaws.com",
                           .path = "/test.txt",
                           .range = "bytes=0-9",
                           .amz_date = "20130524T000000Z"};
    char auth[512];
    assert_int_equal(dpp_sigv4_authorization(&aws_example, &req, auth, sizeof auth), 0);
    assert_string_equal(
        auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
              "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
              "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

/* "Example: GET Bucket (List Objects)": max-keys=2, prefix=J, the
 * parameters given out of order. */
static void test_list_objects(void **state)
{
    (void)state;
    const dpp_sigv4_param_t q[] = {{"prefix", "J"}, {"max-keys", "2"}};
    dpp_sigv4_req_t req = {.method = "GET",
                           .host = "examplebucket.s3.amazonaws.com",
                           .path = "/",
                           .query = q,
                           .nquery = 2,
                           .amz_date = "20130524T000000Z"};
    char auth[512];
    assert_int_equal(dpp_sigv4_authorization(&aws_example, &req, auth, sizeof auth), 0);
    assert_string_equal(
        auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
              "aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
              "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

/* A session token is signed: the signature changes and the header lists it. */
static void test_session_token(void **state)
{
    (void)state;
    dpp_sigv4_cred_t c = aws_example;
    dpp_sigv4_req_t req = {.method = "GET",
                           .host = "examplebucket.s3.amazonaws.com",
                           .path = "/test.txt",
                           .range = "bytes=0-9",
                           .amz_date = "20130524T000000Z"};
    char plain[512], with[512];
    assert_int_equal(dpp_sigv4_authorization(&c, &req, plain, sizeof plain), 0);
    c.token = "FQoGZXIvYXdzE//token+with/slashes";
    assert_int_equal(dpp_sigv4_authorization(&c, &req, with, sizeof with), 0);
    assert_non_null(strstr(with, "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;"
                                 "x-amz-security-token,Signature="));
    assert_string_not_equal(strstr(plain, "Signature="), strstr(with, "Signature="));
}

static void test_encode(void **state)
{
    (void)state;
    char out[128];
    const char *s = "ds=2026-01-01/part 0~1_a.b+c%d/é";
    assert_int_equal(dpp_sigv4_encode(s, strlen(s), 1, out, sizeof out),
                     strlen("ds%3D2026-01-01/part%200~1_a.b%2Bc%25d/%C3%A9"));
    assert_string_equal(out, "ds%3D2026-01-01/part%200~1_a.b%2Bc%25d/%C3%A9");
    dpp_sigv4_encode("a/b", 3, 0, out, sizeof out);
    assert_string_equal(out, "a%2Fb");
    /* cut to the buffer, NUL-terminated, the full length still returned */
    assert_int_equal(dpp_sigv4_encode("a b", 3, 0, out, 3), 5);
    assert_string_equal(out, "a%");
}

static void test_query_order(void **state)
{
    (void)state;
    const dpp_sigv4_param_t q[] = {{"prefix", "t/ds=1/"},
                                   {"list-type", "2"},
                                   {"continuation-token", "1ab+/="},
                                   {"max-keys", ""}};
    char out[256];
    size_t n = dpp_sigv4_query(q, 4, out, sizeof out);
    assert_string_equal(out, "continuation-token=1ab%2B%2F%3D&list-type=2&max-keys=&"
                             "prefix=t%2Fds%3D1%2F");
    assert_int_equal(n, strlen(out));
    assert_int_equal(dpp_sigv4_query(q, 0, out, sizeof out), 0);
    assert_string_equal(out, "");
}

static void test_malformed(void **state)
{
    (void)state;
    char auth[512];
    dpp_sigv4_req_t req = {.method = "GET",
                           .host = "examplebucket.s3.amazonaws.com",
                           .path = "/test.txt",
                           .amz_date = "20130524T000000Z"};
    const char *dates[] = {"20130524", "20130524 000000Z", "2013052aT000000Z", NULL};
    for (int i = 0; dates[i]; i++) {
        req.amz_date = dates[i];
        assert_int_equal(dpp_sigv4_authorization(&aws_example, &req, auth, sizeof auth),
                         DPP_EINVAL);
    }
    req.amz_date = "20130524T000000Z";
    req.range = "bytes=0-9\r\nx-evil: 1"; /* a header injected into the signature */
    assert_int_equal(dpp_sigv4_authorization(&aws_example, &req, auth, sizeof auth), DPP_EINVAL);
    req.range = NULL;
    req.path = "test.txt"; /* not from '/' */
    assert_int_equal(dpp_sigv4_authorization(&aws_example, &req, auth, sizeof auth), DPP_EINVAL);
    req.path = "/test.txt";
    assert_int_equal(dpp_sigv4_authorization(&aws_example, &req, auth, 40), -ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_object),    cmocka_unit_test(test_list_objects),
        cmocka_unit_test(test_session_token), cmocka_unit_test(test_encode),
        cmocka_unit_test(test_query_order),   cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
