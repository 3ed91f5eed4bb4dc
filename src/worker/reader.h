/* SPDX-License-Identifier: Apache-2.0 */
/* Reads split files for a pipeline thread: io_uring with several large reads
 * in flight, or pread where a ring cannot be set up (some container seccomp
 * profiles block io_uring) or DPP_FORCE_PREAD=1 asks for it. */
#ifndef DPP_WORKER_READER_H
#define DPP_WORKER_READER_H

#include <stddef.h>
#include <stdint.h>

#include <liburing.h>

typedef struct dpp_reader {
    struct io_uring ring;
    int use_uring;
    unsigned depth;      /* reads in flight */
    size_t chunk;        /* bytes per read */
} dpp_reader_t;

/* Sets up a reader with `depth` reads of `chunk` bytes in flight. Falls back
 * to pread (and logs that once per process) when the ring cannot be made.
 * Always returns 0; close with dpp_reader_close(). */
int dpp_reader_init(dpp_reader_t *r, unsigned depth, size_t chunk);
void dpp_reader_close(dpp_reader_t *r);

/* Reads the whole regular file at path into a new malloc'd buffer (*buf,
 * *len; caller frees). Files over max_size are DPP_ETOOBIG. Returns 0 or a
 * negative error (-ENOENT, -EISDIR for a non-regular file, -EIO...). */
int dpp_reader_read_file(dpp_reader_t *r, const char *path, uint64_t max_size, uint8_t **buf,
                         size_t *len);

#endif
