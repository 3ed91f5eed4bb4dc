/* SPDX-License-Identifier: Apache-2.0 */
/* A file read by offset, wherever it lives: a local file (pread on fd) or
 * an object of a store, whose reads its owner makes (storage/s3.h's
 * dpp_s3_rfile_t is one). The readers of columnar and text formats
 * (parquet/, text/) read through it, so that one reader serves both. */
#ifndef DPP_BASE_RFILE_H
#define DPP_BASE_RFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct dpp_rfile dpp_rfile_t;

struct dpp_rfile {
    int fd; /* >= 0: a local file (closed by whoever opened it) */
    /* fd < 0: reads up to len bytes at off into buf, as pread does (fewer
     * only at the end); returns the count or a negative error with words in
     * why (the store's, naming the object). */
    ssize_t (*read)(dpp_rfile_t *f, void *buf, size_t len, uint64_t off);
    uint64_t size;
    int64_t version; /* a file's mtime in ns, an object's ETag hash */
    char why[512];   /* the last failed read, in words ("" when none) */
};

/* Sets f up for the local file fd, of size bytes, modified at mtime_ns. */
void dpp_rfile_local(dpp_rfile_t *f, int fd, uint64_t size, int64_t mtime_ns);

/* Up to len bytes at off, fewer only at the end (0 there): the count, or
 * -errno / a DPP_E* code with f->why saying what happened. */
ssize_t dpp_rfile_read(dpp_rfile_t *f, void *buf, size_t len, uint64_t off);

/* All len bytes at off: 0, DPP_ETRUNCATED when the data ends first, or the
 * error of dpp_rfile_read. */
int dpp_rfile_read_full(dpp_rfile_t *f, void *buf, size_t len, uint64_t off);

#endif
