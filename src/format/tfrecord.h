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
#define DPP_TFRECORD_HEADER 12   /* 8 length + 4 length CRC */

/* A record's header (its first DPP_TFRECORD_HEADER bytes) checked: 0 with
 * *length, DPP_ECORRUPT for a length CRC mismatch, DPP_ETOOBIG for a length
 * over max_record. */
int dpp_tfrecord_header(const uint8_t *hdr, uint64_t max_record, uint64_t *length);

/* 1 when the payload CRC of the record frame[0 .. length + 16) matches. */
int dpp_tfrecord_payload_ok(const uint8_t *frame, uint64_t length);

/* Resynchronisation. After a length CRC mismatch (a byte inserted, deleted
 * or overwritten: the framing is lost) the next record is looked for one
 * byte further on, then the next byte, and so on: records resume at the
 * first offset whose header checks (length CRC, length <= max_record), whose
 * record fits before the end of the data and whose payload CRC matches. The
 * bytes passed over are a gap: no record of them is trusted, and the gap
 * counts as one corrupted record. A header that checks but whose record does
 * not (too long, past the end, a payload CRC mismatch) is a false candidate;
 * after DPP_TFRECORD_RESYNC_CANDIDATES of them in one gap the search gives
 * up and the rest of the data is lost (each one costs a CRC over up to
 * max_record bytes, so crafted data must not make a search unbounded). The
 * index scan (tfindex.c) and the worker's reader (worker/reader.c) apply
 * this same rule from the same offset, so they agree on where records are. */
#define DPP_TFRECORD_RESYNC_CANDIDATES 64

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
