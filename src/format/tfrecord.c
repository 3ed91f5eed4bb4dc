/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord framing: a zero-copy record iterator over an in-memory buffer
 * that checks both CRCs, and the writer's framing of one record. */
#include <string.h>

#include "base/crc32c.h"
#include "dpp/error.h"
#include "format/tfrecord.h"
#include "base/util.h"

#define HEADER_LEN DPP_TFRECORD_HEADER

static inline void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void store_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int dpp_tfrecord_header(const uint8_t *hdr, uint64_t max_record, uint64_t *length)
{
    if (dpp_crc32c_unmask(dpp_load_le32(hdr + 8)) != dpp_crc32c(0, hdr, 8))
        return DPP_ECORRUPT;
    *length = dpp_load_le64(hdr);
    return *length > max_record ? DPP_ETOOBIG : 0;
}

int dpp_tfrecord_payload_ok(const uint8_t *frame, uint64_t length)
{
    return dpp_crc32c_unmask(dpp_load_le32(frame + HEADER_LEN + length)) ==
           dpp_crc32c(0, frame + HEADER_LEN, (size_t)length);
}

void dpp_tfrecord_iter_init(dpp_tfrecord_iter_t *it, const uint8_t *buf, size_t len, uint64_t base,
                            uint64_t max_record)
{
    it->buf = buf;
    it->len = len;
    it->off = 0;
    it->base = base;
    it->max_record = max_record;
    it->stuck = 0;
}

int dpp_tfrecord_next(dpp_tfrecord_iter_t *it, const uint8_t **payload, size_t *payload_len,
                      uint64_t *err_off)
{
    size_t left = it->len - it->off;
    const uint8_t *rec;
    uint64_t length;
    int err;

    /* `stuck` holds the framing error; `off` stays at the bad record, so the
     * error and its offset repeat on every later call. */
    if (it->stuck) {
        *err_off = it->base + it->off;
        return it->stuck;
    }
    if (left == 0)
        return 0;
    rec = it->buf + it->off;
    if (left < HEADER_LEN) {
        err = DPP_ETRUNCATED;
        goto stuck;
    }
    if ((err = dpp_tfrecord_header(rec, it->max_record, &length)) != 0)
        goto stuck;
    /* Written so that a length near 2^64 cannot wrap the comparison. */
    if (left - HEADER_LEN < 4 || length > left - HEADER_LEN - 4) {
        err = DPP_ETRUNCATED;
        goto stuck;
    }

    it->off += HEADER_LEN + (size_t)length + 4;
    if (!dpp_tfrecord_payload_ok(rec, length)) {
        *err_off = it->base + (uint64_t)(rec - it->buf);
        return DPP_ECORRUPT;
    }
    *payload = rec + HEADER_LEN;
    *payload_len = (size_t)length;
    return 1;

stuck:
    it->stuck = err;
    *err_off = it->base + it->off;
    return err;
}

size_t dpp_tfrecord_frame(uint8_t *out, const void *payload, size_t payload_len)
{
    uint8_t *body = out + HEADER_LEN;

    store_le64(out, payload_len);
    store_le32(out + 8, dpp_crc32c_mask(dpp_crc32c(0, out, 8)));
    if (payload_len > 0 && payload != body)
        memmove(body, payload, payload_len);
    store_le32(body + payload_len, dpp_crc32c_mask(dpp_crc32c(0, body, payload_len)));
    return payload_len + DPP_TFRECORD_OVERHEAD;
}
