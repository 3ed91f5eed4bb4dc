/* SPDX-License-Identifier: Apache-2.0 */
/* Decompression of Parquet pages through the kept libraries: snappy
 * (libsnappy's C API), GZIP (zlib, concatenated members), ZSTD (libzstd),
 * LZ4_RAW (a bare liblz4 block), LZ4 (Hadoop framing: blocks of BE u32
 * uncompressed size, BE u32 compressed size, data; a bare block when the
 * framing does not add up, as other readers accept) and BROTLI (libbrotli).
 * LZO is refused by name. */
#ifndef DPP_PARQUET_CODEC_H
#define DPP_PARQUET_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "parquet/meta.h"

/* Decompression state kept from page to page by one thread (the zstd and
 * zlib contexts). Zeroed: empty; free with dpp_pq_dctx_free. */
typedef struct dpp_pq_dctx {
    void *zstd;
    void *zlib;
} dpp_pq_dctx_t;
void dpp_pq_dctx_free(dpp_pq_dctx_t *c);

/* Decompresses src[0..srclen) into dst, which must come out exactly dstlen
 * bytes long (a page's uncompressed size). UNCOMPRESSED copies (srclen must
 * equal dstlen). Returns 0; DPP_ECORRUPT with err when the data does not
 * decompress or not to exactly dstlen bytes; DPP_EINVAL with err for a
 * codec not supported (LZO, an unknown number); -ENOMEM. */
int dpp_pq_decompress(dpp_pq_dctx_t *ctx, dpp_pq_codec_t codec, const uint8_t *src, size_t srclen,
                      uint8_t *dst, size_t dstlen, char *err, size_t errlen);

/* "SNAPPY", "ZSTD", ...; "codec 42" for an unknown one. */
const char *dpp_pq_codec_name(dpp_pq_codec_t codec);

#endif
