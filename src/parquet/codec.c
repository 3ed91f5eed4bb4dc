/* SPDX-License-Identifier: Apache-2.0 */
/* Decompression of Parquet pages: each codec through its kept library, every
 * result checked to be exactly the page's uncompressed size. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/decode.h>
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "base/errtext.h"
#include "dpp/error.h"
#include "parquet/codec.h"

void dpp_pq_dctx_free(dpp_pq_dctx_t *c)
{
    if (!c)
        return;
    ZSTD_freeDCtx(c->zstd);
    if (c->zlib) {
        inflateEnd(c->zlib);
        free(c->zlib);
    }
    c->zstd = NULL;
    c->zlib = NULL;
}

const char *dpp_pq_codec_name(dpp_pq_codec_t codec)
{
    static _Thread_local char other[24];
    switch (codec) {
    case DPP_PQ_UNCOMPRESSED:
        return "UNCOMPRESSED";
    case DPP_PQ_SNAPPY:
        return "SNAPPY";
    case DPP_PQ_GZIP:
        return "GZIP";
    case DPP_PQ_LZO:
        return "LZO";
    case DPP_PQ_BROTLI:
        return "BROTLI";
    case DPP_PQ_LZ4:
        return "LZ4";
    case DPP_PQ_ZSTD:
        return "ZSTD";
    case DPP_PQ_LZ4_RAW:
        return "LZ4_RAW";
    }
    snprintf(other, sizeof other, "codec %d", (int)codec);
    return other;
}

static int snappy(const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen, char *err,
                  size_t errlen)
{
    size_t n;
    if (snappy_uncompressed_length((const char *)src, srclen, &n) != SNAPPY_OK)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "SNAPPY: %zu bytes do not start with a length",
                        srclen);
    if (n != dstlen)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "SNAPPY: data holds %zu bytes, the page %zu", n,
                        dstlen);
    if (snappy_uncompress((const char *)src, srclen, (char *)dst, &n) != SNAPPY_OK || n != dstlen)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "SNAPPY: %zu bytes do not decompress to %zu",
                        srclen, dstlen);
    return 0;
}

/* GZIP: gzip or zlib members (windowBits 15 + 32 detects either), one after
 * another until the input ends, as concatenated gzip files are. */
static int gzip(dpp_pq_dctx_t *ctx, const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen,
                char *err, size_t errlen)
{
    z_stream *z = ctx->zlib;
    if (!z) {
        if ((z = calloc(1, sizeof *z)) == NULL)
            return -ENOMEM;
        if (inflateInit2(z, 15 + 32) != Z_OK) {
            free(z);
            return -ENOMEM;
        }
        ctx->zlib = z;
    } else {
        inflateReset(z);
    }
    size_t in = 0, out = 0;
    int members = 0;
    while (in < srclen) {
        /* avail_in and avail_out are 32 bits: feed at most that at a time. */
        z->next_in = (Bytef *)(src + in);
        z->avail_in = srclen - in < UINT_MAX ? (uInt)(srclen - in) : UINT_MAX;
        z->next_out = dst + out;
        z->avail_out = dstlen - out < UINT_MAX ? (uInt)(dstlen - out) : UINT_MAX;
        uInt fed = z->avail_in, room = z->avail_out;
        int rc = inflate(z, Z_NO_FLUSH);
        in += fed - z->avail_in;
        out += room - z->avail_out;
        if (rc == Z_STREAM_END) {
            members++;
            inflateReset(z);
            continue;
        }
        if (rc == Z_OK)
            continue;
        if (rc == Z_BUF_ERROR && out == dstlen)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "GZIP: %zu bytes decompress to more than %zu", srclen, dstlen);
        if (rc == Z_MEM_ERROR)
            return -ENOMEM;
        return dpp_errf(DPP_ECORRUPT, err, errlen, "GZIP: %s at input byte %zu of %zu",
                        z->msg ? z->msg : "data do not inflate", in, srclen);
    }
    if (members == 0 || z->total_in != 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "GZIP: %zu bytes end inside a stream", srclen);
    if (out != dstlen)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "GZIP: %zu bytes decompress to %zu, not %zu",
                        srclen, out, dstlen);
    return 0;
}

/* ZSTD: one or more frames; a frame that declares its size is checked
 * before anything is written. */
static int zstd(dpp_pq_dctx_t *ctx, const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen,
                char *err, size_t errlen)
{
    unsigned long long declared = ZSTD_getFrameContentSize(src, srclen);
    if (declared == ZSTD_CONTENTSIZE_ERROR)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "ZSTD: %zu bytes are not a zstd frame", srclen);
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared > dstlen)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "ZSTD: frame holds %llu bytes, the page %zu",
                        declared, dstlen);
    if (!ctx->zstd && (ctx->zstd = ZSTD_createDCtx()) == NULL)
        return -ENOMEM;
    size_t got = ZSTD_decompressDCtx(ctx->zstd, dst, dstlen, src, srclen);
    if (ZSTD_isError(got))
        return dpp_errf(DPP_ECORRUPT, err, errlen, "ZSTD: %s (%zu bytes to %zu)",
                        ZSTD_getErrorName(got), srclen, dstlen);
    if (got != dstlen)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "ZSTD: %zu bytes decompress to %zu, not %zu",
                        srclen, got, dstlen);
    return 0;
}

/* A bare LZ4 block that must fill dst exactly; -1 otherwise. */
static int lz4_block(const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen)
{
    if (srclen > INT_MAX || dstlen > INT_MAX)
        return -1;
    int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)srclen, (int)dstlen);
    return got >= 0 && (size_t)got == dstlen ? 0 : -1;
}

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Hadoop's BlockCompressorStream framing: blocks of [BE u32 uncompressed
 * size] then sub-blocks of [BE u32 compressed size][LZ4 block] until that
 * size is reached. -1 when the data are not exactly that, filling dst. */
static int lz4_hadoop(const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen)
{
    size_t in = 0, out = 0;
    while (in < srclen) {
        if (srclen - in < 4)
            return -1;
        size_t block = load_be32(src + in);
        in += 4;
        if (block > dstlen - out)
            return -1;
        size_t block_end = out + block;
        while (out < block_end) {
            if (srclen - in < 4)
                return -1;
            size_t clen = load_be32(src + in);
            in += 4;
            if (clen > srclen - in || clen > INT_MAX || block_end - out > INT_MAX)
                return -1;
            int got = LZ4_decompress_safe((const char *)src + in, (char *)dst + out, (int)clen,
                                          (int)(block_end - out));
            if (got <= 0)
                return -1;
            in += clen;
            out += (size_t)got;
        }
    }
    return out == dstlen ? 0 : -1;
}

/* LZ4 (codec 5): parquet-mr wrote Hadoop's framing, other writers a bare
 * block; like arrow-cpp, try the framing and fall back to a bare block. */
static int lz4(const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen, char *err,
               size_t errlen)
{
    if (lz4_hadoop(src, srclen, dst, dstlen) == 0 || lz4_block(src, srclen, dst, dstlen) == 0)
        return 0;
    return dpp_errf(DPP_ECORRUPT, err, errlen,
                    "LZ4: %zu bytes decompress to %zu neither in Hadoop framing nor as a bare "
                    "block",
                    srclen, dstlen);
}

/* BROTLI through the streaming decoder, which unlike the one-shot call tells
 * whether bytes are left after the stream. */
static int brotli(const uint8_t *src, size_t srclen, uint8_t *dst, size_t dstlen, char *err,
                  size_t errlen)
{
    BrotliDecoderState *s = BrotliDecoderCreateInstance(NULL, NULL, NULL);
    if (!s)
        return -ENOMEM;
    size_t in_left = srclen, out_left = dstlen;
    const uint8_t *next_in = src;
    uint8_t *next_out = dst;
    BrotliDecoderResult r =
        BrotliDecoderDecompressStream(s, &in_left, &next_in, &out_left, &next_out, NULL);
    const char *why = BrotliDecoderErrorString(BrotliDecoderGetErrorCode(s));
    BrotliDecoderDestroyInstance(s);
    if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "BROTLI: %zu bytes decompress to more than %zu",
                        srclen, dstlen);
    if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "BROTLI: %zu bytes end inside the stream",
                        srclen);
    if (r != BROTLI_DECODER_RESULT_SUCCESS)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "BROTLI: %s at input byte %zu of %zu", why,
                        srclen - in_left, srclen);
    if (in_left != 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "BROTLI: the stream ends at byte %zu of %zu",
                        srclen - in_left, srclen);
    if (out_left != 0)
        return dpp_errf(DPP_ECORRUPT, err, errlen, "BROTLI: %zu bytes decompress to %zu, not %zu",
                        srclen, dstlen - out_left, dstlen);
    return 0;
}

int dpp_pq_decompress(dpp_pq_dctx_t *ctx, dpp_pq_codec_t codec, const uint8_t *src, size_t srclen,
                      uint8_t *dst, size_t dstlen, char *err, size_t errlen)
{
    switch (codec) {
    case DPP_PQ_UNCOMPRESSED:
        if (srclen != dstlen)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "UNCOMPRESSED: page of %zu bytes stored in %zu", dstlen, srclen);
        if (dstlen)
            memcpy(dst, src, dstlen);
        return 0;
    case DPP_PQ_SNAPPY:
        return snappy(src, srclen, dst, dstlen, err, errlen);
    case DPP_PQ_GZIP:
        return gzip(ctx, src, srclen, dst, dstlen, err, errlen);
    case DPP_PQ_ZSTD:
        return zstd(ctx, src, srclen, dst, dstlen, err, errlen);
    case DPP_PQ_LZ4_RAW:
        if (lz4_block(src, srclen, dst, dstlen) != 0)
            return dpp_errf(DPP_ECORRUPT, err, errlen,
                            "LZ4_RAW: %zu bytes do not decompress to %zu", srclen, dstlen);
        return 0;
    case DPP_PQ_LZ4:
        return lz4(src, srclen, dst, dstlen, err, errlen);
    case DPP_PQ_BROTLI:
        return brotli(src, srclen, dst, dstlen, err, errlen);
    case DPP_PQ_LZO:
        return dpp_errf(DPP_EINVAL, err, errlen, "LZO is not supported");
    }
    return dpp_errf(DPP_EINVAL, err, errlen, "%s is not supported", dpp_pq_codec_name(codec));
}
