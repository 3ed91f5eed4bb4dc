/* SPDX-License-Identifier: Apache-2.0 */
/* Record index sidecars in DALI's tfrecord2idx format: a text file with one
 * line per record, "offset size" in decimal, size being the whole framed
 * record (16 + payload length). An index lets a split start at any record
 * without reading the file before it. */
#ifndef DPP_FORMAT_TFINDEX_H
#define DPP_FORMAT_TFINDEX_H

#include <stddef.h>
#include <stdint.h>

/* The largest index file dpp_tfindex_load() reads. */
#define DPP_TFINDEX_MAX_TEXT (1ull << 30)

typedef struct dpp_tfindex {
    uint64_t *offsets; /* n of them, malloc'd; NULL when n = 0 */
    uint64_t *sizes;   /* framed size of each record */
    size_t n;
} dpp_tfindex_t;

/* Parses an index's text. Strict: each line is two decimal fields (no sign)
 * separated by one space or tab, ending in \n or \r\n (the last line may lack
 * it); sizes are at least 16; the first offset is 0 and each next one is the
 * previous offset + size, so records are contiguous; when file_size is not
 * UINT64_MAX the records end exactly at file_size. Empty text is 0 records.
 * Returns 0 with *out filled (release with dpp_tfindex_close()), DPP_EINVAL
 * with "line N: ..." in err (always NUL-terminated when errlen > 0), or
 * -ENOMEM. *out is left empty on error. */
int dpp_tfindex_parse(const char *text, size_t len, uint64_t file_size, dpp_tfindex_t *out,
                      char *err, size_t errlen);

/* Reads the index file at idx_path (at most DPP_TFINDEX_MAX_TEXT bytes) and
 * parses it as above. Returns 0, DPP_EINVAL, DPP_ETOOBIG for a larger file,
 * -ENOMEM or -errno, with a message in err on every error. */
int dpp_tfindex_load(const char *idx_path, uint64_t file_size, dpp_tfindex_t *out, char *err,
                     size_t errlen);

/* Where a scan stopped early. */
typedef struct dpp_tfindex_scan_result {
    int error; /* 0: the whole file is indexed; else DPP_ECORRUPT,
                * DPP_ETRUNCATED or DPP_ETOOBIG: the record at
                * error_offset ends the usable part of the file */
    uint64_t error_offset;
    /* Framing breaks the scan resynchronised past (format/tfrecord.h): how
     * many, the bytes they hold, and the first one's start and the offset
     * where records resumed after it. The records on either side are in the
     * index; offsets[i] + sizes[i] == offsets[i + 1] no longer holds at a
     * gap. */
    uint64_t gaps, gap_bytes, gap_offset, gap_resume;
} dpp_tfindex_scan_result_t;

/* Builds the index of a TFRecord file from its framing: each record's length
 * and length CRC are checked and its payload skipped unread (large records
 * cost one small pread each). A length CRC mismatch with tail set is a gap
 * the scan resynchronises past (format/tfrecord.h), counted in *tail; one
 * after which no record resumes, or any with tail NULL, is DPP_ECORRUPT
 * ("corrupted record at OFFSET"); a file ending inside a record
 * DPP_ETRUNCATED ("truncated record at OFFSET"), a length above max_record
 * (0: no limit; nothing is allocated per record) DPP_ETOOBIG.
 * With tail == NULL those are returned as errors and *out is left empty.
 * With tail set, the scan returns 0, *out holds the records before the bad one
 * and *tail says where and why it stopped (tail->error = 0 for a clean file);
 * the message is in err too. Other errors (-ENOMEM, -errno from open/read)
 * are always returned, with a message in err. Release *out with
 * dpp_tfindex_close(). */
int dpp_tfindex_scan(const char *tfrecord_path, uint64_t max_record, dpp_tfindex_t *out,
                     dpp_tfindex_scan_result_t *tail, char *err, size_t errlen);

/* dpp_tfindex_scan() that also reads every payload and checks its CRC: a
 * mismatch is DPP_ECORRUPT at that record, handled like a framing error. */
int dpp_tfindex_scan_verify(const char *tfrecord_path, uint64_t max_record, dpp_tfindex_t *out,
                            dpp_tfindex_scan_result_t *tail, char *err, size_t errlen);

/* Writes idx as index text to idx_path atomically: a temporary file in the
 * same directory, fsync'd, then renamed over idx_path. Returns 0 or -errno
 * (DPP_EINVAL when idx is not contiguous from 0). */
int dpp_tfindex_write(const dpp_tfindex_t *idx, const char *idx_path);

/* Frees the arrays and empties idx. Accepts an empty or zeroed idx. */
void dpp_tfindex_close(dpp_tfindex_t *idx);

#endif
