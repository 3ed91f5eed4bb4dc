/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet page decompression (src/parquet/codec.c): pages compressed here by
 * each library's own compressor come back byte for byte, through one
 * context reused from call to call; GZIP members and zstd frames one after
 * another; LZ4 in Hadoop framing built by hand and as a bare block. A size
 * other than the page's, data cut at every length and garbage are
 * DPP_ECORRUPT; LZO and unknown codecs DPP_EINVAL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <brotli/encode.h>
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "dpp/error.h"
#include "parquet/codec.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A page that compresses somewhat: words from a small vocabulary, runs of
 * zeros and stretches of random bytes. */
static uint8_t *make_page(size_t n, uint64_t seed)
{
    static const char *const words[] = {"parquet ", "column ", "page ", "dictionary ", "levels "};
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    size_t i = 0;
    while (i < n) {
        uint64_t r = rng_next(&seed);
        size_t k;
        if (r % 4 == 0) {
            k = r % 64;
            for (size_t j = 0; j < k && i + j < n; j++)
                p[i + j] = (uint8_t)rng_next(&seed);
        } else if (r % 4 == 1) {
            k = r % 100;
            memset(p + i, 0, k < n - i ? k : n - i);
        } else {
            const char *w = words[r % 5];
            k = strlen(w);
            memcpy(p + i, w, k < n - i ? k : n - i);
        }
        i += k < n - i ? k : n - i;
    }
    return p;
}

/* Decompresses and expects exactly page back. */
static void expect_page(dpp_pq_dctx_t *ctx, dpp_pq_codec_t codec, const uint8_t *src, size_t srclen,
                        const uint8_t *page, size_t n)
{
    uint8_t *dst = malloc(n + 1);
    char err[200] = "";
    assert_non_null(dst);
    int rc = dpp_pq_decompress(ctx, codec, src, srclen, dst, n, err, sizeof err);
    if (rc != 0)
        fail_msg("%s of %zu bytes to %zu: %d %s", dpp_pq_codec_name(codec), srclen, n, rc, err);
    assert_memory_equal(dst, page, n);
    free(dst);
}

/* A size one off either way, the data cut at every length (stepped for long
 * data), and garbage are all DPP_ECORRUPT with the codec named. */
static void expect_refusals(dpp_pq_dctx_t *ctx, dpp_pq_codec_t codec, const uint8_t *src,
                            size_t srclen, size_t n)
{
    uint8_t *dst = malloc(n + 2);
    char err[200];
    const char *name = dpp_pq_codec_name(codec);
    assert_non_null(dst);
    if (n > 0 &&
        dpp_pq_decompress(ctx, codec, src, srclen, dst, n - 1, err, sizeof err) != DPP_ECORRUPT)
        fail_msg("%s: %zu bytes accepted into %zu", name, n, n - 1);
    if (dpp_pq_decompress(ctx, codec, src, srclen, dst, n + 1, err, sizeof err) != DPP_ECORRUPT)
        fail_msg("%s: %zu bytes accepted as %zu", name, n, n + 1);
    assert_non_null(strstr(err, name));
    size_t step = srclen > 2000 ? srclen / 500 : 1;
    for (size_t cut = 0; cut < srclen; cut += step)
        if (dpp_pq_decompress(ctx, codec, src, cut, dst, n, err, sizeof err) != DPP_ECORRUPT)
            fail_msg("%s: cut at %zu of %zu accepted", name, cut, srclen);
    uint64_t rng = 77;
    uint8_t junk[512];
    for (size_t len = 0; len <= sizeof junk; len += 37) {
        for (size_t i = 0; i < len; i++)
            junk[i] = (uint8_t)rng_next(&rng);
        if (dpp_pq_decompress(ctx, codec, junk, len, dst, n, err, sizeof err) != DPP_ECORRUPT)
            fail_msg("%s: %zu bytes of garbage accepted", name, len);
    }
    free(dst);
}

static const size_t sizes[] = {0, 1, 100, 3000, 200000};

static void test_uncompressed(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    char err[200];
    uint8_t *page = make_page(100, 1), dst[101];
    expect_page(&ctx, DPP_PQ_UNCOMPRESSED, page, 100, page, 100);
    assert_int_equal(
        dpp_pq_decompress(&ctx, DPP_PQ_UNCOMPRESSED, page, 99, dst, 100, err, sizeof err),
        DPP_ECORRUPT);
    assert_string_equal(err, "UNCOMPRESSED: page of 100 bytes stored in 99");
    assert_int_equal(dpp_pq_decompress(&ctx, DPP_PQ_UNCOMPRESSED, NULL, 0, dst, 0, err, sizeof err),
                     0);
    free(page);
    dpp_pq_dctx_free(&ctx);
}

static void test_snappy(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s];
        uint8_t *page = make_page(n, s);
        size_t clen = snappy_max_compressed_length(n);
        uint8_t *c = malloc(clen);
        assert_non_null(c);
        assert_int_equal(snappy_compress((const char *)page, n, (char *)c, &clen), SNAPPY_OK);
        expect_page(&ctx, DPP_PQ_SNAPPY, c, clen, page, n);
        expect_refusals(&ctx, DPP_PQ_SNAPPY, c, clen, n);
        free(c);
        free(page);
    }
    dpp_pq_dctx_free(&ctx);
}

/* One gzip member (windowBits 31) of page[0..n) appended at c + *clen. */
static void gzip_member(const uint8_t *page, size_t n, uint8_t *c, size_t *clen, size_t cap)
{
    z_stream z = {0};
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)page;
    z.avail_in = (uInt)n;
    z.next_out = c + *clen;
    z.avail_out = (uInt)(cap - *clen);
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *clen += z.total_out;
    deflateEnd(&z);
}

static void test_gzip(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    char err[200];
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s], cap = compressBound(n) + 64, clen = 0;
        uint8_t *page = make_page(n, 10 + s), *c = malloc(2 * cap);
        assert_non_null(c);
        gzip_member(page, n, c, &clen, cap);
        expect_page(&ctx, DPP_PQ_GZIP, c, clen, page, n);
        expect_refusals(&ctx, DPP_PQ_GZIP, c, clen, n);
        /* zlib's own header, as compress2 writes it */
        uLongf zlen = cap;
        assert_int_equal(compress2(c, &zlen, page, n, 6), Z_OK);
        expect_page(&ctx, DPP_PQ_GZIP, c, zlen, page, n);
        /* two members, as concatenated gzip files */
        clen = 0;
        gzip_member(page, n / 3, c, &clen, 2 * cap);
        gzip_member(page + n / 3, n - n / 3, c, &clen, 2 * cap);
        expect_page(&ctx, DPP_PQ_GZIP, c, clen, page, n);
        if (n > 0) /* else both members are empty and either alone is the page */
            expect_refusals(&ctx, DPP_PQ_GZIP, c, clen, n);
        /* bytes after the last member that are not one */
        c[clen] = 0;
        uint8_t *dst = malloc(n + 1);
        assert_int_equal(dpp_pq_decompress(&ctx, DPP_PQ_GZIP, c, clen + 1, dst, n, err, sizeof err),
                         DPP_ECORRUPT);
        free(dst);
        free(c);
        free(page);
    }
    dpp_pq_dctx_free(&ctx);
    dpp_pq_dctx_free(&ctx);
}

static void test_zstd(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    char err[200];
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s], cap = ZSTD_compressBound(n);
        uint8_t *page = make_page(n, 20 + s), *c = malloc(2 * cap);
        assert_non_null(c);
        size_t clen = ZSTD_compress(c, cap, page, n, 3);
        assert_false(ZSTD_isError(clen));
        expect_page(&ctx, DPP_PQ_ZSTD, c, clen, page, n);
        expect_refusals(&ctx, DPP_PQ_ZSTD, c, clen, n);
        /* two frames */
        size_t a = ZSTD_compress(c, cap, page, n / 2, 1);
        assert_false(ZSTD_isError(a));
        size_t b = ZSTD_compress(c + a, 2 * cap - a, page + n / 2, n - n / 2, 1);
        assert_false(ZSTD_isError(b));
        expect_page(&ctx, DPP_PQ_ZSTD, c, a + b, page, n);
        if (n > 0) /* else both frames are empty and either alone is the page */
            expect_refusals(&ctx, DPP_PQ_ZSTD, c, a + b, n);
        /* a frame that does not declare its size */
        ZSTD_CCtx *cc = ZSTD_createCCtx();
        assert_non_null(cc);
        assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
        ZSTD_outBuffer out = {c, cap, 0};
        ZSTD_inBuffer in = {page, n, 0};
        assert_int_equal(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end), 0);
        ZSTD_freeCCtx(cc);
        assert_true(ZSTD_getFrameContentSize(c, out.pos) == ZSTD_CONTENTSIZE_UNKNOWN);
        expect_page(&ctx, DPP_PQ_ZSTD, c, out.pos, page, n);
        expect_refusals(&ctx, DPP_PQ_ZSTD, c, out.pos, n);
        free(c);
        free(page);
    }
    /* a declared size larger than the page is refused before decoding */
    uint8_t page[64] = {1}, c[128], dst[64];
    size_t clen = ZSTD_compress(c, sizeof c, page, sizeof page, 1);
    assert_int_equal(dpp_pq_decompress(&ctx, DPP_PQ_ZSTD, c, clen, dst, 32, err, sizeof err),
                     DPP_ECORRUPT);
    assert_string_equal(err, "ZSTD: frame holds 64 bytes, the page 32");
    dpp_pq_dctx_free(&ctx);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Hadoop framing of page[0..n): blocks of block_size uncompressed bytes,
 * each in sub-blocks of at most sub_size, each sub-block its own LZ4
 * block. Returns the length written at c. */
static size_t hadoop_frame(const uint8_t *page, size_t n, size_t block_size, size_t sub_size,
                           uint8_t *c, size_t cap)
{
    size_t pos = 0;
    for (size_t b = 0; b < n; b += block_size) {
        size_t blen = n - b < block_size ? n - b : block_size;
        assert_true(pos + 4 <= cap);
        put_be32(c + pos, (uint32_t)blen);
        pos += 4;
        for (size_t s = 0; s < blen; s += sub_size) {
            size_t slen = blen - s < sub_size ? blen - s : sub_size;
            int got = LZ4_compress_default((const char *)page + b + s, (char *)c + pos + 4,
                                           (int)slen, (int)(cap - pos - 4));
            assert_true(got > 0);
            put_be32(c + pos, (uint32_t)got);
            pos += 4 + (size_t)got;
        }
    }
    return pos;
}

static void test_lz4(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    char err[200];
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s], cap = (size_t)LZ4_compressBound((int)n) * 2 + 4096;
        uint8_t *page = make_page(n, 30 + s), *c = malloc(cap);
        assert_non_null(c);
        /* LZ4_RAW: one bare block */
        int clen = LZ4_compress_default((const char *)page, (char *)c, (int)n, (int)cap);
        assert_true(clen > 0);
        expect_page(&ctx, DPP_PQ_LZ4_RAW, c, (size_t)clen, page, n);
        expect_refusals(&ctx, DPP_PQ_LZ4_RAW, c, (size_t)clen, n);
        /* LZ4 as a bare block: what some writers put under codec 5 */
        expect_page(&ctx, DPP_PQ_LZ4, c, (size_t)clen, page, n);
        if (n == 0)
            goto next;
        /* Hadoop framing: one block, one sub-block; several blocks; blocks
         * in several sub-blocks */
        size_t hlen = hadoop_frame(page, n, n, n, c, cap);
        expect_page(&ctx, DPP_PQ_LZ4, c, hlen, page, n);
        expect_refusals(&ctx, DPP_PQ_LZ4, c, hlen, n);
        hlen = hadoop_frame(page, n, n / 3 + 1, n, c, cap);
        expect_page(&ctx, DPP_PQ_LZ4, c, hlen, page, n);
        hlen = hadoop_frame(page, n, n / 2 + 1, n / 7 + 1, c, cap);
        expect_page(&ctx, DPP_PQ_LZ4, c, hlen, page, n);
        expect_refusals(&ctx, DPP_PQ_LZ4, c, hlen, n);
        /* the framing that does not add up is not taken: a block size one
         * short of its sub-block's data */
        hlen = hadoop_frame(page, n, n, n, c, cap);
        put_be32(c, (uint32_t)n - 1);
        uint8_t *dst = malloc(n);
        assert_int_equal(dpp_pq_decompress(&ctx, DPP_PQ_LZ4, c, hlen, dst, n, err, sizeof err),
                         DPP_ECORRUPT);
        assert_non_null(strstr(err, "neither in Hadoop framing nor as a bare block"));
        free(dst);
    next:
        free(c);
        free(page);
    }
    dpp_pq_dctx_free(&ctx);
}

static void test_brotli(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    char err[200];
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s], clen = BrotliEncoderMaxCompressedSize(n) + 16;
        uint8_t *page = make_page(n, 40 + s), *c = malloc(clen);
        assert_non_null(c);
        assert_true(BrotliEncoderCompress(5, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, n, page,
                                          &clen, c));
        expect_page(&ctx, DPP_PQ_BROTLI, c, clen, page, n);
        expect_refusals(&ctx, DPP_PQ_BROTLI, c, clen, n);
        /* a byte after the stream */
        uint8_t *more = malloc(clen + 1), *dst = malloc(n + 1);
        assert_true(more && dst);
        memcpy(more, c, clen);
        more[clen] = 0;
        assert_int_equal(
            dpp_pq_decompress(&ctx, DPP_PQ_BROTLI, more, clen + 1, dst, n, err, sizeof err),
            DPP_ECORRUPT);
        assert_non_null(strstr(err, "the stream ends at byte"));
        free(more);
        free(dst);
        free(c);
        free(page);
    }
    dpp_pq_dctx_free(&ctx);
}

static void test_unsupported(void **state)
{
    (void)state;
    dpp_pq_dctx_t ctx = {0};
    char err[200];
    uint8_t src[8] = {0}, dst[8];
    assert_int_equal(dpp_pq_decompress(&ctx, DPP_PQ_LZO, src, 8, dst, 8, err, sizeof err),
                     DPP_EINVAL);
    assert_string_equal(err, "LZO is not supported");
    assert_int_equal(dpp_pq_decompress(&ctx, (dpp_pq_codec_t)42, src, 8, dst, 8, err, sizeof err),
                     DPP_EINVAL);
    assert_string_equal(err, "codec 42 is not supported");
    assert_int_equal(dpp_pq_decompress(&ctx, DPP_PQ_LZO, src, 8, dst, 8, NULL, 0), DPP_EINVAL);
    assert_string_equal(dpp_pq_codec_name(DPP_PQ_LZ4_RAW), "LZ4_RAW");
    assert_string_equal(dpp_pq_codec_name(DPP_PQ_GZIP), "GZIP");
    assert_string_equal(dpp_pq_codec_name((dpp_pq_codec_t)-3), "codec -3");
    dpp_pq_dctx_free(&ctx);
    dpp_pq_dctx_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uncompressed), cmocka_unit_test(test_snappy),
        cmocka_unit_test(test_gzip),         cmocka_unit_test(test_zstd),
        cmocka_unit_test(test_lz4),          cmocka_unit_test(test_brotli),
        cmocka_unit_test(test_unsupported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
