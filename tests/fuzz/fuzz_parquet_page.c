// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the decoders of a Parquet page body (src/parquet/encoding.c)
// and its decompression (src/parquet/codec.c), which read bytes of data files
// that are not trusted. Byte 0 picks what is driven, bytes 1..5 its
// parameters, the rest is the buffer:
//   levels      1: encoding, 2-3: max level, 4-5: n
//   indices     2-3: dictionary size, 4-5: n
//   values      1: encoding, 2: physical type, 3: type_length, 4-5: n
//   decompress  1: codec, 2-4: page size (at most 1 MiB)
// Results stay in range (levels <= max, indices < dictionary size, booleans
// 0/1, byte strings inside the buffer or the scratch, *used <= len); RLE
// levels agree with the same bytes read as dictionary indices; errors are
// DPP_ECORRUPT (DPP_EINVAL only for a pair or codec refused by name) and do
// not depend on the error buffer.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpp/error.h"
#include "fuzz_util.h"
#include "parquet/codec.h"
#include "parquet/encoding.h"

#define HEADER 6
#define MAX_N 4096
#define MAX_PAGE (1u << 20)

static void check_err(int rc, const char *err, size_t errlen)
{
    FUZZ_CHECK(memchr(err, '\0', errlen) != NULL, "err not NUL-terminated (rc %d)", rc);
}

static void fuzz_levels(const uint8_t *p, const uint8_t *buf, size_t len, size_t n)
{
    static const dpp_pq_encoding_t encs[] = {DPP_PQ_RLE, DPP_PQ_BIT_PACKED, DPP_PQ_RLE,
                                             DPP_PQ_BIT_PACKED, DPP_PQ_PLAIN};
    dpp_pq_encoding_t enc = encs[p[1] % 5];
    int max = p[3] & 0x80 ? ((p[3] & 0x7f) << 8 | p[2]) : p[2] & 0x0f;
    int16_t *out = malloc((n ? n : 1) * sizeof *out);
    FUZZ_CHECK(out != NULL, "out of memory");
    char err[160];
    int rc = dpp_pq_levels_decode(enc, max, buf, len, out, n, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == DPP_ECORRUPT, "rc %d", rc);
    FUZZ_CHECK(dpp_pq_levels_decode(enc, max, buf, len, out, n, NULL, 0) == rc, "rc differs");
    if (rc != 0) {
        check_err(rc, err, sizeof err);
        free(out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(out[i] >= 0 && out[i] <= max, "level %d > %d at %zu", out[i], max, i);

    // The same hybrid read as dictionary indices of the level's width.
    if (enc == DPP_PQ_RLE && max > 0 && n > 0) {
        uint8_t *with_width = malloc(len + 1);
        uint32_t *idx = malloc(n * sizeof *idx);
        FUZZ_CHECK(with_width && idx, "out of memory");
        with_width[0] = (uint8_t)(32 - __builtin_clz((unsigned)max));
        if (len)
            memcpy(with_width + 1, buf, len);
        rc = dpp_pq_indices_decode(with_width, len + 1, idx, n, (uint32_t)max + 1, err, sizeof err);
        FUZZ_CHECK(rc == 0, "levels decode, indices do not: %s", err);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(idx[i] == (uint32_t)out[i], "value %zu: level %d, index %u", i, out[i],
                       idx[i]);
        free(with_width);
        free(idx);
    }
    free(out);
}

static void fuzz_indices(const uint8_t *p, const uint8_t *buf, size_t len, size_t n)
{
    uint32_t dict = p[2] == 0xff ? UINT32_MAX - p[3] : (uint32_t)p[2] << (p[3] % 25);
    uint32_t *out = malloc((n ? n : 1) * sizeof *out);
    FUZZ_CHECK(out != NULL, "out of memory");
    char err[160];
    int rc = dpp_pq_indices_decode(buf, len, out, n, dict, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == DPP_ECORRUPT, "rc %d", rc);
    FUZZ_CHECK(dpp_pq_indices_decode(buf, len, out, n, dict, NULL, 0) == rc, "rc differs");
    if (rc != 0)
        check_err(rc, err, sizeof err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        FUZZ_CHECK(out[i] < dict, "index %u of a dictionary of %u", out[i], dict);
    free(out);
}

static void check_bytes(const dpp_pq_bytes_t *v, size_t n, const uint8_t *buf, size_t len,
                        const dpp_pq_scratch_t *s, int32_t fixed)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *a = v[i].ptr;
        int in_buf = a >= buf && a <= buf + len && v[i].len <= (size_t)(buf + len - a);
        int in_scratch = s->buf && a >= s->buf && a <= s->buf + s->cap &&
                         v[i].len <= (size_t)(s->buf + s->cap - a);
        FUZZ_CHECK(in_buf || in_scratch || v[i].len == 0, "value %zu outside buffer and scratch",
                   i);
        FUZZ_CHECK(fixed == 0 || v[i].len == (uint32_t)fixed, "value %zu of %u bytes, not %d", i,
                   v[i].len, fixed);
        if (v[i].len)
            fuzz_touch(a, v[i].len);
    }
}

static void fuzz_values(const uint8_t *p, const uint8_t *buf, size_t len, size_t n)
{
    static const dpp_pq_encoding_t encs[] = {DPP_PQ_PLAIN,
                                             DPP_PQ_RLE,
                                             DPP_PQ_DELTA_BINARY_PACKED,
                                             DPP_PQ_DELTA_LENGTH_BYTE_ARRAY,
                                             DPP_PQ_DELTA_BYTE_ARRAY,
                                             DPP_PQ_BYTE_STREAM_SPLIT,
                                             DPP_PQ_RLE_DICTIONARY,
                                             DPP_PQ_BIT_PACKED};
    dpp_pq_encoding_t enc = encs[p[1] % 8];
    dpp_pq_type_t type = (dpp_pq_type_t)(p[2] % 9);
    int32_t tl = p[3] % 17;
    void *out = malloc((n ? n : 1) * sizeof(dpp_pq_bytes_t));
    FUZZ_CHECK(out != NULL, "out of memory");
    dpp_pq_scratch_t scratch = {0};
    char err[160];
    size_t used = SIZE_MAX;
    int rc =
        dpp_pq_values_decode(enc, type, tl, buf, len, out, n, &scratch, &used, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == DPP_ECORRUPT || rc == DPP_EINVAL, "rc %d", rc);
    if (rc != 0) {
        check_err(rc, err, sizeof err);
        FUZZ_CHECK(used == SIZE_MAX, "used set on failure");
    } else {
        FUZZ_CHECK(used <= len, "used %zu of %zu", used, len);
        if (type == DPP_PQ_BOOLEAN)
            for (size_t i = 0; i < n; i++)
                FUZZ_CHECK(((uint8_t *)out)[i] <= 1, "boolean %u", ((uint8_t *)out)[i]);
        if (type == DPP_PQ_BYTE_ARRAY || type == DPP_PQ_FIXED_LEN_BYTE_ARRAY)
            check_bytes(out, n, buf, len, &scratch, type == DPP_PQ_FIXED_LEN_BYTE_ARRAY ? tl : 0);
    }
    // Same answer without an error buffer, with scratch already grown.
    size_t used2 = 0;
    int rc2 = dpp_pq_values_decode(enc, type, tl, buf, len, out, n, &scratch, &used2, NULL, 0);
    FUZZ_CHECK(rc2 == rc && (rc != 0 || used2 == used), "rc %d then %d", rc, rc2);
    dpp_pq_scratch_free(&scratch);
    free(out);
}

static void fuzz_decompress(const uint8_t *p, const uint8_t *buf, size_t len)
{
    // One context for the process, as a worker thread keeps one.
    static dpp_pq_dctx_t ctx;
    dpp_pq_codec_t codec = (dpp_pq_codec_t)(p[1] % 9);
    size_t dstlen = ((size_t)p[2] | (size_t)p[3] << 8 | (size_t)p[4] << 16) % (MAX_PAGE + 1);
    uint8_t *dst = malloc(dstlen ? dstlen : 1);
    FUZZ_CHECK(dst != NULL, "out of memory");
    char err[200];
    int rc = dpp_pq_decompress(&ctx, codec, buf, len, dst, dstlen, err, sizeof err);
    int refused = codec == DPP_PQ_LZO || (int)codec > DPP_PQ_LZ4_RAW;
    FUZZ_CHECK(refused ? rc == DPP_EINVAL : rc == 0 || rc == DPP_ECORRUPT || rc == -ENOMEM,
               "codec %d: rc %d", (int)codec, rc);
    FUZZ_CHECK(codec != DPP_PQ_UNCOMPRESSED || (rc == 0) == (len == dstlen),
               "UNCOMPRESSED %zu into %zu: rc %d", len, dstlen, rc);
    if (rc == 0)
        fuzz_touch(dst, dstlen);
    else
        check_err(rc, err, sizeof err);
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    const uint8_t *buf = data + HEADER;
    size_t len = size - HEADER;
    size_t n = ((size_t)data[4] | (size_t)data[5] << 8) % (MAX_N + 1);
    switch (data[0] % 4) {
    case 0:
        fuzz_levels(data, buf, len, n);
        break;
    case 1:
        fuzz_indices(data, buf, len, n);
        break;
    case 2:
        fuzz_values(data, buf, len, n);
        break;
    default:
        fuzz_decompress(data, buf, len);
        break;
    }
    return 0;
}
