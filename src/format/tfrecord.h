/* SPDX-License-Identifier: Apache-2.0 */
/* TFRecord framing: u64 LE length, masked CRC32C of the 8 length bytes,
 * payload, masked CRC32C of the payload (tensorflow/core/lib/io/
 * record_writer.h). The reader walks a buffer holding a whole file or a
 * record-aligned part of one, without copying. */
#ifndef DPP_FORMAT_TFRECORD_H
#define DPP_FORMAT_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#define DPP_TFRECORD_OVERHEAD 16 /* 8 length + 4 length CRC + 4 payload CRC */

typedef struct dpp_tfrecord_iter {
    const uint8_t *buf; /* not owned; must outlive the iterator */
    size_t len;
    size_t off;          /* offset of the next record in buf */
    uint64_t base;       /* file offset of buf[0], for error messages */
    uint64_t max_record; /* payloads longer than this are DPP_ETOOBIG */
    int stuck;           /* 0, or the framing error (no later boundary known) */
} dpp_tfrecord_iter_t;

/* Sets up an iterator over buf[0..len), which starts at file offset base. */
void dpp_tfrecord_iter_init(dpp_tfrecord_iter_t *it, const uint8_t *buf, size_t len, uint64_t base,
                            uint64_t max_record);

/* Reads the next record. Returns 1 with *payload and *payload_len pointing into
 * the buffer (valid as long as the buffer), 0 at a clean end (no bytes left at
 * a record start), or a negative error with *err_off set to the file offset of
 * the bad record (err_off is only written on error):
 *  - DPP_ECORRUPT: payload CRC mismatch. The iterator has moved past the
 *    record (its length was verified), so the caller may skip it and go on.
 *  - DPP_ECORRUPT with a bad length CRC, DPP_ETRUNCATED (the buffer ends
 *    inside a record) and DPP_ETOOBIG (length > max_record, checked after the
 *    length CRC and before anything else): no later record boundary can be
 *    trusted, so every further call returns the same error. */
int dpp_tfrecord_next(dpp_tfrecord_iter_t *it, const uint8_t **payload, size_t *payload_len,
                      uint64_t *err_off);

/* Frames payload into out, which must hold payload_len + DPP_TFRECORD_OVERHEAD
 * bytes. Returns the number of bytes written. payload may overlap out; in
 * particular a writer may serialise the payload straight to out + 12 and
 * frame it in place without a copy. payload may be NULL when payload_len is 0. */
size_t dpp_tfrecord_frame(uint8_t *out, const void *payload, size_t payload_len);

#endif
