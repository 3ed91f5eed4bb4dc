/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet's encodings (src/parquet/encoding.c) against independent
 * expectations: the byte sequences of Encodings.md's worked examples, and
 * round trips through reference encoders written here bit by bit (nothing
 * shared with the decoder), for every bit width and for counts that are not
 * multiples of 8. Malformed input: cut at every length, lying counts, widths
 * out of range, indices outside the dictionary. Last, the values of
 * parquet-testing's delta_binary_packed.parquet against its CSV. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dpp/error.h"
#include "parquet/encoding.h"

/* ---- reference encoders ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t low_bits(uint64_t v, unsigned w)
{
    return w >= 64 ? v : v & ((1ull << w) - 1);
}

static void put_uleb(uint8_t *dst, size_t *pos, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        dst[(*pos)++] = b | (v ? 0x80 : 0);
    } while (v);
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* Appends v's w low bits at bit *bit of dst, least significant first, one
 * bit at a time; dst must be zeroed. */
static void put_bits_lsb(uint8_t *dst, size_t *bit, uint64_t v, unsigned w)
{
    for (unsigned k = 0; k < w; k++, (*bit)++)
        if (v >> k & 1)
            dst[*bit / 8] |= (uint8_t)(1u << (*bit % 8));
}

/* The deprecated BIT_PACKED order: most significant bit first. */
static void put_bits_msb(uint8_t *dst, size_t *bit, uint64_t v, unsigned w)
{
    for (unsigned k = w; k-- > 0; (*bit)++)
        if (v >> k & 1)
            dst[*bit / 8] |= (uint8_t)(0x80u >> (*bit % 8));
}

/* The hybrid of v[0..n) at width w, runs chosen at random: RLE runs of a
 * repeated value (some of length 1) and bit-packed runs of 1..4 groups, the
 * last one padded with random bits. dst is zeroed and large enough. Returns
 * the length; *need is the fewest bytes a reader needs (the last bit-packed
 * run's padding values may be left out). */
static size_t ref_hybrid(uint8_t *dst, const uint32_t *v, size_t n, unsigned w, uint64_t *rng,
                         size_t *need)
{
    size_t pos = 0, i = 0;
    *need = 0;
    while (i < n) {
        size_t same = 1;
        while (i + same < n && v[i + same] == v[i])
            same++;
        if (rng_next(rng) % 3 == 0 || same >= 8) {
            size_t run = 1 + rng_next(rng) % same;
            put_uleb(dst, &pos, (uint64_t)run << 1);
            for (unsigned k = 0; k < (w + 7) / 8; k++)
                dst[pos++] = (uint8_t)(v[i] >> (8 * k));
            i += run;
            *need = pos;
            continue;
        }
        size_t groups = 1 + rng_next(rng) % 4, left = (n - i + 7) / 8;
        groups = groups < left ? groups : left;
        put_uleb(dst, &pos, groups << 1 | 1);
        size_t bit = pos * 8;
        for (size_t k = 0; k < groups * 8; k++) {
            uint64_t x = i + k < n ? v[i + k] : low_bits(rng_next(rng), w);
            put_bits_lsb(dst, &bit, x, w);
            if (i + k + 1 == n)
                *need = (bit + 7) / 8;
        }
        pos += groups * w;
        i += groups * 8 < n - i ? groups * 8 : n - i;
        if (i < n)
            *need = pos;
    }
    return pos;
}

/* DELTA_BINARY_PACKED of v[0..n) (64-bit values; for INT32, is32: taken
 * mod 2^32), straight from the spec's three steps. Unused miniblocks of the
 * last block get width byte `junk` and padding values random bits. */
static size_t ref_dbp(uint8_t *dst, const uint64_t *v, size_t n, unsigned block, unsigned nmini,
                      int is32, uint8_t junk, uint64_t *rng)
{
    size_t pos = 0, vpm = block / nmini;
    put_uleb(dst, &pos, block);
    put_uleb(dst, &pos, nmini);
    put_uleb(dst, &pos, n);
    put_uleb(dst, &pos, zigzag(is32 ? (int32_t)(uint32_t)v[0] : (int64_t)v[0]));
    for (size_t i = 1; i < n; i += block) {
        size_t cnt = n - i < block ? n - i : block;
        int64_t *d = calloc(block, sizeof *d);
        assert_non_null(d);
        int64_t min = 0;
        for (size_t j = 0; j < cnt; j++) {
            uint64_t delta = v[i + j] - v[i + j - 1];
            d[j] = is32 ? (int32_t)(uint32_t)delta : (int64_t)delta;
            if (j == 0 || d[j] < min)
                min = d[j];
        }
        put_uleb(dst, &pos, zigzag(min));
        size_t widths = pos;
        pos += nmini;
        for (size_t m = 0; m < nmini; m++) {
            if (m * vpm >= cnt) {
                dst[widths + m] = junk;
                continue;
            }
            unsigned w = 0;
            for (size_t j = m * vpm; j < (m + 1) * vpm && j < cnt; j++) {
                uint64_t rel = (uint64_t)d[j] - (uint64_t)min;
                if (is32)
                    rel = (uint32_t)rel;
                while (w < 64 && rel >> w)
                    w++;
            }
            dst[widths + m] = (uint8_t)w;
            size_t bit = pos * 8;
            for (size_t j = m * vpm; j < (m + 1) * vpm; j++) {
                uint64_t rel = j < cnt ? (uint64_t)d[j] - (uint64_t)min : rng_next(rng);
                put_bits_lsb(dst, &bit, low_bits(rel, w), w);
            }
            pos += vpm * w / 8;
        }
        free(d);
    }
    return pos;
}

/* Values for DELTA_BINARY_PACKED whose miniblocks of vpm need width w
 * exactly: deltas spread over [-2^(w-1), 2^(w-1)) with both ends in each
 * miniblock. */
static void dbp_values(uint64_t *v, size_t n, unsigned w, unsigned bits, size_t vpm, uint64_t *rng)
{
    v[0] = rng_next(rng);
    for (size_t i = 1; i < n; i++) {
        size_t j = (i - 1) % vpm;
        uint64_t rel = j == 0 ? 0 : j == 1 ? low_bits(UINT64_MAX, w) : low_bits(rng_next(rng), w);
        uint64_t delta = w == 0 ? 7 : rel - (1ull << (w - 1));
        v[i] = v[i - 1] + delta;
        if (bits == 32)
            v[i] = (uint32_t)v[i];
    }
    if (bits == 32)
        v[0] = (uint32_t)v[0];
}

/* ---- the RLE/bit-packed hybrid ---- */

static void test_hybrid_spec_examples(void **state)
{
    (void)state;
    char err[160];
    uint32_t idx[8];
    /* Encodings.md: 0..7 at width 3 bit-packed LSB first is 88 c6 fa. */
    static const uint8_t packed[] = {3, 0x03, 0x88, 0xc6, 0xfa};
    assert_int_equal(dpp_pq_indices_decode(packed, sizeof packed, idx, 8, 8, err, sizeof err), 0);
    for (uint32_t i = 0; i < 8; i++)
        assert_int_equal(idx[i], i);
    int16_t lv[10];
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 7, packed + 1, 4, lv, 8, err, sizeof err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(lv[i], i);
    /* The deprecated BIT_PACKED order of the same values: 05 39 77. */
    static const uint8_t msb[] = {0x05, 0x39, 0x77};
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_BIT_PACKED, 7, msb, 3, lv, 8, err, sizeof err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(lv[i], i);
    /* RLE runs: 10 x 5 at width 3 (one value byte), then 2 x 0x1abc at
     * width 13 (two little-endian value bytes). */
    static const uint8_t rle[] = {0x14, 0x05};
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 5, rle, 2, lv, 10, err, sizeof err), 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(lv[i], 5);
    static const uint8_t wide[] = {13, 0x04, 0xbc, 0x1a, 0x02, 0x07, 0x00};
    assert_int_equal(dpp_pq_indices_decode(wide, sizeof wide, idx, 3, 8000, err, sizeof err), 0);
    assert_int_equal(idx[0], 0x1abc);
    assert_int_equal(idx[1], 0x1abc);
    assert_int_equal(idx[2], 7);
    /* Width 0: runs without value bytes. */
    static const uint8_t zero[] = {0, 0x0a, 0x03};
    assert_int_equal(dpp_pq_indices_decode(zero, sizeof zero, idx, 8, 1, err, sizeof err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(idx[i], 0);
}

/* Every width 0..32 and counts around the group size, as indices (with
 * the one byte of width in front) and, up to width 15, as levels. */
static void test_hybrid_roundtrip(void **state)
{
    (void)state;
    static const size_t counts[] = {1, 2, 7, 8, 9, 15, 16, 17, 63, 100, 1001, 4099};
    uint64_t rng = 1;
    char err[160];
    for (unsigned w = 0; w <= 32; w++) {
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            size_t n = counts[c];
            uint32_t *v = malloc(n * sizeof *v), *got = malloc(n * sizeof *got);
            int16_t *lv = malloc(n * sizeof *lv);
            uint8_t *buf = calloc(1, 64 + n * 8);
            assert_true(v && got && lv && buf);
            /* the largest dictionary holds 2^32 - 1 entries: no index UINT32_MAX */
            uint32_t dict = w == 32 ? UINT32_MAX : 1u << w;
            for (size_t i = 0; i < n; i++) {
                /* runs of repeats now and then, so both kinds of run occur */
                v[i] = i > 0 && rng_next(&rng) % 4 == 0 ? v[i - 1]
                                                        : (uint32_t)low_bits(rng_next(&rng), w);
                if (v[i] == UINT32_MAX)
                    v[i] = 0;
            }
            size_t need;
            buf[0] = (uint8_t)w;
            size_t len = 1 + ref_hybrid(buf + 1, v, n, w, &rng, &need);
            need += 1;
            int rc = dpp_pq_indices_decode(buf, len, got, n, dict, err, sizeof err);
            if (rc != 0)
                fail_msg("width %u, n %zu: %s", w, n, err);
            assert_memory_equal(got, v, n * sizeof *v);
            /* Cut short: the padding values of the last run may go, nothing else. */
            assert_int_equal(dpp_pq_indices_decode(buf, need, got, n, dict, err, sizeof err), 0);
            assert_memory_equal(got, v, n * sizeof *v);
            size_t step = need > 300 ? need / 97 + 1 : 1;
            for (size_t cut = 0; cut < need; cut += step)
                if (dpp_pq_indices_decode(buf, cut, got, n, dict, err, sizeof err) != DPP_ECORRUPT)
                    fail_msg("width %u, n %zu: cut at %zu of %zu accepted", w, n, cut, need);
            if (w >= 1 && w <= 15) {
                int max = (1 << w) - 1;
                rc =
                    dpp_pq_levels_decode(DPP_PQ_RLE, max, buf + 1, len - 1, lv, n, err, sizeof err);
                if (rc != 0)
                    fail_msg("levels width %u, n %zu: %s", w, n, err);
                for (size_t i = 0; i < n; i++)
                    assert_int_equal(lv[i], v[i]);
            }
            free(v);
            free(got);
            free(lv);
            free(buf);
        }
    }
}

/* BIT_PACKED levels for every level width and odd counts. */
static void test_bit_packed_levels(void **state)
{
    (void)state;
    uint64_t rng = 2;
    char err[160];
    for (unsigned w = 1; w <= 15; w++) {
        for (size_t n = 1; n < 70; n += 3) {
            int16_t v[70], got[70];
            uint8_t buf[160] = {0};
            size_t bit = 0;
            for (size_t i = 0; i < n; i++) {
                v[i] = (int16_t)low_bits(rng_next(&rng), w);
                put_bits_msb(buf, &bit, (uint64_t)v[i], w);
            }
            size_t len = (bit + 7) / 8;
            int max = (1 << w) - 1;
            assert_int_equal(
                dpp_pq_levels_decode(DPP_PQ_BIT_PACKED, max, buf, len, got, n, err, sizeof err), 0);
            assert_memory_equal(got, v, n * sizeof *v);
            assert_int_equal(
                dpp_pq_levels_decode(DPP_PQ_BIT_PACKED, max, buf, len - 1, got, n, err, sizeof err),
                DPP_ECORRUPT);
        }
    }
    /* max level 5 needs 3 bits; 6 and 7 fit them but are out of range. */
    static const uint8_t six[] = {0xc0}; /* 110 00000 */
    int16_t lv[2];
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_BIT_PACKED, 5, six, 1, lv, 2, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "level 6 at byte 0"));
}

static void test_levels_errors(void **state)
{
    (void)state;
    char err[160];
    int16_t lv[16];
    /* max level 0: zeros, no bytes read */
    memset(lv, 0x55, sizeof lv);
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 0, NULL, 0, lv, 16, err, sizeof err), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(lv[i], 0);
    static const uint8_t rle[] = {0x08, 0x01};
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_PLAIN, 1, rle, 2, lv, 4, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "PLAIN"));
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, -1, rle, 2, lv, 4, err, sizeof err),
                     DPP_ECORRUPT);
    /* 5 in a run, max level 4 (width 3) */
    static const uint8_t five[] = {0x08, 0x05};
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 4, five, 2, lv, 4, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "level 5 at byte 1 (at most 4)"));
    /* and bit-packed: 0..7 at width 3 with max level 6 */
    static const uint8_t packed[] = {0x03, 0x88, 0xc6, 0xfa};
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 6, packed, 4, lv, 8, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "level 7 at byte 3"));
    /* a run longer than the levels asked for: the levels asked for */
    lv[3] = 9;
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 1, rle, 2, lv, 3, err, sizeof err), 0);
    assert_int_equal(lv[2], 1);
    assert_int_equal(lv[3], 9);
    /* runs that end before the levels do */
    assert_int_equal(dpp_pq_levels_decode(DPP_PQ_RLE, 1, rle, 2, lv, 5, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "after 4 of 5"));
}

static void test_indices_errors(void **state)
{
    (void)state;
    char err[160];
    uint32_t idx[16];
    assert_int_equal(dpp_pq_indices_decode(NULL, 0, idx, 0, 5, err, sizeof err), 0);
    assert_int_equal(dpp_pq_indices_decode(NULL, 0, idx, 1, 5, err, sizeof err), DPP_ECORRUPT);
    static const uint8_t w33[] = {33, 0x02, 0, 0, 0, 0, 0};
    assert_int_equal(dpp_pq_indices_decode(w33, sizeof w33, idx, 1, 5, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "bit width 33"));
    static const uint8_t run5[] = {3, 0x08, 0x05};
    assert_int_equal(dpp_pq_indices_decode(run5, sizeof run5, idx, 4, 5, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "index 5 at byte 2 (at most 4)"));
    assert_int_equal(dpp_pq_indices_decode(run5, sizeof run5, idx, 4, 6, err, sizeof err), 0);
    assert_int_equal(dpp_pq_indices_decode(run5, sizeof run5, idx, 4, 0, err, sizeof err),
                     DPP_ECORRUPT);
    /* bit-packed 0..7: index 7 is the 8th value, bits 21..23, byte 4 */
    static const uint8_t packed[] = {3, 0x03, 0x88, 0xc6, 0xfa};
    assert_int_equal(dpp_pq_indices_decode(packed, sizeof packed, idx, 8, 7, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "index 7 at byte 4 (at most 6)"));
    /* width 5, 11 values of which the last (in no block of 8) is too big;
     * width 32, whose values pass 2^31 */
    uint8_t w5[16] = {5, 0x05};
    size_t bit = 16;
    for (uint64_t i = 0; i < 11; i++)
        put_bits_lsb(w5, &bit, i == 10 ? 31 : i, 5);
    assert_int_equal(dpp_pq_indices_decode(w5, sizeof w5, idx, 11, 30, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "index 31 at byte 8 (at most 29)"));
    assert_int_equal(dpp_pq_indices_decode(w5, sizeof w5, idx, 11, 32, err, sizeof err), 0);
    assert_int_equal(idx[10], 31);
    uint8_t w32[2 + 32] = {32, 0x03};
    bit = 16;
    for (uint64_t i = 0; i < 8; i++)
        put_bits_lsb(w32, &bit, i == 7 ? 0xfffffff0u : i << 28, 32);
    assert_int_equal(dpp_pq_indices_decode(w32, sizeof w32, idx, 8, 0xfffffff0u, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "index 4294967280 at byte 30 (at most 4294967279)"));
    assert_int_equal(dpp_pq_indices_decode(w32, sizeof w32, idx, 8, 0xfffffff1u, err, sizeof err),
                     0);
    assert_int_equal(idx[6], 6u << 28);
    /* a value that does not fit the width */
    static const uint8_t nine[] = {3, 0x02, 0x09};
    assert_int_equal(dpp_pq_indices_decode(nine, sizeof nine, idx, 1, 100, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "does not fit 3 bits"));
    /* runs longer than asked for (writers pad the last one): RLE, and
     * bit-packed by a whole group; only the values asked for are taken */
    assert_int_equal(dpp_pq_indices_decode(run5, sizeof run5, idx, 3, 6, err, sizeof err), 0);
    static const uint8_t two_groups[] = {1, 0x05, 0xff, 0xff};
    assert_int_equal(
        dpp_pq_indices_decode(two_groups, sizeof two_groups, idx, 9, 2, err, sizeof err), 0);
    idx[8] = 7;
    assert_int_equal(
        dpp_pq_indices_decode(two_groups, sizeof two_groups, idx, 8, 2, err, sizeof err), 0);
    assert_int_equal(idx[7], 1);
    assert_int_equal(idx[8], 7);
    /* empty runs are passed over; a header cut off, a value cut off */
    static const uint8_t empty_rle[] = {1, 0x00, 0x01, 0x02, 0x01};
    idx[0] = 0;
    assert_int_equal(dpp_pq_indices_decode(empty_rle, sizeof empty_rle, idx, 1, 2, err, sizeof err),
                     0);
    assert_int_equal(idx[0], 1);
    static const uint8_t empty_packed[] = {1, 0x01, 0x02, 0x01};
    idx[0] = 0;
    assert_int_equal(
        dpp_pq_indices_decode(empty_packed, sizeof empty_packed, idx, 1, 2, err, sizeof err), 0);
    assert_int_equal(idx[0], 1);
    static const uint8_t cut_header[] = {1, 0x80};
    assert_int_equal(
        dpp_pq_indices_decode(cut_header, sizeof cut_header, idx, 1, 2, err, sizeof err),
        DPP_ECORRUPT);
    static const uint8_t long_header[] = {1,    0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(
        dpp_pq_indices_decode(long_header, sizeof long_header, idx, 1, 2, err, sizeof err),
        DPP_ECORRUPT);
    static const uint8_t cut_value[] = {16, 0x02, 0x01};
    assert_int_equal(dpp_pq_indices_decode(cut_value, sizeof cut_value, idx, 1, 2, err, sizeof err),
                     DPP_ECORRUPT);
    /* a tiny err buffer only truncates the message */
    char tiny[5];
    assert_int_equal(
        dpp_pq_indices_decode(cut_value, sizeof cut_value, idx, 1, 2, tiny, sizeof tiny),
        DPP_ECORRUPT);
    assert_int_equal(strlen(tiny), 4);
    assert_int_equal(dpp_pq_indices_decode(cut_value, sizeof cut_value, idx, 1, 2, NULL, 0),
                     DPP_ECORRUPT);
}

/* ---- DELTA_BINARY_PACKED ---- */

/* Encodings.md's examples use blocks of 8 values "to keep the examples
 * short, but in real cases it would be invalid"; here they are the same
 * blocks at 128 values, one miniblock, padded to 128 values. */
static void test_dbp_spec_examples(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    /* 1, 2, 3, 4, 5: min delta 1, width 0, no data */
    static const uint8_t ex1[] = {0x80, 0x01, 0x01, 0x05, 0x02, 0x02, 0x00, 0xee};
    int64_t v64[8];
    int32_t v32[8];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, ex1,
                                          sizeof ex1, v64, 5, NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(used, 7);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v64[i], i + 1);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT32, 0, ex1, 7, v32,
                                          5, NULL, &used, err, sizeof err),
                     0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v32[i], i + 1);
    /* 7, 5, 3, 1, 2, 3, 4, 5: min delta -2, width 2, 0,0,0,3,3,3,3 */
    uint8_t ex2[5 + 2 + 32] = {0x80, 0x01, 0x01, 0x08, 0x0e, 0x03, 0x02, 0xc0, 0x3f};
    static const int expect2[] = {7, 5, 3, 1, 2, 3, 4, 5};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT32, 0, ex2,
                                          sizeof ex2, v32, 8, NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(used, sizeof ex2);
    for (int i = 0; i < 8; i++)
        assert_int_equal(v32[i], expect2[i]);
    /* the miniblock is padded to its 128 values */
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, ex2,
                                          sizeof ex2 - 1, v64, 8, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    /* blocks of 8 as printed in the spec are refused */
    static const uint8_t eight[] = {0x08, 0x01, 0x05, 0x02, 0x02, 0x00};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, eight,
                                          sizeof eight, v64, 5, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "block size 8"));
    /* one value: the header alone */
    static const uint8_t one[] = {0x80, 0x01, 0x04, 0x01, 0x03};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, one,
                                          sizeof one, v64, 1, NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(used, sizeof one);
    assert_int_equal(v64[0], -2);
}

/* Every width of both types, blocks of several shapes, last blocks with
 * unused miniblocks whose width bytes are junk, cut at every length. */
static void test_dbp_roundtrip(void **state)
{
    (void)state;
    static const struct {
        unsigned block, nmini;
    } shapes[] = {{128, 4}, {128, 1}, {256, 8}, {512, 4}};
    static const size_t counts[] = {2, 3, 33, 129, 130, 700, 3000};
    uint64_t rng = 3;
    char err[160];
    size_t max_n = 3000, cap = 64 + max_n * 10;
    uint64_t *v = malloc(max_n * sizeof *v);
    int64_t *got64 = malloc(max_n * sizeof *got64);
    int32_t *got32 = malloc(max_n * sizeof *got32);
    uint8_t *buf = malloc(cap);
    assert_true(v && got64 && got32 && buf);
    for (unsigned bits = 32; bits <= 64; bits += 32) {
        dpp_pq_type_t type = bits == 32 ? DPP_PQ_INT32 : DPP_PQ_INT64;
        for (unsigned w = 0; w <= bits; w++) {
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                size_t n = counts[(w + s) % (sizeof counts / sizeof *counts)];
                size_t vpm = shapes[s].block / shapes[s].nmini;
                dbp_values(v, n, w, bits, vpm, &rng);
                memset(buf, 0, cap);
                size_t len = ref_dbp(buf, v, n, shapes[s].block, shapes[s].nmini, bits == 32,
                                     (uint8_t)(0xff - w), &rng);
                assert_true(len + 8 <= cap);
                size_t used = 0;
                void *out = bits == 32 ? (void *)got32 : (void *)got64;
                /* trailing bytes are the next section's, not ours */
                int rc = dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, type, 0, buf, len + 8,
                                              out, n, NULL, &used, err, sizeof err);
                if (rc != 0)
                    fail_msg("INT%u width %u block %u/%u n %zu: %s", bits, w, shapes[s].block,
                             shapes[s].nmini, n, err);
                assert_int_equal(used, len);
                for (size_t i = 0; i < n; i++) {
                    uint64_t g = bits == 32 ? (uint32_t)got32[i] : (uint64_t)got64[i];
                    if (g != v[i])
                        fail_msg("INT%u width %u n %zu: value %zu is %llx, not %llx", bits, w, n, i,
                                 (unsigned long long)g, (unsigned long long)v[i]);
                }
                size_t step = len > 400 ? len / 131 + 1 : 1;
                for (size_t cut = 0; cut < len; cut += step)
                    if (dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, type, 0, buf, cut, out, n,
                                             NULL, &used, err, sizeof err) != DPP_ECORRUPT)
                        fail_msg("INT%u width %u n %zu: cut at %zu of %zu accepted", bits, w, n,
                                 cut, len);
                /* the header's count must be the count asked for */
                assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, type, 0, buf, len,
                                                      out, n - 1, NULL, &used, err, sizeof err),
                                 DPP_ECORRUPT);
                assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, type, 0, buf, len,
                                                      out, n + 1, NULL, &used, err, sizeof err),
                                 DPP_ECORRUPT);
            }
        }
    }
    free(v);
    free(got64);
    free(got32);
    free(buf);
}

static void test_dbp_errors(void **state)
{
    (void)state;
    char err[160];
    int64_t v64[200];
    int32_t v32[200];
    size_t used;
    /* width 70 in the first miniblock (byte 6) */
    uint8_t w70[64] = {0x80, 0x01, 0x04, 0x05, 0x00, 0x00, 70, 0, 0, 0};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, w70,
                                          sizeof w70, v64, 5, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_string_equal(err, "DELTA_BINARY_PACKED: miniblock bit width 70 at byte 6 (at most 64)");
    /* width 33 is fine for INT64, and for INT32 too (a delta between two
     * int32 values takes 33 bits; DuckDB writes them so): the sums wrap
     * modulo 2^32, so INT32 gets the INT64 result's low 32 bits */
    uint8_t w33[16 + 32 * 33 / 8] = {0x80, 0x01, 0x04, 0x05, 0x00, 0x00, 33, 0, 0, 0};
    for (size_t i = 10; i < sizeof w33; i++)
        w33[i] = (uint8_t)(i * 37 + 11);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, w33,
                                          sizeof w33, v64, 5, NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT32, 0, w33,
                                          sizeof w33, v32, 5, NULL, &used, err, sizeof err),
                     0);
    for (int i = 0; i < 5; i++)
        assert_int_equal((uint32_t)v32[i], (uint32_t)(uint64_t)v64[i]);
    /* block shapes: not a multiple of 128; miniblocks that do not divide it
     * or hold other than a multiple of 32 values; no miniblocks */
    static const uint8_t shapes[][4] = {{0xc0, 0x01, 0x04, 0x05},
                                        {0x80, 0x01, 0x03, 0x05},
                                        {0x80, 0x01, 0x08, 0x05},
                                        {0x80, 0x01, 0x00, 0x05},
                                        {0x00, 0x01, 0x05, 0x00}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        uint8_t b[64] = {0};
        memcpy(b, shapes[i], 4);
        assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, b,
                                              sizeof b, v64, 5, NULL, &used, err, sizeof err),
                         DPP_ECORRUPT);
    }
    /* a block size past 32 bits, a varint past 64 */
    static const uint8_t huge[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x04,
                                   0x05, 0x00, 0x00, 0,    0,    0,    0};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, huge,
                                          sizeof huge, v64, 5, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    static const uint8_t long_first[] = {0x80, 0x01, 0x04, 0x01, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, long_first,
                                          sizeof long_first, v64, 1, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    /* a last block whose unused miniblocks have junk widths and no data */
    uint8_t junk[10 + 32] = {0x80, 0x01, 0x04, 0x21, 0x00, 0x02, 0x08, 0xff, 0xfe, 0xfd};
    for (int i = 0; i < 32; i++)
        junk[10 + i] = (uint8_t)i;
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT32, 0, junk,
                                          10 + 32, v32, 33, NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(used, 10 + 32);
    int32_t expect = 0;
    for (int i = 0; i < 32; i++) {
        expect += 1 + i;
        assert_int_equal(v32[i + 1], expect);
    }
    /* wrapping: INT64_MAX then + 1 (zigzag of delta 1 is 2), INT32 alike */
    static const uint8_t wrap64[] = {0x80, 0x01, 0x04, 0x02, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0x01, 0x02, 0,    0,    0,    0};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT64, 0, wrap64,
                                          sizeof wrap64, v64, 2, NULL, &used, err, sizeof err),
                     0);
    assert_true(v64[0] == INT64_MAX && v64[1] == INT64_MIN);
    static const uint8_t wrap32[] = {0x80, 0x01, 0x04, 0x02, 0xfe, 0xff, 0xff,
                                     0xff, 0x0f, 0x02, 0,    0,    0,    0};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_INT32, 0, wrap32,
                                          sizeof wrap32, v32, 2, NULL, &used, err, sizeof err),
                     0);
    assert_true(v32[0] == INT32_MAX && v32[1] == INT32_MIN);
}

/* ---- PLAIN, RLE booleans, BYTE_STREAM_SPLIT ---- */

static void expect_cuts_refused(dpp_pq_encoding_t enc, dpp_pq_type_t type, int32_t tl,
                                const uint8_t *buf, size_t len, void *out, size_t n)
{
    dpp_pq_scratch_t scratch = {0};
    char err[160];
    size_t used;
    for (size_t cut = 0; cut < len; cut++)
        if (dpp_pq_values_decode(enc, type, tl, buf, cut, out, n, &scratch, &used, err,
                                 sizeof err) != DPP_ECORRUPT)
            fail_msg("%s of type %d cut at %zu of %zu accepted", dpp_pq_encoding_name(enc),
                     (int)type, cut, len);
    dpp_pq_scratch_free(&scratch);
}

static void test_plain(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    /* BOOLEAN: LSB first; 11 values in 2 bytes */
    static const uint8_t bools[] = {0x05, 0x06, 0xaa};
    uint8_t b[11];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_BOOLEAN, 0, bools, sizeof bools, b,
                                          11, NULL, &used, err, sizeof err),
                     0);
    static const uint8_t bexp[] = {1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1};
    assert_memory_equal(b, bexp, 11);
    assert_int_equal(used, 2);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_BOOLEAN, 0, bools, 2, b, 11);
    /* fixed widths */
    static const uint8_t i32[] = {0x01, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0x78, 0x56, 0x34, 0x12};
    int32_t v32[3];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_INT32, 0, i32, sizeof i32, v32, 3,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(v32[0], 1);
    assert_int_equal(v32[1], -2);
    assert_int_equal(v32[2], 0x12345678);
    assert_int_equal(used, 12);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_INT32, 0, i32, 12, v32, 3);
    static const uint8_t i64[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    int64_t v64[3];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_INT64, 0, i64, sizeof i64, v64, 1,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_true(v64[0] == INT64_MAX);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_INT64, 0, i64, 8, v64, 1);
    static const uint8_t f32[] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x20, 0xc1}; /* 1.5, -10 */
    float vf[2];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_FLOAT, 0, f32, sizeof f32, vf, 2,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_true(vf[0] == 1.5f && vf[1] == -10.0f);
    static const uint8_t f64[] = {0, 0, 0, 0, 0, 0, 0xf8, 0x3f}; /* 1.5 */
    double vd[1];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_DOUBLE, 0, f64, sizeof f64, vd, 1,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_true(vd[0] == 1.5);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_DOUBLE, 0, f64, 8, vd, 1);
    /* BYTE_ARRAY: "ab", "", "xyz"; the trailing byte is not ours */
    static const uint8_t ba[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 3, 0, 0, 0, 'x', 'y', 'z', 9};
    dpp_pq_bytes_t s[3];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_BYTE_ARRAY, 0, ba, sizeof ba, s, 3,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(used, sizeof ba - 1);
    assert_true(s[0].len == 2 && memcmp(s[0].ptr, "ab", 2) == 0);
    assert_true(s[1].len == 0);
    assert_true(s[2].len == 3 && memcmp(s[2].ptr, "xyz", 3) == 0 && s[2].ptr == ba + 14);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_BYTE_ARRAY, 0, ba, sizeof ba - 1, s, 3);
    static const uint8_t lying[] = {0xff, 0xff, 0xff, 0xff, 'a'};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_BYTE_ARRAY, 0, lying, sizeof lying,
                                          s, 1, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    /* FIXED_LEN_BYTE_ARRAY(3) */
    static const uint8_t flba[] = {'a', 'b', 'c', 'd', 'e', 'f'};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_FIXED_LEN_BYTE_ARRAY, 3, flba,
                                          sizeof flba, s, 2, NULL, &used, err, sizeof err),
                     0);
    assert_true(s[1].len == 3 && s[1].ptr == flba + 3);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_FIXED_LEN_BYTE_ARRAY, 3, flba, 6, s, 2);
    /* n = 0 reads nothing */
    used = 99;
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_INT64, 0, NULL, 0, v64, 0, NULL,
                                          &used, err, sizeof err),
                     0);
    assert_int_equal(used, 0);
}

static void put_int96(uint8_t *p, uint64_t nanos, uint32_t day)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(nanos >> (8 * i));
    for (int i = 0; i < 4; i++)
        p[8 + i] = (uint8_t)(day >> (8 * i));
}

static void test_plain_int96(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    uint8_t b[12 * 5];
    /* the epoch; a day and a nanosecond later; a day before; the last
     * nanosecond an int64 holds (106751 days and 85636854775807 ns) */
    put_int96(b, 0, 2440588);
    put_int96(b + 12, 1, 2440589);
    put_int96(b + 24, 3600000000000ull, 2440587);
    put_int96(b + 36, 85636854775807ull, 2440588 + 106751);
    put_int96(b + 48, 0, 2440588 - 106751);
    int64_t v[5];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_INT96, 0, b, sizeof b, v, 5, NULL,
                                          &used, err, sizeof err),
                     0);
    assert_int_equal(used, 60);
    assert_true(v[0] == 0);
    assert_true(v[1] == 86400000000000ll + 1);
    assert_true(v[2] == -86400000000000ll + 3600000000000ll);
    assert_true(v[3] == INT64_MAX);
    assert_true(v[4] == -106751ll * 86400000000000ll);
    expect_cuts_refused(DPP_PQ_PLAIN, DPP_PQ_INT96, 0, b, 60, v, 5);
    /* one nanosecond more; Julian day 0 */
    put_int96(b + 36, 85636854775808ull, 2440588 + 106751);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_INT96, 0, b, sizeof b, v, 5, NULL,
                                          &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "value 3 at byte 36"));
    put_int96(b, 0, 0);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_INT96, 0, b, 12, v, 1, NULL, &used,
                                          err, sizeof err),
                     DPP_ECORRUPT);
}

static void test_rle_boolean(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    uint8_t v[20];
    /* length 4: 5 x true, then one group 0b01010101 bit-packed, then a byte
     * not ours */
    static const uint8_t buf[] = {4, 0, 0, 0, 0x0a, 0x01, 0x03, 0x55, 0x77};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_RLE, DPP_PQ_BOOLEAN, 0, buf, sizeof buf, v, 13,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_int_equal(used, 8);
    static const uint8_t expect[] = {1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0};
    assert_memory_equal(v, expect, 13);
    expect_cuts_refused(DPP_PQ_RLE, DPP_PQ_BOOLEAN, 0, buf, 8, v, 13);
    /* the length is the hybrid's bound: 3 bytes leave the group out */
    uint8_t short_len[sizeof buf];
    memcpy(short_len, buf, sizeof buf);
    short_len[0] = 3;
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_RLE, DPP_PQ_BOOLEAN, 0, short_len,
                                          sizeof short_len, v, 13, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    /* a run value of 2 is no boolean */
    static const uint8_t two[] = {2, 0, 0, 0, 0x02, 0x02};
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_RLE, DPP_PQ_BOOLEAN, 0, two, sizeof two, v, 1,
                                          NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    /* many values through the chunked conversion */
    uint8_t big[4 + 2 + 1000];
    uint8_t want[8000], got[8000];
    uint64_t rng = 9;
    size_t pos = 4, bit;
    memset(big, 0, sizeof big);
    put_uleb(big, &pos, 1000 << 1 | 1);
    bit = pos * 8;
    for (size_t i = 0; i < 8000; i++) {
        want[i] = rng_next(&rng) & 1;
        put_bits_lsb(big, &bit, want[i], 1);
    }
    size_t l = bit / 8 - 4;
    big[0] = (uint8_t)l;
    big[1] = (uint8_t)(l >> 8);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_RLE, DPP_PQ_BOOLEAN, 0, big, 4 + l, got, 8000,
                                          NULL, &used, err, sizeof err),
                     0);
    assert_memory_equal(got, want, 8000);
}

static void test_byte_stream_split(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    dpp_pq_scratch_t scratch = {0};
    /* Encodings.md's example: three floats AABBCCDD 00112233 A3B4C5D6 */
    static const uint8_t split[] = {0xaa, 0x00, 0xa3, 0xbb, 0x11, 0xb4,
                                    0xcc, 0x22, 0xc5, 0xdd, 0x33, 0xd6};
    static const uint8_t whole[] = {0xaa, 0xbb, 0xcc, 0xdd, 0x00, 0x11,
                                    0x22, 0x33, 0xa3, 0xb4, 0xc5, 0xd6};
    float f[3];
    int32_t i32[3];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_FLOAT, 0, split,
                                          sizeof split, f, 3, NULL, &used, err, sizeof err),
                     0);
    assert_memory_equal(f, whole, 12);
    assert_int_equal(used, 12);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_INT32, 0, split,
                                          sizeof split, i32, 3, NULL, &used, err, sizeof err),
                     0);
    assert_memory_equal(i32, whole, 12);
    /* the page is exactly the streams: 12 bytes are not 2 floats, 11 not 3 */
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_FLOAT, 0, split,
                                          sizeof split, f, 2, NULL, &used, err, sizeof err),
                     DPP_ECORRUPT);
    expect_cuts_refused(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_FLOAT, 0, split, 12, f, 3);
    /* random doubles, INT64 and FLBA(5) against a scatter written here */
    uint64_t rng = 4;
    size_t n = 1001;
    for (unsigned k = 5; k <= 8; k += 3) {
        uint8_t *plain = malloc(n * k), *enc = malloc(n * k), *out = malloc(n * 16);
        assert_true(plain && enc && out);
        for (size_t i = 0; i < n * k; i++)
            plain[i] = (uint8_t)rng_next(&rng);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < k; j++)
                enc[j * n + i] = plain[i * k + j];
        if (k == 8) {
            assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_DOUBLE, 0, enc,
                                                  n * k, out, n, NULL, &used, err, sizeof err),
                             0);
            assert_memory_equal(out, plain, n * k);
            assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_INT64, 0, enc,
                                                  n * k, out, n, NULL, &used, err, sizeof err),
                             0);
            assert_memory_equal(out, plain, n * k);
        } else {
            dpp_pq_bytes_t *s = (dpp_pq_bytes_t *)out;
            assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT,
                                                  DPP_PQ_FIXED_LEN_BYTE_ARRAY, (int32_t)k, enc,
                                                  n * k, s, n, &scratch, &used, err, sizeof err),
                             0);
            for (size_t i = 0; i < n; i++)
                assert_true(s[i].len == k && memcmp(s[i].ptr, plain + i * k, k) == 0);
        }
        free(plain);
        free(enc);
        free(out);
    }
    dpp_pq_scratch_free(&scratch);
}

/* ---- byte arrays in delta encodings ---- */

/* DELTA_LENGTH_BYTE_ARRAY of strs: lengths through ref_dbp, then the bytes. */
static size_t ref_dlba(uint8_t *dst, const char *const *strs, size_t n, uint64_t *rng)
{
    uint64_t lens[64];
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(strs[i]);
    size_t pos = ref_dbp(dst, lens, n, 128, 4, 1, 0, rng);
    for (size_t i = 0; i < n; i++) {
        memcpy(dst + pos, strs[i], lens[i]);
        pos += lens[i];
    }
    return pos;
}

static void test_delta_length_byte_array(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    uint64_t rng = 5;
    dpp_pq_scratch_t scratch = {0};
    static const char *const strs[] = {"Hello", "World", "Foobar", "ABCDEF"};
    uint8_t buf[256] = {0};
    size_t len = ref_dlba(buf, strs, 4, &rng);
    /* the lengths end where the bytes begin, as the spec's example has it */
    assert_memory_equal(buf + len - 22, "HelloWorldFoobarABCDEF", 22);
    dpp_pq_bytes_t s[4];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_LENGTH_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf,
                                          len + 3, s, 4, &scratch, &used, err, sizeof err),
                     0);
    assert_int_equal(used, len);
    for (int i = 0; i < 4; i++)
        assert_true(s[i].len == strlen(strs[i]) && memcmp(s[i].ptr, strs[i], s[i].len) == 0 &&
                    s[i].ptr >= buf && s[i].ptr + s[i].len <= buf + len);
    expect_cuts_refused(DPP_PQ_DELTA_LENGTH_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf, len, s, 4);
    /* a negative length: 5 then -1 */
    uint64_t neg[] = {5, (uint64_t)-1};
    memset(buf, 0, sizeof buf);
    len = ref_dbp(buf, neg, 2, 128, 4, 1, 0, &rng);
    memcpy(buf + len, "Hello", 5);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_LENGTH_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf,
                                          len + 5, s, 2, &scratch, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "length -1"));
    /* lengths that add up past the end, in 32-bit arithmetic too */
    uint64_t big[] = {3, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    memset(buf, 0, sizeof buf);
    len = ref_dbp(buf, big, 4, 128, 4, 1, 0, &rng);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_LENGTH_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf,
                                          sizeof buf, s, 4, &scratch, &used, err, sizeof err),
                     DPP_ECORRUPT);
    /* no scratch */
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_LENGTH_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf,
                                          sizeof buf, s, 4, NULL, &used, err, sizeof err),
                     DPP_EINVAL);
    dpp_pq_scratch_free(&scratch);
}

/* DELTA_BYTE_ARRAY of strs[0..n) with each prefix the longest shared with
 * the value before, or shorter by at most `shorten` bytes. */
static size_t ref_dba(uint8_t *dst, const char *const *strs, const size_t *lens, size_t n,
                      size_t shorten, uint64_t *rng)
{
    uint64_t *pre = calloc(n, sizeof *pre), *suf = calloc(n, sizeof *suf);
    assert_true(pre && suf);
    for (size_t i = 0; i < n; i++) {
        size_t p = 0;
        while (i > 0 && p < lens[i] && p < lens[i - 1] && strs[i][p] == strs[i - 1][p])
            p++;
        if (shorten && p)
            p -= rng_next(rng) % (p < shorten ? p + 1 : shorten + 1);
        pre[i] = p;
        suf[i] = lens[i] - p;
    }
    size_t pos = ref_dbp(dst, pre, n, 128, 4, 1, 0, rng);
    pos += ref_dbp(dst + pos, suf, n, 256, 8, 1, 0x80, rng);
    for (size_t i = 0; i < n; i++) {
        memcpy(dst + pos, strs[i] + pre[i], suf[i]);
        pos += suf[i];
    }
    free(pre);
    free(suf);
    return pos;
}

static void test_delta_byte_array(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    uint64_t rng = 6;
    dpp_pq_scratch_t scratch = {0};
    static const char *const strs[] = {"axis", "axle", "babble", "babyhood"};
    static const size_t lens[] = {4, 4, 6, 8};
    uint8_t buf[512] = {0};
    size_t len = ref_dba(buf, strs, lens, 4, 0, &rng);
    assert_memory_equal(buf + len - 17, "axislebabbleyhood", 17);
    dpp_pq_bytes_t s[4];
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf, len,
                                          s, 4, &scratch, &used, err, sizeof err),
                     0);
    assert_int_equal(used, len);
    for (int i = 0; i < 4; i++)
        assert_true(s[i].len == lens[i] && memcmp(s[i].ptr, strs[i], lens[i]) == 0);
    expect_cuts_refused(DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf, len, s, 4);
    /* FIXED_LEN_BYTE_ARRAY(4): the first two fit, "babble" does not */
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_FIXED_LEN_BYTE_ARRAY, 4,
                                          buf, len, s, 4, &scratch, &used, err, sizeof err),
                     DPP_ECORRUPT);
    static const char *const fixed[] = {"axis", "axle", "axes", "bake"};
    static const size_t four[] = {4, 4, 4, 4};
    memset(buf, 0, sizeof buf);
    len = ref_dba(buf, fixed, four, 4, 0, &rng);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_FIXED_LEN_BYTE_ARRAY, 4,
                                          buf, len, s, 4, &scratch, &used, err, sizeof err),
                     0);
    for (int i = 0; i < 4; i++)
        assert_true(s[i].len == 4 && memcmp(s[i].ptr, fixed[i], 4) == 0);
    /* a prefix longer than the value before it */
    uint64_t pre[] = {0, 3}, suf[] = {2, 1};
    memset(buf, 0, sizeof buf);
    len = ref_dbp(buf, pre, 2, 128, 4, 1, 0, &rng);
    len += ref_dbp(buf + len, suf, 2, 128, 4, 1, 0, &rng);
    memcpy(buf + len, "abc", 3);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, buf,
                                          len + 3, s, 2, &scratch, &used, err, sizeof err),
                     DPP_ECORRUPT);
    assert_non_null(strstr(err, "prefix of 3 bytes"));
    /* random strings over a small alphabet share prefixes; prefixes cut
     * shorter at random exercise every kind of value; scratch is reused */
    size_t n = 2000;
    char **rs = malloc(n * sizeof *rs);
    size_t *rl = malloc(n * sizeof *rl);
    uint8_t *big = calloc(1, n * 64);
    dpp_pq_bytes_t *out = malloc(n * sizeof *out);
    assert_true(rs && rl && big && out);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < n; i++) {
            rl[i] = rng_next(&rng) % 12;
            rs[i] = malloc(rl[i] + 1);
            assert_non_null(rs[i]);
            size_t keep = i > 0 ? rng_next(&rng) % (rl[i - 1] + 1) : 0;
            for (size_t j = 0; j < rl[i]; j++)
                rs[i][j] =
                    j < keep && j < rl[i - 1] ? rs[i - 1][j] : (char)('a' + rng_next(&rng) % 3);
            rs[i][rl[i]] = '\0';
        }
        memset(big, 0, n * 64);
        len = ref_dba(big, (const char *const *)rs, rl, n, (size_t)round * 2, &rng);
        assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_BYTE_ARRAY, 0, big,
                                              len, out, n, &scratch, &used, err, sizeof err),
                         0);
        assert_int_equal(used, len);
        for (size_t i = 0; i < n; i++) {
            if (out[i].len != rl[i] || memcmp(out[i].ptr, rs[i], rl[i]) != 0)
                fail_msg("round %d value %zu: %.*s, not %s", round, i, (int)out[i].len,
                         (const char *)out[i].ptr, rs[i]);
            free(rs[i]);
        }
    }
    free(rs);
    free(rl);
    free(big);
    free(out);
    dpp_pq_scratch_free(&scratch);
    dpp_pq_scratch_free(&scratch);
    dpp_pq_scratch_free(NULL);
}

/* ---- what does not go together ---- */

static void test_refused_pairs(void **state)
{
    (void)state;
    char err[160];
    size_t used;
    uint8_t buf[64] = {0};
    int64_t out[4];
    static const struct {
        dpp_pq_encoding_t enc;
        dpp_pq_type_t type;
    } bad[] = {
        {DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_FLOAT},
        {DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_BYTE_ARRAY},
        {DPP_PQ_RLE, DPP_PQ_INT32},
        {DPP_PQ_DELTA_LENGTH_BYTE_ARRAY, DPP_PQ_FIXED_LEN_BYTE_ARRAY},
        {DPP_PQ_DELTA_BYTE_ARRAY, DPP_PQ_INT32},
        {DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_BOOLEAN},
        {DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_INT96},
        {DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_BYTE_ARRAY},
        {DPP_PQ_RLE_DICTIONARY, DPP_PQ_INT32},
        {DPP_PQ_PLAIN_DICTIONARY, DPP_PQ_INT32},
        {DPP_PQ_BIT_PACKED, DPP_PQ_BOOLEAN},
        {(dpp_pq_encoding_t)1, DPP_PQ_INT32},
        {(dpp_pq_encoding_t)42, DPP_PQ_INT32},
        {DPP_PQ_PLAIN, (dpp_pq_type_t)8},
        {DPP_PQ_PLAIN, (dpp_pq_type_t)-1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (dpp_pq_values_decode(bad[i].enc, bad[i].type, 4, buf, sizeof buf, out, 1, NULL, &used,
                                 err, sizeof err) != DPP_EINVAL)
            fail_msg("%s of type %d accepted", dpp_pq_encoding_name(bad[i].enc), (int)bad[i].type);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_DELTA_BINARY_PACKED, DPP_PQ_FLOAT, 0, buf,
                                          sizeof buf, out, 1, NULL, &used, err, sizeof err),
                     DPP_EINVAL);
    assert_string_equal(err, "DELTA_BINARY_PACKED does not apply to FLOAT");
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_PLAIN, DPP_PQ_FIXED_LEN_BYTE_ARRAY, 0, buf,
                                          sizeof buf, out, 1, NULL, &used, err, sizeof err),
                     DPP_EINVAL);
    assert_int_equal(dpp_pq_values_decode(DPP_PQ_BYTE_STREAM_SPLIT, DPP_PQ_FIXED_LEN_BYTE_ARRAY, 2,
                                          buf, 2, out, 1, NULL, &used, err, sizeof err),
                     DPP_EINVAL);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(dpp_pq_encoding_name(DPP_PQ_RLE_DICTIONARY), "RLE_DICTIONARY");
    assert_string_equal(dpp_pq_encoding_name(DPP_PQ_BYTE_STREAM_SPLIT), "BYTE_STREAM_SPLIT");
    assert_string_equal(dpp_pq_encoding_name((dpp_pq_encoding_t)42), "encoding 42");
    assert_int_equal(dpp_pq_value_size(DPP_PQ_BOOLEAN), 1);
    assert_int_equal(dpp_pq_value_size(DPP_PQ_INT32), 4);
    assert_int_equal(dpp_pq_value_size(DPP_PQ_INT96), 8);
    assert_int_equal(dpp_pq_value_size(DPP_PQ_DOUBLE), 8);
    assert_int_equal(dpp_pq_value_size(DPP_PQ_FIXED_LEN_BYTE_ARRAY), sizeof(dpp_pq_bytes_t));
    assert_int_equal(dpp_pq_value_size((dpp_pq_type_t)9), 0);
}

/* ---- a file written by parquet-mr ---- */

static uint8_t *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    uint8_t *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    buf[size] = '\0';
    *len = (size_t)size;
    return buf;
}

/* The first of dirs[0..ndirs) (NULL entries skipped) that holds name. */
static uint8_t *read_first(const char *const *dirs, size_t ndirs, const char *name, size_t *len)
{
    char path[700];
    for (size_t i = 0; i < ndirs; i++) {
        if (!dirs[i])
            continue;
        snprintf(path, sizeof path, "%s/%s", dirs[i], name);
        uint8_t *buf = read_whole(path, len);
        if (buf)
            return buf;
    }
    return NULL;
}

static void format_i128(__int128 v, char *out)
{
    char tmp[48];
    size_t n = 0;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    do {
        tmp[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (v < 0)
        *out++ = '-';
    while (n)
        *out++ = tmp[--n];
    *out = '\0';
}

/* parquet-testing's delta_binary_packed.parquet: 65 INT64 columns
 * bitwidth0..bitwidth64 and an INT32 int_value, 200 rows, each column one
 * uncompressed v2 page whose values start with the same DELTA_BINARY_PACKED
 * header (blocks of 128 in 4 miniblocks, 200 values). The page headers are
 * not parsed here (that is meta.c's): the values are found by that header's
 * bytes. Checked against DuckDB's column sums in the project's
 * expected.jsonl and, where parquet-testing's CSV of the values is at hand
 * (the shared copy), value by value. */
static void test_delta_binary_packed_file(void **state)
{
    (void)state;
    /* $DPP_PARQUET_TESTING, the project's copy (tests/data), the shared
     * folder beside the repository (as tests/parquet/regen_expected.sh) */
    char unit[512], data[600], shared[600];
    snprintf(unit, sizeof unit, "%s", __FILE__);
    char *slash = strrchr(unit, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(unit, sizeof unit, ".");
    snprintf(data, sizeof data, "%s/../../data/parquet-testing", unit);
    snprintf(shared, sizeof shared, "%s/../../../../shared/parquet-testing", unit);
    const char *dirs[] = {getenv("DPP_PARQUET_TESTING"), data, shared};
    size_t ndirs = sizeof dirs / sizeof *dirs, flen, clen, jlen;
    uint8_t *file = read_first(dirs, ndirs, "delta_binary_packed.parquet", &flen);
    uint8_t *csv = read_first(dirs, ndirs, "delta_binary_packed_expect.csv", &clen);
    uint8_t *jsonl = read_first(dirs, ndirs, "expected.jsonl", &jlen);
    if (!file || (!csv && !jsonl)) {
        free(file);
        free(csv);
        free(jsonl);
        skip(); /* set DPP_PARQUET_TESTING to a folder of parquet-testing's data */
    }
    enum { NCOL = 66, NROW = 200 };
    int64_t(*expect)[NCOL] = NULL;
    if (csv) {
        expect = malloc(sizeof(int64_t[NROW][NCOL]));
        assert_non_null(expect);
        char *line = strchr((char *)csv, '\n');
        assert_non_null(line);
        for (int r = 0; r < NROW; r++) {
            char *p = line + 1;
            for (int c = 0; c < NCOL; c++) {
                expect[r][c] = strtoll(p, &p, 10);
                assert_true(*p == (c + 1 < NCOL ? ',' : '\n'));
                p++;
            }
            line = p - 1;
        }
    }
    const char *stats = NULL;
    if (jsonl) {
        stats = strstr((char *)jsonl, "{\"file\":\"delta_binary_packed.parquet\"");
        assert_non_null(stats);
        *strchr(stats, '\n') = '\0';
    }
    static const uint8_t header[] = {0x80, 0x01, 0x04, 0xc8, 0x01};
    int64_t got[NROW];
    int32_t got32[NROW];
    char err[160];
    int col = 0;
    for (size_t off = 0; off + sizeof header <= flen; off++) {
        if (memcmp(file + off, header, sizeof header) != 0)
            continue;
        assert_true(col < NCOL);
        int is32 = col == NCOL - 1;
        size_t used;
        int rc = dpp_pq_values_decode(
            DPP_PQ_DELTA_BINARY_PACKED, is32 ? DPP_PQ_INT32 : DPP_PQ_INT64, 0, file + off,
            flen - off, is32 ? (void *)got32 : (void *)got, NROW, NULL, &used, err, sizeof err);
        if (rc != 0)
            fail_msg("column %d at byte %zu: %s", col, off, err);
        __int128 sum = 0;
        for (int r = 0; r < NROW; r++) {
            int64_t g = is32 ? got32[r] : got[r];
            sum += g;
            if (expect && g != expect[r][col])
                fail_msg("column %d row %d: %lld, CSV %lld", col, r, (long long)g,
                         (long long)expect[r][col]);
        }
        if (stats) {
            char key[64], want[64];
            if (is32)
                snprintf(key, sizeof key, "\"int_value\":{");
            else
                snprintf(key, sizeof key, "\"bitwidth%d\":{", col);
            const char *at = strstr(stats, key);
            assert_non_null(at);
            at = strstr(at, "\"int_sum\":\"");
            assert_non_null(at);
            at += strlen("\"int_sum\":\"");
            format_i128(sum, want);
            if (strncmp(at, want, strlen(want)) != 0 || at[strlen(want)] != '"')
                fail_msg("column %d: sum %s, DuckDB %.30s", col, want, at);
        }
        col++;
        off += used - 1;
    }
    assert_int_equal(col, NCOL);
    free(expect);
    free(file);
    free(csv);
    free(jsonl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_spec_examples),
        cmocka_unit_test(test_hybrid_roundtrip),
        cmocka_unit_test(test_bit_packed_levels),
        cmocka_unit_test(test_levels_errors),
        cmocka_unit_test(test_indices_errors),
        cmocka_unit_test(test_dbp_spec_examples),
        cmocka_unit_test(test_dbp_roundtrip),
        cmocka_unit_test(test_dbp_errors),
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_plain_int96),
        cmocka_unit_test(test_rle_boolean),
        cmocka_unit_test(test_byte_stream_split),
        cmocka_unit_test(test_delta_length_byte_array),
        cmocka_unit_test(test_delta_byte_array),
        cmocka_unit_test(test_refused_pairs),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_delta_binary_packed_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
