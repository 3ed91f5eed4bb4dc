/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C: published vectors, TFRecord masking, and the SSE4.2 path against
 * the table path and a bitwise reference on many lengths and alignments. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/crc32c.h"
#include "ref_tfrecord.h"

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_vectors(crc_fn fn)
{
    uint8_t buf[32];

    assert_int_equal(fn(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(fn(0, "", 0), 0);
    assert_int_equal(fn(0, NULL, 0), 0);
    /* RFC 3720 (iSCSI), appendix B.4. */
    memset(buf, 0, sizeof(buf));
    assert_int_equal(fn(0, buf, sizeof(buf)), 0x8a9136aau);
    memset(buf, 0xff, sizeof(buf));
    assert_int_equal(fn(0, buf, sizeof(buf)), 0x62a8ab43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(fn(0, buf, sizeof(buf)), 0x46dd794eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(fn(0, buf, sizeof(buf)), 0x113fdb5cu);
}

static void test_vectors_dispatch(void **state)
{
    (void)state;
    check_vectors(dpp_crc32c);
}

static void test_vectors_table(void **state)
{
    (void)state;
    check_vectors(dpp__crc32c_sw);
}

static void test_vectors_hw(void **state)
{
    (void)state;
    if (!dpp__crc32c_hw_available()) {
        print_message("no SSE4.2 on this CPU: hardware path not tested\n");
        skip();
    }
    check_vectors(dpp__crc32c_hw);
}

static void test_bitwise_reference(void **state)
{
    (void)state;
    assert_int_equal(ref_crc((const uint8_t *)"123456789", 9), 0xe3069283u);
}

static void test_mask(void **state)
{
    (void)state;
    /* record_writer.h: rotate right 15, add 0xa282ead8. */
    assert_int_equal(dpp_crc32c_mask(0), 0xa282ead8u);
    assert_int_equal(dpp_crc32c_mask(0x00008000u), 0xa282ead9u);
    assert_int_equal(dpp_crc32c_mask(0x00000001u), (uint32_t)(0x00020000u + 0xa282ead8u));
    rng_state = 1;
    for (int i = 0; i < 100000; i++) {
        uint32_t c = (uint32_t)rng();
        assert_int_equal(dpp_crc32c_unmask(dpp_crc32c_mask(c)), c);
        assert_int_equal(dpp_crc32c_mask(dpp_crc32c_unmask(c)), c);
    }
    assert_int_equal(dpp_crc32c_unmask(dpp_crc32c_mask(0xffffffffu)), 0xffffffffu);
}

static void test_incremental(void **state)
{
    uint8_t buf[1000];

    (void)state;
    rng_state = 2;
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)rng();
    uint32_t whole = dpp_crc32c(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
        assert_int_equal(dpp_crc32c(dpp_crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut), whole);
        assert_int_equal(dpp__crc32c_sw(dpp__crc32c_sw(0, buf, cut), buf + cut, sizeof(buf) - cut),
                         whole);
    }
}

/* Every length up to 800 (two of the hardware path's 384-byte units) at
 * every start alignment 0..15, plus some long
 * buffers: all implementations must agree with the bitwise reference. */
static void test_hw_equals_table(void **state)
{
    enum { MAXLEN = 4096 + 64 };
    static uint8_t buf[MAXLEN + 16];
    int hw = dpp__crc32c_hw_available();

    (void)state;
    if (!hw)
        print_message("no SSE4.2 on this CPU: comparing table path only\n");
    rng_state = 3;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (uint8_t)rng();
        for (size_t align = 0; align < 16; align++) {
            for (size_t len = 0; len <= 800; len++) {
                const uint8_t *p = buf + align;
                uint32_t want = ref_crc(p, len);
                assert_int_equal(dpp__crc32c_sw(0, p, len), want);
                if (hw)
                    assert_int_equal(dpp__crc32c_hw(0, p, len), want);
                assert_int_equal(dpp_crc32c(0, p, len), want);
            }
        }
        for (int k = 0; k < 50; k++) {
            size_t align = rng() % 16, len = rng() % MAXLEN;
            uint32_t seed = (uint32_t)rng();
            uint32_t want = dpp__crc32c_sw(seed, buf + align, len);
            if (hw)
                assert_int_equal(dpp__crc32c_hw(seed, buf + align, len), want);
            assert_int_equal(ref_crc(buf + align, len), dpp__crc32c_sw(0, buf + align, len));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitwise_reference),
        cmocka_unit_test(test_vectors_dispatch),
        cmocka_unit_test(test_vectors_table),
        cmocka_unit_test(test_vectors_hw),
        cmocka_unit_test(test_mask),
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_hw_equals_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
