/* SPDX-License-Identifier: Apache-2.0 */
/* Parquet's encodings (parquet-format Encodings.md): levels, dictionary
 * indices and values of a page body that is already decompressed. Every
 * decoder is bounded by the buffer it is given: data that ends early, a
 * bit width out of range, a run longer than asked for or a delta block that
 * lies about its sizes is DPP_ECORRUPT with a sentence in err naming the
 * encoding and the byte offset in buf; nothing reads past buf + len. */
#ifndef DPP_PARQUET_ENCODING_H
#define DPP_PARQUET_ENCODING_H

#include <stddef.h>
#include <stdint.h>

#include "parquet/meta.h"

/* A byte string of a BYTE_ARRAY or FIXED_LEN_BYTE_ARRAY value. */
typedef struct dpp_pq_bytes {
    const uint8_t *ptr;
    uint32_t len;
} dpp_pq_bytes_t;

/* Memory a decoder may need beyond its output (DELTA_BYTE_ARRAY's rebuilt
 * strings, delta blocks' miniblock values). Grown with realloc, kept from
 * call to call; zeroed: empty; free with dpp_pq_scratch_free. Strings
 * written there stay valid until the next decode with the same scratch. */
typedef struct dpp_pq_scratch {
    uint8_t *buf;
    size_t cap;
} dpp_pq_scratch_t;
void dpp_pq_scratch_free(dpp_pq_scratch_t *s);

/* n levels (bit width from max_level: 0 -> all zero, nothing read) of
 * encoding RLE (the hybrid, no length prefix: buf[0..len) is exactly the
 * levels' bytes) or BIT_PACKED (the deprecated MSB-first packing) into
 * out[0..n). Returns 0 or DPP_ECORRUPT (also for a level > max_level and
 * for another encoding). */
int dpp_pq_levels_decode(dpp_pq_encoding_t enc, int max_level, const uint8_t *buf, size_t len,
                         int16_t *out, size_t n, char *err, size_t errlen);

/* n dictionary indices of a data page encoded PLAIN_DICTIONARY or
 * RLE_DICTIONARY: one byte of bit width (0..32), then the hybrid. Each index
 * is checked < dict_size. Returns 0 or DPP_ECORRUPT. */
int dpp_pq_indices_decode(const uint8_t *buf, size_t len, uint32_t *out, size_t n,
                          uint32_t dict_size, char *err, size_t errlen);

/* n non-null values of physical type `type` (type_length for
 * FIXED_LEN_BYTE_ARRAY) in encoding enc into out[0..n), whose element type
 * is by physical type:
 *   BOOLEAN -> uint8_t (0 or 1)          INT32 -> int32_t
 *   INT64 -> int64_t                     INT96 -> int64_t: nanoseconds since
 *   FLOAT -> float                          1970-01-01 (Julian day + nanos of day)
 *   DOUBLE -> double                     BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY -> dpp_pq_bytes_t
 * Encodings: PLAIN (every type), RLE (BOOLEAN only: a 4-byte LE length, then
 * the hybrid with width 1), DELTA_BINARY_PACKED (INT32, INT64),
 * DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY (BYTE_ARRAY; DELTA_BYTE_ARRAY
 * also FIXED_LEN_BYTE_ARRAY), BYTE_STREAM_SPLIT (FLOAT, DOUBLE, INT32,
 * INT64, FIXED_LEN_BYTE_ARRAY). A DELTA_* header must count exactly n
 * values; n == 0 reads nothing. Byte strings point into buf, or into
 * scratch for DELTA_BYTE_ARRAY and a BYTE_STREAM_SPLIT FIXED_LEN_BYTE_ARRAY
 * (those, and DELTA_LENGTH_BYTE_ARRAY, need a scratch). *used, when not
 * NULL, is set to the bytes of buf consumed. Returns 0, DPP_ECORRUPT,
 * -ENOMEM (scratch), or DPP_EINVAL with err naming the encoding and type
 * when the pair is not one of the above or the scratch is missing. */
int dpp_pq_values_decode(dpp_pq_encoding_t enc, dpp_pq_type_t type, int32_t type_length,
                         const uint8_t *buf, size_t len, void *out, size_t n,
                         dpp_pq_scratch_t *scratch, size_t *used, char *err, size_t errlen);

/* Size in bytes of one element of out for a physical type. */
size_t dpp_pq_value_size(dpp_pq_type_t type);

/* "PLAIN", "RLE_DICTIONARY", ...; "encoding 42" for an unknown one (static
 * buffer per thread). */
const char *dpp_pq_encoding_name(dpp_pq_encoding_t enc);

#endif
