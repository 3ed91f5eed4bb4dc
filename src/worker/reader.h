/* SPDX-License-Identifier: Apache-2.0 */
/* Streams the TFRecord records of a byte range of a file, for one pipeline
 * thread: a ring of `depth` buffers of `chunk_bytes` is kept filled by
 * io_uring reads in flight (or by pread where a ring cannot be set up: some
 * container seccomp profiles block io_uring), both CRCs of every record are
 * checked, and records are handed out in order without copying, except the
 * few that straddle two buffers. */
#ifndef DPP_WORKER_READER_H
#define DPP_WORKER_READER_H

#include <stddef.h>
#include <stdint.h>

#include "base/rfile.h"

/* Defaults, from bench/reader.c (figures in reader.c, above dpp_reader_new):
 * 2 MiB of buffers per pipeline thread. */
#define DPP_READER_DEFAULT_CHUNK (512u << 10)
#define DPP_READER_DEFAULT_DEPTH 4u
#define DPP_READER_DEFAULT_MAX_RECORD (64ull << 20)
/* The largest accepted settings: the memory bound must fit a size_t. */
#define DPP_READER_MAX_CHUNK (256u << 20)
#define DPP_READER_MAX_DEPTH 256u
#define DPP_READER_MAX_MAX_RECORD (1ull << 40)
/* Reads dpp_reader_read_ranges() keeps in flight: enough for a network
 * filesystem's latency to be paid once for many small reads (footers). */
#define DPP_READER_RANGES_DEPTH 32u

typedef struct dpp_reader_config {
    size_t chunk_bytes;  /* bytes per read; 0: default. Rounded up to 4096 with direct */
    unsigned depth;      /* reads in flight and buffers in the ring; 0: default */
    int direct;          /* open files O_DIRECT (falls back to buffered where refused) */
    int force_pread;     /* no io_uring (so does DPP_FORCE_PREAD=1 in the environment) */
    uint64_t max_record; /* longer payloads are DPP_ETOOBIG; 0: default */
    int time_crc;        /* measure the time spent in CRC (two clock reads per record) */
} dpp_reader_config_t;

typedef struct dpp_reader_stats {
    uint64_t bytes_read; /* bytes that reads returned, including O_DIRECT alignment */
    uint64_t records;    /* records handed out (not counting corrupt ones) */
    uint64_t copied;     /* bytes of records that straddled buffers and were copied */
    uint64_t io_wait_ns; /* time next() waited for reads (the pread calls themselves with pread) */
    uint64_t crc_ns;     /* time in CRC32C, only when cfg.time_crc */
} dpp_reader_stats_t;

typedef struct dpp_reader dpp_reader_t;

/* Makes a reader: its buffers (allocated here, reused for every file) and its
 * ring. When the ring cannot be set up it reads with pread instead and logs
 * that once per process; so it does when cfg->force_pread or the environment
 * has DPP_FORCE_PREAD=1. cfg may be NULL (all defaults). Returns 0 with *out
 * (free with dpp_reader_free()), DPP_EINVAL for settings above the
 * DPP_READER_MAX_* limits, or -ENOMEM. */
int dpp_reader_new(dpp_reader_t **out, const dpp_reader_config_t *cfg);

/* Closes the open file, if any, and frees the reader. Accepts NULL. */
void dpp_reader_free(dpp_reader_t *r);

/* 1 when the reader reads with io_uring, 0 with pread. */
int dpp_reader_uses_uring(const dpp_reader_t *r);

/* The most memory a reader with this configuration (NULL: defaults) holds:
 * depth * chunk_bytes of buffers plus one record's scratch (max_record + 16).
 * Counted against the worker's memory budget; the scratch only grows to the
 * largest record that straddled two buffers. */
size_t dpp_reader_memory_bound(const dpp_reader_config_t *cfg);

/* Opens path (O_RDONLY | O_CLOEXEC | O_NOFOLLOW; regular files only) and
 * starts reading bytes [start, end) of it; end = UINT64_MAX means to the end
 * of the file. The range must hold whole records: start is a record's offset
 * and end the end of one (from an index), or the range is the whole file. If
 * the file ends before `end`, the record at the end of the file is
 * DPP_ETRUNCATED. A file already open is closed first. Returns 0, -errno
 * (-ENOENT, -ELOOP for a symlink, -EISDIR for a directory, -EINVAL for another
 * non-regular file) or DPP_EINVAL when start > end. */
int dpp_reader_open(dpp_reader_t *r, const char *path, uint64_t start, uint64_t end);

/* dpp_reader_open for an object of an S3-compatible store: url is
 * s3://bucket/key, of `size` bytes (as listed) and version etag ("" or
 * NULL: any). Each chunk is a ranged GET with If-Match on the thread's
 * client (dpp_s3_thread_client), depth of them in flight; a failed GET is
 * the -errno or DPP_E* of storage/s3.h at the chunk's first record, its
 * words in dpp_reader_error_text(). Returns 0, DPP_EINVAL (a bad URL, or
 * start > end) or DPP_EPATH when the process has no S3 configuration. */
int dpp_reader_open_object(dpp_reader_t *r, const char *url, const char *etag, uint64_t size,
                           uint64_t start, uint64_t end);

/* The gaps in the framing dpp_reader_next() passed over in the open range:
 * how many, and the last one's bytes [*from, *to) (*to: where records
 * resumed). */
uint64_t dpp_reader_gaps(const dpp_reader_t *r, uint64_t *from, uint64_t *to);

/* The store's words for the last failed read of an object ("" when none). */
const char *dpp_reader_error_text(const dpp_reader_t *r);

/* The next record of the range. Returns 1 with *payload and *len (valid until
 * the next call on r, owned by r) and *offset = the file offset of the
 * record's frame; 0 at the clean end of the range (and on every later call)
 * with *offset = the end;
 * or an error with *offset = the offset of the record it is about:
 *  - DPP_ECORRUPT for a payload CRC mismatch: the record is skipped and the
 *    caller may go on calling;
 *  - a length CRC mismatch is a gap in the framing: the reader looks for the
 *    next record past it (format/tfrecord.h: resynchronisation) and hands
 *    that out (or ends the range cleanly when the gap runs to its end),
 *    counting the gap (dpp_reader_gaps);
 *  - DPP_ECORRUPT for a gap whose search gave up, DPP_ETRUNCATED (the range or the
 *    file ends inside a record), DPP_ETOOBIG (length > max_record, checked
 *    right after the length CRC, before any allocation) and -errno for a read
 *    error: no later record boundary can be trusted, so every later call
 *    returns the same error and offset.
 * -ENOMEM when a straddling record's scratch cannot grow (nothing is consumed:
 * a later call retries); DPP_EINVAL when no file is open. */
int dpp_reader_next(dpp_reader_t *r, const uint8_t **payload, size_t *len, uint64_t *offset);

/* 0 while more records may follow, else the error every later
 * dpp_reader_next() repeats: tells a length-CRC DPP_ECORRUPT (stop) from a
 * payload-CRC one (go on). */
int dpp_reader_stuck(const dpp_reader_t *r);

/* Ends the current file: waits for the reads still in flight (their buffers
 * are reused for the next file) and closes it. Does nothing when no file is
 * open. */
void dpp_reader_close(dpp_reader_t *r);

/* A byte range of a file, for dpp_reader_read_ranges(). */
typedef struct dpp_read_range {
    /* with dpp_reader_read_ranges(r, -1, ...): what to read it from, src
     * when set (a local file, or an object: ranged GETs of up to 8 MiB on
     * the thread's client, as many in flight as with a ring), else fd */
    dpp_rfile_t *src;
    int fd;
    uint64_t off;
    size_t len;
    const uint8_t *data; /* out: where its bytes are */
} dpp_read_range_t;

/* The most bytes one dpp_reader_read_ranges() call may read: the record
 * scratch's bound (max_record + 16), which the call uses as its buffer, so
 * that a reader's memory stays dpp_reader_memory_bound() whichever format
 * its thread reads. */
size_t dpp_reader_ranges_max(const dpp_reader_t *r);

/* Reads ranges[0..n) of fd (opened by the caller; -1: each range's own fd)
 * back to back into the reader's scratch, with up to DPP_READER_RANGES_DEPTH
 * (or `depth`, when larger) reads of at most chunk_bytes in flight on the
 * ring (pread without one): a columnar format reads what a split needs of a
 * file at once, not a column at a time, and an index task batch reads the
 * tails of many files at once. Sets each range's
 * data (owned by r, valid until the next call on r). No file may be open on
 * r (the scratch is shared with straddling records). Returns 0;
 * DPP_ETOOBIG when the lengths add up to more than dpp_reader_ranges_max()
 * (nothing read); DPP_ETRUNCATED when the file ends inside a range; -errno
 * for a read error (an object's: the storage/s3.h error, its words in
 * dpp_reader_error_text()); DPP_EINVAL with a file open; -ENOMEM. */
int dpp_reader_read_ranges(dpp_reader_t *r, int fd, dpp_read_range_t *ranges, size_t n);

/* Counters since dpp_reader_new(). */
void dpp_reader_get_stats(const dpp_reader_t *r, dpp_reader_stats_t *out);

#endif
