// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: what the client does with a BLOCK payload
// (src/format/block.c): dpp_block_decompress(), dpp_block_parse() against a
// few fixed shapes, then every column read through the accessors so ASan sees
// any pointer outside the block. A parsed block is also copied row range by
// row range into a builder, as the client assembles batches, and the
// rebuilt block must parse and hold the same values.
//
// Input: 12 bytes of BLOCK header fields, then the payload:
//   [0] codec (mod 4: 2 and 3 are unknown codecs)
//   [1] bit 0: raw_size from [4..12) instead of the honest one (the payload
//       length, or the zstd frame's declared size); bit 1: no ZSTD_DCtx
//   [2] where the rows are cut in two for the builder
//   [3] unused
//   [4..12) raw_size, little-endian
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "format/block.h"
#include "dpp/error.h"
#include "fuzz_shapes.h"
#include "fuzz_util.h"

#define PREFIX 12
#define MAX_RAW (1u << 20) /* the client allows 256 MiB; small keeps runs fast */

static ZSTD_DCtx *zctx;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    zctx = ZSTD_createDCtx();
    FUZZ_CHECK(zctx != NULL, "ZSTD_createDCtx");
    return 0;
}

static int weighted(const dpp_block_shape_t *s, unsigned k)
{
    return s->weighted && s->weighted[k];
}

static int any_weighted(const dpp_block_shape_t *s)
{
    for (unsigned k = 0; k < s->nsparse; k++)
        if (weighted(s, k))
            return 1;
    return 0;
}

/* Reads every column of a parsed block through each accessor. */
static void touch_block(const uint8_t *buf, const dpp_block_shape_t *s, uint32_t rows)
{
    const float *labels = dpp_block_labels(buf, s);
    FUZZ_CHECK((labels == NULL) == s->no_label, "labels %p", (const void *)labels);
    if (labels)
        fuzz_touch(labels, rows * sizeof(float));
    for (unsigned i = 0; i < s->ndense; i++)
        fuzz_touch(dpp_block_dense(buf, i), (size_t)rows * s->dims[i] * sizeof(float));
    size_t total = 0;
    for (unsigned k = 0; k < s->nsparse; k++) {
        const int32_t *lengths = dpp_block_lengths(buf, s, k);
        size_t sum = 0, n = 0;
        for (uint32_t r = 0; r < rows; r++) {
            FUZZ_CHECK(lengths[r] >= 0, "key %u row %u: length %d", k, r, lengths[r]);
            sum += (size_t)lengths[r];
        }
        const int64_t *values = dpp_block_values(buf, s, k, &n);
        FUZZ_CHECK(n == sum, "key %u: %zu values, lengths sum to %zu", k, n, sum);
        fuzz_touch(values, n * sizeof *values);
        const float *w = dpp_block_weights(buf, s, k);
        FUZZ_CHECK((w != NULL) == weighted(s, k), "key %u: weights %p", k, (const void *)w);
        if (w)
            fuzz_touch(w, n * sizeof *w);
        total += n;
    }
    dpp_block_kjt_t kjt;
    dpp_block_kjt(buf, s, &kjt);
    if (s->nsparse == 0) {
        FUZZ_CHECK(kjt.lengths == NULL && kjt.nvalues == 0, "KJT of a block without sparse");
        return;
    }
    size_t cells = (size_t)s->nsparse * rows;
    fuzz_touch(kjt.lengths, cells * sizeof *kjt.lengths);
    fuzz_touch(kjt.offsets, (cells + 1) * sizeof *kjt.offsets);
    FUZZ_CHECK(kjt.nvalues == total, "KJT: %zu values, keys %zu", kjt.nvalues, total);
    fuzz_touch(kjt.values, kjt.nvalues * sizeof *kjt.values);
    FUZZ_CHECK((kjt.weights != NULL) == any_weighted(s), "KJT weights");
    if (kjt.weights)
        fuzz_touch(kjt.weights, kjt.nvalues * sizeof *kjt.weights);
}

static void check_same(const char *what, const void *a, const void *b, size_t bytes)
{
    FUZZ_CHECK(bytes == 0 || memcmp(a, b, bytes) == 0, "rebuilt block: %s differs", what);
}

/* Copies rows [0, cut) and [cut, rows) into a builder, as the client does
 * across batches, and compares the block it finishes with the original. */
static void rebuild(const uint8_t *buf, const dpp_block_shape_t *s, uint32_t rows, uint8_t cut_sel)
{
    dpp_block_builder_t b;
    FUZZ_CHECK(dpp_block_builder_init(&b, s) == 0, "builder init");
    size_t cut = rows ? cut_sel % ((size_t)rows + 1) : 0;
    int rc = dpp_block_builder_append_block(&b, buf, 0, cut);
    FUZZ_CHECK(rc == 0, "append rows [0, %zu): rc %d", cut, rc);
    rc = dpp_block_builder_append_block(&b, buf, cut, rows);
    FUZZ_CHECK(rc == 0, "append rows [%zu, %u): rc %d", cut, rows, rc);
    FUZZ_CHECK(dpp_block_builder_append_block(&b, buf, 1, 0) == DPP_EINVAL &&
                   dpp_block_builder_append_block(&b, buf, 0, (size_t)rows + 1) == DPP_EINVAL,
               "bad row ranges accepted");
    uint8_t *out = NULL;
    size_t len = 0;
    size_t want_len = dpp_block_builder_size(&b);
    FUZZ_CHECK(dpp_block_builder_finish(&b, &out, &len) == 0 && len == want_len, "finish");
    dpp_block_builder_close(&b);

    dpp_block_info_t info;
    rc = dpp_block_parse(out, len, s, &info);
    FUZZ_CHECK(rc == 0 && info.rows == rows, "rebuilt block: rc %d, %u rows of %u", rc,
               rc == 0 ? info.rows : 0, rows);
    if (!s->no_label)
        check_same("labels", dpp_block_labels(out, s), dpp_block_labels(buf, s),
                   rows * sizeof(float));
    for (unsigned i = 0; i < s->ndense; i++)
        check_same("dense", dpp_block_dense(out, i), dpp_block_dense(buf, i),
                   (size_t)rows * s->dims[i] * sizeof(float));
    for (unsigned k = 0; k < s->nsparse; k++) {
        size_t n, n2;
        check_same("lengths", dpp_block_lengths(out, s, k), dpp_block_lengths(buf, s, k),
                   rows * sizeof(int32_t));
        const int64_t *v = dpp_block_values(out, s, k, &n);
        const int64_t *v2 = dpp_block_values(buf, s, k, &n2);
        FUZZ_CHECK(n == n2, "rebuilt block: key %u has %zu values, not %zu", k, n, n2);
        check_same("values", v, v2, n * sizeof *v);
        if (weighted(s, k))
            check_same("weights", dpp_block_weights(out, s, k), dpp_block_weights(buf, s, k),
                       n * sizeof(float));
    }
    touch_block(out, s, rows);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PREFIX)
        return 0;
    uint32_t codec = data[0] % 4;
    uint8_t flags = data[1], cut_sel = data[2];
    uint64_t raw_size;
    memcpy(&raw_size, data + 4, sizeof raw_size);
    data += PREFIX;
    size -= PREFIX;
    if (!(flags & 1))
        raw_size = codec == 1 ? ZSTD_getFrameContentSize(data, size) : size;

    uint8_t *raw = NULL;
    size_t raw_len = 0;
    int rc = dpp_block_decompress(flags & 2 ? NULL : zctx, data, size, codec, raw_size, MAX_RAW,
                                  &raw, &raw_len);
    if (rc != 0) {
        FUZZ_CHECK(rc == DPP_EBLOCK, "decompress: rc %d", rc);
        FUZZ_CHECK(raw == NULL && raw_len == 0, "decompress failed but returned bytes");
        FUZZ_CHECK(codec == 1 || (codec == 0 && raw_size != size) || codec > 1,
                   "raw block of %zu bytes, raw_size %llu refused", size,
                   (unsigned long long)raw_size);
        return 0;
    }
    FUZZ_CHECK(codec <= 1 && raw_len == raw_size, "accepted codec %u, %zu bytes for %llu", codec,
               raw_len, (unsigned long long)raw_size);
    FUZZ_CHECK(codec == 1 ? raw_len <= MAX_RAW : memcmp(raw, data, size) == 0,
               "decompressed block over the limit or not a copy");
    FUZZ_CHECK(((uintptr_t)raw & 7u) == 0, "unaligned block buffer");

    for (size_t i = 0; i < DPP_FUZZ_NSHAPES; i++) {
        dpp_block_info_t info;
        if (dpp_block_parse(raw, raw_len, &dpp_fuzz_shapes[i], &info) != 0)
            continue;
        touch_block(raw, &dpp_fuzz_shapes[i], info.rows);
        rebuild(raw, &dpp_fuzz_shapes[i], info.rows, cut_sel);
    }
    free(raw);
    return 0;
}
