/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord iterator and framing. Frames are built here with a bitwise CRC32C
 * of the test's own, so the expected bytes do not come from the code under
 * test. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "format/tfrecord.h"
#include "dpp/error.h"
#include "ref_tfrecord.h"

#define MAX_REC (1u << 20)

/* Appends a frame with the given length field (normally payload_len) and
 * returns its size. */
static size_t ref_frame_len(uint8_t *out, uint64_t length_field, const uint8_t *payload,
                            size_t payload_len)
{
    put_le(out, length_field, 8);
    put_le(out + 8, ref_mask(ref_crc(out, 8)), 4);
    if (payload_len)
        memcpy(out + 12, payload, payload_len);
    put_le(out + 12 + payload_len, ref_mask(ref_crc(out + 12, payload_len)), 4);
    return payload_len + 16;
}

static size_t ref_frame(uint8_t *out, const uint8_t *payload, size_t payload_len)
{
    return ref_frame_len(out, payload_len, payload, payload_len);
}

/* Three records: empty, "hello", 300 patterned bytes. */
static uint8_t file_buf[1024];
static size_t rec_off[4]; /* rec_off[3] = file size */
static uint8_t big_payload[300];

static size_t build_file(void)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof(big_payload); i++)
        big_payload[i] = (uint8_t)(i * 7 + 1);
    rec_off[0] = n;
    n += ref_frame(file_buf + n, NULL, 0);
    rec_off[1] = n;
    n += ref_frame(file_buf + n, (const uint8_t *)"hello", 5);
    rec_off[2] = n;
    n += ref_frame(file_buf + n, big_payload, sizeof(big_payload));
    rec_off[3] = n;
    return n;
}

static void expect_record(dpp_tfrecord_iter_t *it, const void *want, size_t want_len)
{
    const uint8_t *p = NULL;
    size_t len = 12345;
    uint64_t off = 777;
    assert_int_equal(dpp_tfrecord_next(it, &p, &len, &off), 1);
    assert_int_equal(len, want_len);
    if (want_len)
        assert_memory_equal(p, want, want_len);
    assert_int_equal(off, 777); /* untouched on success */
}

static void expect_error(dpp_tfrecord_iter_t *it, int err, uint64_t want_off)
{
    const uint8_t *p;
    size_t len;
    uint64_t off = 0;
    assert_int_equal(dpp_tfrecord_next(it, &p, &len, &off), err);
    assert_int_equal(off, want_off);
}

static void expect_end(dpp_tfrecord_iter_t *it)
{
    const uint8_t *p;
    size_t len;
    uint64_t off;
    assert_int_equal(dpp_tfrecord_next(it, &p, &len, &off), 0);
}

static void test_good_file(void **state)
{
    dpp_tfrecord_iter_t it;
    size_t n = build_file();

    (void)state;
    dpp_tfrecord_iter_init(&it, file_buf, n, 0, MAX_REC);
    expect_record(&it, NULL, 0);
    expect_record(&it, "hello", 5);
    expect_record(&it, big_payload, sizeof(big_payload));
    expect_end(&it);
    expect_end(&it);
}

static void test_empty_buffer(void **state)
{
    dpp_tfrecord_iter_t it;

    (void)state;
    dpp_tfrecord_iter_init(&it, file_buf, 0, 4096, MAX_REC);
    expect_end(&it);
    dpp_tfrecord_iter_init(&it, NULL, 0, 0, MAX_REC);
    expect_end(&it);
}

static void test_frame_matches_reference(void **state)
{
    static uint8_t got[400], want[400], inplace[400];

    (void)state;
    build_file();
    size_t sizes[] = {0, 1, 5, 100, sizeof(big_payload)};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = sizes[i];
        size_t w = ref_frame(want, big_payload, len);
        assert_int_equal(dpp_tfrecord_frame(got, big_payload, len), w);
        assert_int_equal(w, len + DPP_TFRECORD_OVERHEAD);
        assert_memory_equal(got, want, w);
        /* Serialised straight into place. */
        memcpy(inplace + 12, big_payload, len);
        assert_int_equal(dpp_tfrecord_frame(inplace, inplace + 12, len), w);
        assert_memory_equal(inplace, want, w);
    }
    assert_int_equal(dpp_tfrecord_frame(got, NULL, 0), 16);
    assert_memory_equal(got, file_buf, 16);
}

/* Frames written by dpp_tfrecord_frame read back through the iterator. */
static void test_frame_round_trip(void **state)
{
    static uint8_t buf[1 << 16];
    size_t n = 0, count = 0;
    dpp_tfrecord_iter_t it;

    (void)state;
    build_file();
    for (size_t len = 0; len < sizeof(big_payload) && n + len + 16 <= sizeof(buf); len += 3) {
        n += dpp_tfrecord_frame(buf + n, big_payload, len);
        count++;
    }
    dpp_tfrecord_iter_init(&it, buf, n, 0, MAX_REC);
    for (size_t i = 0; i < count; i++)
        expect_record(&it, big_payload, 3 * i);
    expect_end(&it);
}

static void test_corrupt_length_crc(void **state)
{
    dpp_tfrecord_iter_t it;
    size_t n = build_file();

    (void)state;
    file_buf[rec_off[1] + 9] ^= 0x10;
    dpp_tfrecord_iter_init(&it, file_buf, n, 0, MAX_REC);
    expect_record(&it, NULL, 0);
    expect_error(&it, DPP_ECORRUPT, rec_off[1]);
    /* No boundary after a bad length can be trusted: the error sticks. */
    expect_error(&it, DPP_ECORRUPT, rec_off[1]);
    expect_error(&it, DPP_ECORRUPT, rec_off[1]);

    /* A flipped length byte fails the same check. */
    n = build_file();
    file_buf[rec_off[2] + 1] ^= 0x01;
    dpp_tfrecord_iter_init(&it, file_buf, n, 0, MAX_REC);
    expect_record(&it, NULL, 0);
    expect_record(&it, "hello", 5);
    expect_error(&it, DPP_ECORRUPT, rec_off[2]);
    expect_error(&it, DPP_ECORRUPT, rec_off[2]);
}

static void test_corrupt_payload_crc_is_skippable(void **state)
{
    dpp_tfrecord_iter_t it;
    size_t n;

    (void)state;
    /* The stored payload CRC is wrong. */
    n = build_file();
    file_buf[rec_off[2] - 2] ^= 0x80;
    dpp_tfrecord_iter_init(&it, file_buf, n, 0, MAX_REC);
    expect_record(&it, NULL, 0);
    expect_error(&it, DPP_ECORRUPT, rec_off[1]);
    expect_record(&it, big_payload, sizeof(big_payload));
    expect_end(&it);

    /* A payload byte is wrong. */
    n = build_file();
    file_buf[rec_off[1] + 12 + 2] ^= 0x04;
    dpp_tfrecord_iter_init(&it, file_buf, n, 0, MAX_REC);
    expect_record(&it, NULL, 0);
    expect_error(&it, DPP_ECORRUPT, rec_off[1]);
    expect_record(&it, big_payload, sizeof(big_payload));
    expect_end(&it);

    /* The empty record's CRC is wrong; the last record's payload too. */
    n = build_file();
    file_buf[rec_off[0] + 12] ^= 0xff;
    file_buf[rec_off[2] + 12 + 299] ^= 0x01;
    dpp_tfrecord_iter_init(&it, file_buf, n, 0, MAX_REC);
    expect_error(&it, DPP_ECORRUPT, rec_off[0]);
    expect_record(&it, "hello", 5);
    expect_error(&it, DPP_ECORRUPT, rec_off[2]);
    expect_end(&it);
}

static void test_truncated(void **state)
{
    dpp_tfrecord_iter_t it;
    size_t n = build_file();
    size_t last = rec_off[2];
    /* Inside the length, inside the length CRC, right after the header,
     * inside the payload, inside and just before the payload CRC. */
    size_t cuts[] = {1, 7, 8, 11, 12, 13, 12 + 150, 12 + 299, 12 + 300, 12 + 301, 12 + 303};

    (void)state;
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        dpp_tfrecord_iter_init(&it, file_buf, last + cuts[i], 0, MAX_REC);
        expect_record(&it, NULL, 0);
        expect_record(&it, "hello", 5);
        expect_error(&it, DPP_ETRUNCATED, last);
        expect_error(&it, DPP_ETRUNCATED, last);
    }
    /* Every cut of every record: never a record past the cut, never a crash. */
    for (size_t cut = 0; cut < n; cut++) {
        const uint8_t *p;
        size_t len;
        uint64_t off;
        int rc, records = 0;

        dpp_tfrecord_iter_init(&it, file_buf, cut, 0, MAX_REC);
        while ((rc = dpp_tfrecord_next(&it, &p, &len, &off)) == 1) {
            assert_true(p + len + 4 <= file_buf + cut);
            records++;
        }
        int whole = (cut >= rec_off[1]) + (cut >= rec_off[2]) + (cut >= rec_off[3]);
        assert_int_equal(records, whole);
        if (cut == rec_off[0] || cut == rec_off[1] || cut == rec_off[2]) {
            assert_int_equal(rc, 0);
        } else {
            assert_int_equal(rc, DPP_ETRUNCATED);
            assert_int_equal(off, rec_off[whole]);
        }
    }
}

static void test_too_big(void **state)
{
    uint8_t buf[64];
    dpp_tfrecord_iter_t it;

    (void)state;
    /* A valid header claiming 2^63 bytes, followed by only a few bytes: the
     * size limit is reported, not truncation, and nothing is read past it. */
    memset(buf, 0xab, sizeof(buf));
    put_le(buf, 1ull << 63, 8);
    put_le(buf + 8, ref_mask(ref_crc(buf, 8)), 4);
    dpp_tfrecord_iter_init(&it, buf, 20, 0, MAX_REC);
    expect_error(&it, DPP_ETOOBIG, 0);
    expect_error(&it, DPP_ETOOBIG, 0);
    dpp_tfrecord_iter_init(&it, buf, 12, 0, MAX_REC);
    expect_error(&it, DPP_ETOOBIG, 0);

    /* With no limit the same header is a truncated record, not a wrap. */
    dpp_tfrecord_iter_init(&it, buf, 20, 0, UINT64_MAX);
    expect_error(&it, DPP_ETRUNCATED, 0);
    put_le(buf, UINT64_MAX, 8);
    put_le(buf + 8, ref_mask(ref_crc(buf, 8)), 4);
    dpp_tfrecord_iter_init(&it, buf, sizeof(buf), 0, UINT64_MAX);
    expect_error(&it, DPP_ETRUNCATED, 0);
    put_le(buf, UINT64_MAX - 3, 8);
    put_le(buf + 8, ref_mask(ref_crc(buf, 8)), 4);
    dpp_tfrecord_iter_init(&it, buf, sizeof(buf), 0, UINT64_MAX);
    expect_error(&it, DPP_ETRUNCATED, 0);

    /* The limit is inclusive. */
    size_t n = ref_frame(buf, (const uint8_t *)"0123456789", 10);
    dpp_tfrecord_iter_init(&it, buf, n, 0, 10);
    expect_record(&it, "0123456789", 10);
    expect_end(&it);
    dpp_tfrecord_iter_init(&it, buf, n, 0, 9);
    expect_error(&it, DPP_ETOOBIG, 0);

    /* A bad length CRC is reported before the size check. */
    put_le(buf, 1ull << 63, 8);
    put_le(buf + 8, ref_mask(ref_crc(buf, 8)) ^ 1, 4);
    dpp_tfrecord_iter_init(&it, buf, 20, 0, MAX_REC);
    expect_error(&it, DPP_ECORRUPT, 0);
}

/* err_off is a file offset: base plus the bad record's place in the buffer. */
static void test_err_off_with_base(void **state)
{
    dpp_tfrecord_iter_t it;
    size_t n = build_file();
    const uint64_t base = 5ull << 32;

    (void)state;
    file_buf[rec_off[1] + 12] ^= 1;
    dpp_tfrecord_iter_init(&it, file_buf, n - 1, base, MAX_REC);
    expect_record(&it, NULL, 0);
    expect_error(&it, DPP_ECORRUPT, base + rec_off[1]);
    expect_error(&it, DPP_ETRUNCATED, base + rec_off[2]);
    expect_error(&it, DPP_ETRUNCATED, base + rec_off[2]);

    /* A buffer that starts mid-file at a record boundary. */
    n = build_file();
    dpp_tfrecord_iter_init(&it, file_buf + rec_off[1], n - rec_off[1] - 3, 1000, MAX_REC);
    expect_record(&it, "hello", 5);
    expect_error(&it, DPP_ETRUNCATED, 1000 + rec_off[2] - rec_off[1]);
}

static void test_length_field_mismatch(void **state)
{
    uint8_t buf[64];
    dpp_tfrecord_iter_t it;

    (void)state;
    /* The length says 6 but only 5 payload bytes and the CRC follow: the
     * payload CRC check fails (it covers the wrong bytes) or the buffer
     * ends; either way no garbage record comes out. */
    size_t n = ref_frame_len(buf, 6, (const uint8_t *)"hello", 5);
    dpp_tfrecord_iter_init(&it, buf, n, 0, MAX_REC);
    expect_error(&it, DPP_ETRUNCATED, 0);
    n = ref_frame_len(buf, 4, (const uint8_t *)"hello", 5);
    dpp_tfrecord_iter_init(&it, buf, n, 0, MAX_REC);
    expect_error(&it, DPP_ECORRUPT, 0);
    expect_error(&it, DPP_ETRUNCATED, 16 + 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_empty_buffer),
        cmocka_unit_test(test_frame_matches_reference),
        cmocka_unit_test(test_frame_round_trip),
        cmocka_unit_test(test_corrupt_length_crc),
        cmocka_unit_test(test_corrupt_payload_crc_is_skippable),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_err_off_with_base),
        cmocka_unit_test(test_length_field_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
