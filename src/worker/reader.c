// SPDX-License-Identifier: Apache-2.0
// Whole-file reads with io_uring (several reads in flight) or pread.
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "dpp/error.h"
#include "reader.h"

static atomic_int fallback_logged;

int dpp_reader_init(dpp_reader_t *r, unsigned depth, size_t chunk)
{
    memset(r, 0, sizeof *r);
    r->depth = depth ? depth : 4;
    r->chunk = chunk ? chunk : (1u << 20);
    const char *force = getenv("DPP_FORCE_PREAD");
    int rc = (force && strcmp(force, "1") == 0) ? -EPERM : io_uring_queue_init(r->depth, &r->ring, 0);
    if (rc == 0) {
        r->use_uring = 1;
        return 0;
    }
    if (atomic_exchange(&fallback_logged, 1) == 0)
        DPP_WARN("io_uring_unavailable error=\"%s\" fallback=pread%s", dpp_strerror(rc),
                 force ? " reason=DPP_FORCE_PREAD" : "");
    return 0;
}

void dpp_reader_close(dpp_reader_t *r)
{
    if (r->use_uring)
        io_uring_queue_exit(&r->ring);
    r->use_uring = 0;
}

static int read_pread(int fd, uint8_t *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = pread(fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return DPP_ETRUNCATED; /* the file shrank under us */
        off += (size_t)n;
    }
    return 0;
}

/* Keeps up to depth reads in flight; a short read is requeued for the rest
 * of its range and -EAGAIN is retried, neither is an error. */
static int read_uring(dpp_reader_t *r, int fd, uint8_t *buf, size_t len)
{
    size_t next = 0;    /* next offset not yet submitted */
    size_t done = 0;    /* bytes completed */
    unsigned inflight = 0;
    int err = 0;
    while (done < len) {
        while (!err && inflight < r->depth && next < len) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
            if (sqe == NULL)
                break;
            size_t n = len - next < r->chunk ? len - next : r->chunk;
            io_uring_prep_read(sqe, fd, buf + next, (unsigned)n, next);
            sqe->user_data = next; /* the range ends at its chunk's end (see below) */
            inflight++;
            next += n;
        }
        if (inflight == 0)
            break;
        io_uring_submit(&r->ring);
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&r->ring, &cqe);
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return rc;
        /* Reads start on chunk boundaries and requeued remainders mid-chunk; either
         * way a read covers [off, end of off's chunk). */
        size_t off = (size_t)cqe->user_data;
        size_t chunk_end = (off / r->chunk) * r->chunk + r->chunk;
        if (chunk_end > len)
            chunk_end = len;
        size_t want = chunk_end - off;
        int res = cqe->res;
        io_uring_cqe_seen(&r->ring, cqe);
        inflight--;
        if (res == -EAGAIN || res == -EINTR || (res > 0 && (size_t)res < want)) {
            size_t got = res > 0 ? (size_t)res : 0;
            done += got;
            struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
            if (sqe == NULL) {
                io_uring_submit(&r->ring);
                sqe = io_uring_get_sqe(&r->ring);
            }
            if (sqe == NULL)
                return -EBUSY;
            io_uring_prep_read(sqe, fd, buf + off + got, (unsigned)(want - got), off + got);
            sqe->user_data = off + got;
            inflight++;
            continue;
        }
        if (res < 0) {
            err = res;
        } else if (res == 0) {
            err = DPP_ETRUNCATED;
        } else {
            done += (size_t)res;
        }
        if (err && inflight == 0)
            return err;
    }
    return err;
}

int dpp_reader_read_file(dpp_reader_t *r, const char *path, uint64_t max_size, uint8_t **buf,
                         size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    uint8_t *data = NULL;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EISDIR;
        goto out;
    }
    if ((uint64_t)st.st_size > max_size) {
        rc = DPP_ETOOBIG;
        goto out;
    }
    size_t size = (size_t)st.st_size;
    data = malloc(size ? size : 1);
    if (data == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    rc = r->use_uring ? read_uring(r, fd, data, size) : read_pread(fd, data, size);
    if (rc == 0) {
        *buf = data;
        *len = size;
        data = NULL;
    }
out:
    free(data);
    close(fd);
    return rc;
}
