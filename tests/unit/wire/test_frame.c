// SPDX-License-Identifier: Apache-2.0
// Frame header encoding and incremental parsing: whole, split, oversized,
// garbage, truncated and unknown-type frames.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/frame.h"
#include "dpp.pb-c.h"
#include "dpp/error.h"

static dpp_frame_limits_t lim = {.max_msg = 1024, .max_payload = 4096};

/* A SUBMIT frame with a payload appended, built with the code under test's
 * packer; the header bytes are then checked against the documented layout. */
static uint8_t *make_frame(const char *spec, size_t payload_len, size_t *len)
{
    Dpp__SubmitRequest req = DPP__SUBMIT_REQUEST__INIT;
    req.spec_json = (char *)spec;
    size_t head;
    uint8_t *h = dpp_frame_pack(DPP_MSG_SUBMIT, &req.base, (uint32_t)payload_len, &head);
    assert_non_null(h);
    uint8_t *buf = malloc(head + payload_len);
    memcpy(buf, h, head);
    for (size_t i = 0; i < payload_len; i++)
        buf[head + i] = (uint8_t)i;
    free(h);
    *len = head + payload_len;
    return buf;
}

static void test_layout(void **state)
{
    (void)state;
    uint8_t h[DPP_FRAME_HEADER_SIZE];
    dpp_frame_header_encode(h, 0x1234, 0x01020304, 0x0a0b0c0d);
    const uint8_t want[] = {'D', 'P', 'P', '1', 0x34, 0x12, 0,    0,
                            4,   3,   2,   1,   0x0d, 0x0c, 0x0b, 0x0a};
    assert_memory_equal(h, want, sizeof want);
}

static void test_roundtrip(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = make_frame("{\"table\":\"t\"}", 100, &len);
    dpp_frame_t f;
    size_t flen;
    assert_int_equal(dpp_frame_parse(buf, len, &lim, &f, &flen), 0);
    assert_int_equal(flen, len);
    assert_int_equal(f.type, DPP_MSG_SUBMIT);
    assert_int_equal(f.payload_len, 100);
    assert_int_equal(f.payload[99], 99);
    Dpp__SubmitRequest *m = (Dpp__SubmitRequest *)dpp_frame_unpack(&f);
    assert_non_null(m);
    assert_string_equal(m->spec_json, "{\"table\":\"t\"}");
    protobuf_c_message_free_unpacked(&m->base, NULL);
    free(buf);
}

/* Every prefix of a frame asks for more bytes, never errors or overreads. */
static void test_truncated(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = make_frame("abc", 10, &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan catches overreads */
        memcpy(copy, buf, n);
        dpp_frame_t f;
        size_t flen;
        assert_int_equal(dpp_frame_parse(copy, n, &lim, &f, &flen), 1);
        if (n >= DPP_FRAME_HEADER_SIZE)
            assert_int_equal(flen, len);
        else
            assert_int_equal(flen, 0);
        free(copy);
    }
    free(buf);
}

static void test_two_frames_in_one_buffer(void **state)
{
    (void)state;
    size_t a_len, b_len;
    uint8_t *a = make_frame("first", 0, &a_len);
    uint8_t *b = make_frame("second", 3, &b_len);
    uint8_t *both = malloc(a_len + b_len);
    memcpy(both, a, a_len);
    memcpy(both + a_len, b, b_len);
    dpp_frame_t f;
    size_t flen;
    assert_int_equal(dpp_frame_parse(both, a_len + b_len, &lim, &f, &flen), 0);
    assert_int_equal(flen, a_len);
    assert_int_equal(dpp_frame_parse(both + flen, b_len, &lim, &f, &flen), 0);
    assert_int_equal(f.payload_len, 3);
    free(a);
    free(b);
    free(both);
}

static void test_oversized(void **state)
{
    (void)state;
    uint8_t h[DPP_FRAME_HEADER_SIZE];
    dpp_frame_t f;
    size_t flen;
    dpp_frame_header_encode(h, DPP_MSG_SUBMIT, lim.max_msg + 1, 0);
    assert_int_equal(dpp_frame_parse(h, sizeof h, &lim, &f, &flen), DPP_EFRAMESIZE);
    dpp_frame_header_encode(h, DPP_MSG_BLOCK, 10, lim.max_payload + 1);
    assert_int_equal(dpp_frame_parse(h, sizeof h, &lim, &f, &flen), DPP_EFRAMESIZE);
    dpp_frame_header_encode(h, DPP_MSG_BLOCK, UINT32_MAX, UINT32_MAX);
    assert_int_equal(dpp_frame_parse(h, sizeof h, &lim, &f, &flen), DPP_EFRAMESIZE);
    /* exactly at the limits is fine (and needs the bytes) */
    dpp_frame_header_encode(h, DPP_MSG_BLOCK, lim.max_msg, lim.max_payload);
    assert_int_equal(dpp_frame_parse(h, sizeof h, &lim, &f, &flen), 1);
    assert_int_equal(flen, DPP_FRAME_HEADER_SIZE + lim.max_msg + lim.max_payload);
}

static void test_garbage(void **state)
{
    (void)state;
    dpp_frame_t f;
    size_t flen;
    const char *http = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(dpp_frame_parse((const uint8_t *)http, strlen(http), &lim, &f, &flen),
                     DPP_EFRAME);
    /* refused on the first wrong byte, before a whole header arrived */
    assert_int_equal(dpp_frame_parse((const uint8_t *)"X", 1, &lim, &f, &flen), DPP_EFRAME);
    assert_int_equal(dpp_frame_parse((const uint8_t *)"DPQ", 3, &lim, &f, &flen), DPP_EFRAME);
    uint8_t h[DPP_FRAME_HEADER_SIZE];
    dpp_frame_header_encode(h, DPP_MSG_SUBMIT, 0, 0);
    h[6] = 1; /* flags must be zero */
    assert_int_equal(dpp_frame_parse(h, sizeof h, &lim, &f, &flen), DPP_EFRAME);
    dpp_frame_header_encode(h, 9999, 0, 0);
    assert_int_equal(dpp_frame_parse(h, sizeof h, &lim, &f, &flen), DPP_EMSGTYPE);
    /* random bytes never crash the parser; all but a lucky magic are refused */
    srand(7);
    uint8_t junk[64];
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rand() % (int)sizeof junk) + 1;
        for (size_t j = 0; j < n; j++)
            junk[j] = (uint8_t)rand();
        int rc = dpp_frame_parse(junk, n, &lim, &f, &flen);
        assert_true(rc == DPP_EFRAME || rc == DPP_EFRAMESIZE || rc == DPP_EMSGTYPE || rc == 1 ||
                    rc == 0);
    }
}

static void test_undecodable_message(void **state)
{
    (void)state;
    uint8_t buf[DPP_FRAME_HEADER_SIZE + 3];
    dpp_frame_header_encode(buf, DPP_MSG_SUBMIT, 3, 0);
    buf[16] = 0x0a; /* field 1, length-delimited ... */
    buf[17] = 0x7f; /* ... claiming 127 bytes that are not there */
    buf[18] = 'x';
    dpp_frame_t f;
    size_t flen;
    assert_int_equal(dpp_frame_parse(buf, sizeof buf, &lim, &f, &flen), 0);
    assert_null(dpp_frame_unpack(&f));
}

static void test_every_type_has_a_descriptor(void **state)
{
    (void)state;
    static const uint16_t types[] = {1,  2,  3,  10, 11, 12, 13, 20, 21, 22,
                                     23, 24, 25, 30, 31, 32, 40, 41, 42};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        assert_non_null(dpp_msg_descriptor(types[i]));
        assert_string_not_equal(dpp_msg_name(types[i]), "UNKNOWN");
    }
    assert_null(dpp_msg_descriptor(0));
    assert_string_equal(dpp_msg_name(0), "UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_two_frames_in_one_buffer),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_undecodable_message),
        cmocka_unit_test(test_every_type_has_a_descriptor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
